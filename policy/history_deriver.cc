#include "policy/history_deriver.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace plimsoll::policy {
namespace {

// The disk read rate at this snapshot: bytes/s between the previous read and this one, each at
// its own time (now - disk_read_age_seconds). plimsolld reads the disks every
// block_stats_interval and ticks may come more often: the same read seen again keeps the last
// rate. Absent on the first read, without disk reads, or when the counter went backwards (a
// restarted domain).
std::optional<double> DiskReadRate(const GuestView& guest, double now_s, HistoryMemory* m) {
  if (!guest.disk_read_bytes.has_value()) {
    m->disk_read_bytes.reset();
    m->disk_read_bytes_per_s.reset();
    m->disk_read_since_s.reset();
    return std::nullopt;
  }
  const double bytes = static_cast<double>(*guest.disk_read_bytes);
  const double read_s = now_s - guest.disk_read_age_seconds.value_or(0);
  // The same read as last time (1 ms: the age is a difference of two times).
  if (m->disk_read_bytes.has_value() && read_s <= m->disk_read_s + 1e-3 && bytes == *m->disk_read_bytes) {
    return m->disk_read_bytes_per_s;
  }
  std::optional<double> rate;
  std::optional<double> since;
  if (m->disk_read_bytes.has_value() && bytes >= *m->disk_read_bytes && read_s > m->disk_read_s) {
    rate = (bytes - *m->disk_read_bytes) / (read_s - m->disk_read_s);
    since = m->disk_read_s;
  }
  m->disk_read_bytes = bytes;
  m->disk_read_s = read_s;
  m->disk_read_bytes_per_s = rate;
  m->disk_read_since_s = since;
  return rate;
}

// Records `actual` at `now_s`, and returns the balloon's size at `report_s` as the snapshots saw
// it: the latest recorded at or before it, or the oldest kept when the report is older.
// `after` receives the size at the first snapshot at or after `report_s` (the oldest kept when
// the report is older than all of them).
double SizeAtReport(double now_s, double actual, double report_s, HistoryMemory* m, double* after) {
  if (m->sizes_at_count == static_cast<int>(m->sizes_at.size())) {
    std::rotate(m->sizes_at.begin(), m->sizes_at.begin() + 1, m->sizes_at.end());
    --m->sizes_at_count;
  }
  m->sizes_at[m->sizes_at_count++] = {now_s, actual};
  double size = m->sizes_at[0].second;
  *after = actual;
  bool after_found = false;
  for (int i = 0; i < m->sizes_at_count; ++i) {
    const double t = m->sizes_at[i].first;
    if (t <= report_s + 1e-6) size = m->sizes_at[i].second;
    if (!after_found && t >= report_s - 1e-6) {
      *after = m->sizes_at[i].second;
      after_found = true;
    }
  }
  return size;
}

}  // namespace

double LandingToleranceBytes(double target_bytes) {
  return ProgressTolerance(target_bytes, ProgressParams());
}

GuestHistory DeriveHistory(const GuestView& guest, double now_s, HistoryMemory* m) {
  GuestHistory h;
  const double actual = static_cast<double>(guest.actual_bytes);
  const double target = static_cast<double>(guest.target_bytes);

  // Landing: a new target (ours or anyone's) starts the journey again. A guest seen for the
  // first time at its target has been there since before we know (plimsolld adopts a guest's
  // actual size as its target): its first report measures that size.
  const bool first = !m->target_bytes.has_value();
  if (first || std::fabs(*m->target_bytes - target) >= 1) m->landed_s.reset();
  m->target_bytes = target;
  if (std::fabs(actual - target) > LandingToleranceBytes(target)) {
    m->landed_s.reset();
  } else if (first) {
    m->landed_s = -HUGE_VAL;
  } else if (!m->landed_s.has_value()) {
    m->landed_s = now_s;
  }
  h.landed_s = m->landed_s;

  SignalMemory next;
  const GuestSignals s = ReadSignals(guest, now_s, m->signals, &next);
  m->signals = next;
  h.report_s = s.report_s;
  h.new_report = s.new_report;
  h.report_after_landing = h.landed_s.has_value() && s.report_s > *h.landed_s;
  h.stall_pct = s.stall_pct;
  h.refault_bytes_per_s = s.refault_bytes_per_s;
  h.late_counters = s.late_counters;
  if (guest.oom_kill.has_value() || guest.balloon_oom_kills.has_value()) h.new_oom_kills = s.new_oom_kills;
  h.disk_read_bytes_per_s = DiskReadRate(guest, now_s, m);
  h.disk_read_since_s = m->disk_read_since_s;
  if (m->disk_read_since_s.has_value()) h.disk_read_window_s = m->disk_read_s - *m->disk_read_since_s;
  double after = actual;
  h.size_at_report_bytes = SizeAtReport(now_s, actual, s.report_s, m, &after);
  // Taken on the snapshot that first sees the report, and kept: on later ones the report is
  // older, and a snapshot's size kept from before it would be the one "after" it no longer.
  if (s.new_report || !m->size_after_report_bytes.has_value()) m->size_after_report_bytes = after;
  h.size_after_report_bytes = m->size_after_report_bytes;

  if (guest.total_bytes.has_value() && *guest.total_bytes > 0) {
    const double outside = std::max(0.0, static_cast<double>(guest.max_bytes - *guest.total_bytes));
    m->outside_bytes = std::min(m->outside_bytes.value_or(outside), outside);
  }
  h.outside_bytes = m->outside_bytes;

  const ProgressVerdict progress = CheckProgress(guest, now_s, ProgressParams(), &m->progress);
  h.progress = progress.event;
  h.progress_detail = progress.detail;
  return h;
}

}  // namespace plimsoll::policy
