#include "policy/guest_signals.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {
namespace {

// Counters and rates beyond these are not measurements: ~100 GiB/s of refaults.
constexpr double kMaxRefaultPagesPerSecond = 25.0e6;

std::optional<std::string> SizeProblem(const char* name, const std::optional<int64_t>& value,
                                       double ceiling) {
  if (!value.has_value()) return std::nullopt;
  if (*value < 0) return absl::StrCat(name, "=", *value);
  if (static_cast<double>(*value) > ceiling) {
    return absl::StrCat(name, "=", FormatMib(*value), ">max=", FormatMib(ceiling));
  }
  return std::nullopt;
}

// A counter's increase since `previous`, or nullopt when there is no previous value or the
// counter went backwards (guest reboot: start over).
std::optional<double> Increase(double current, const std::optional<double>& previous) {
  if (!previous.has_value() || current < *previous) return std::nullopt;
  return current - *previous;
}

}  // namespace

const char* SignalSourceName(SignalSource source) {
  switch (source) {
    case SignalSource::kAgent:
      return "agent";
    case SignalSource::kLibvirt:
      return "libvirt";
    case SignalSource::kFreeOnly:
      return "free_only";
  }
  return "unknown";
}

std::optional<std::string> ImplausibleStatsReason(const GuestView& guest) {
  // A little slack over the ceiling: MemTotal-based figures may include a few pages the balloon
  // size does not.
  const double ceiling = static_cast<double>(guest.max_bytes) * 1.02;
  for (const auto& [name, value] :
       {std::pair<const char*, const std::optional<int64_t>*>{"unused", &guest.unused_bytes},
        {"usable", &guest.usable_bytes},
        {"disk_caches", &guest.disk_caches_bytes},
        {"anon", &guest.anon_bytes},
        {"unreclaimable", &guest.unreclaimable_bytes},
        {"active_file", &guest.active_file_bytes},
        {"inactive_file", &guest.inactive_file_bytes}}) {
    if (auto problem = SizeProblem(name, *value, ceiling); problem.has_value()) return problem;
  }
  const double agent_sum = static_cast<double>(guest.anon_bytes.value_or(0)) +
                           static_cast<double>(guest.unreclaimable_bytes.value_or(0)) +
                           static_cast<double>(guest.active_file_bytes.value_or(0)) +
                           static_cast<double>(guest.inactive_file_bytes.value_or(0));
  if (agent_sum > ceiling) {
    return absl::StrCat("anon+unreclaimable+file=", FormatMib(agent_sum),
                        ">max=", FormatMib(ceiling));
  }
  if (guest.psi_some_avg10.has_value() &&
      !(*guest.psi_some_avg10 >= 0 && *guest.psi_some_avg10 <= 100)) {
    return absl::StrCat("psi_some_avg10=", FormatFixed(*guest.psi_some_avg10, 1));
  }
  if (guest.refaults_per_second.has_value() &&
      !(*guest.refaults_per_second >= 0 &&
        *guest.refaults_per_second <= kMaxRefaultPagesPerSecond)) {
    return absl::StrCat("refaults_per_second=", FormatFixed(*guest.refaults_per_second, 1));
  }
  if (guest.agent_age_seconds.has_value() &&
      !(*guest.agent_age_seconds >= 0 && std::isfinite(*guest.agent_age_seconds))) {
    return absl::StrCat("agent_age_s=", FormatFixed(*guest.agent_age_seconds, 1));
  }
  return std::nullopt;
}

namespace {

// The source, hard demand and cache of `guest`: what its latest stats say, without its past.
GuestSignals Classify(const GuestView& guest) {
  GuestSignals s;
  const double actual = static_cast<double>(guest.actual_bytes);
  s.cache_bytes = static_cast<double>(guest.disk_caches_bytes.value_or(0));
  if (guest.anon_bytes.has_value() && guest.unreclaimable_bytes.has_value()) {
    s.source = SignalSource::kAgent;
    s.hard_bytes = static_cast<double>(*guest.anon_bytes + *guest.unreclaimable_bytes);
    s.active_file_bytes = static_cast<double>(guest.active_file_bytes.value_or(0));
    if (!guest.disk_caches_bytes.has_value()) {
      s.cache_bytes = static_cast<double>(guest.active_file_bytes.value_or(0) +
                                          guest.inactive_file_bytes.value_or(0));
    }
  } else if (guest.usable_bytes.has_value()) {
    s.source = SignalSource::kLibvirt;
    s.hard_bytes = std::max(0.0, actual - static_cast<double>(*guest.usable_bytes));
  } else {
    s.source = SignalSource::kFreeOnly;
    s.hard_bytes = std::max(0.0, actual - static_cast<double>(guest.unused_bytes.value_or(0)));
  }
  return s;
}

// The balloon driver's direct scans in bytes/s, over the counters' own report times: a sample
// newer than the last gives a new rate, the same sample keeps the last rate, a counter that went
// back (a guest reboot) or a first sample none. Absent without the counter.
std::optional<double> DirectScanRate(const GuestView& guest, double now_s, const SignalMemory& previous,
                                     SignalMemory* next) {
  if (!guest.balloon_direct_scan_bytes.has_value()) return std::nullopt;
  const double bytes = static_cast<double>(*guest.balloon_direct_scan_bytes);
  const double at =
      now_s - guest.balloon_pressure_age_seconds.value_or(std::max(0.0, guest.stats_age_seconds));
  if (previous.direct_scan_s.has_value() && at <= *previous.direct_scan_s + 1e-3) {
    return previous.direct_scan_bytes_per_s;
  }
  std::optional<double> rate;
  if (previous.direct_scan_s.has_value()) {
    if (const std::optional<double> delta = Increase(bytes, previous.direct_scan_bytes)) {
      rate = *delta / (at - *previous.direct_scan_s);
    }
  }
  next->direct_scan_bytes = bytes;
  next->direct_scan_s = at;
  next->direct_scan_bytes_per_s = rate;
  return rate;
}

// OOM kills since the count `previous` remembers; the count is then remembered.
void CountOomKills(const std::optional<uint64_t>& count, const SignalMemory& previous, SignalMemory* next,
                   GuestSignals* s) {
  if (!count.has_value()) return;
  const double kills = static_cast<double>(*count);
  s->new_oom_kills = Increase(kills, previous.oom_kill).value_or(0);
  next->oom_kill = kills;
}

}  // namespace

GuestSignals SignalsOf(const GuestView& guest) {
  GuestSignals s = Classify(guest);
  if (!guest.history.has_value()) return s;
  const GuestHistory& h = *guest.history;
  s.new_report = h.new_report;
  s.report_s = h.report_s;
  s.stall_pct = h.stall_pct;
  s.refault_bytes_per_s = h.refault_bytes_per_s;
  s.new_oom_kills = h.new_oom_kills.value_or(0);
  return s;
}

GuestSignals ReadSignals(const GuestView& guest, double now_s, const SignalMemory& previous,
                         SignalMemory* next) {
  GuestSignals s = Classify(guest);
  const double age = guest.agent_age_seconds.value_or(std::max(0.0, guest.stats_age_seconds));
  s.report_s = now_s - age;
  s.new_report = !previous.report_s.has_value() || s.report_s > *previous.report_s + 1e-3;

  *next = previous;
  if (!s.new_report) {
    // Same measurement as last time: same rates, and nothing new happened in it. The balloon
    // driver's counters are read apart from the stats and may arrive a tick after them: a kill
    // or a scan sample they bring counts now, not a stats period later.
    s.stall_pct = previous.stall_pct;
    s.refault_bytes_per_s = previous.refault_bytes_per_s;
    if (!guest.refaults_per_second.has_value()) {
      if (const std::optional<double> scans = DirectScanRate(guest, now_s, previous, next);
          scans.has_value() && previous.direct_scan_bytes_per_s != scans) {
        s.refault_bytes_per_s = previous.fault_bytes_per_s.value_or(0) + *scans;
        next->refault_bytes_per_s = s.refault_bytes_per_s;
        s.late_counters = true;
      }
    }
    if (!guest.oom_kill.has_value()) CountOomKills(guest.balloon_oom_kills, previous, next, &s);
    return s;
  }
  const double interval =
      previous.report_s.has_value() ? s.report_s - *previous.report_s : 0.0;
  next->report_s = s.report_s;

  // Stall: PSI total over the interval when we can, avg10 otherwise.
  std::optional<double> stall;
  if (guest.psi_some_total_us.has_value()) {
    const double total = static_cast<double>(*guest.psi_some_total_us);
    if (auto delta = Increase(total, previous.psi_total_us); delta && interval > 0) {
      stall = std::clamp(*delta / (interval * 1e6) * 100.0, 0.0, 100.0);
    }
    next->psi_total_us = total;
  }
  if (!stall.has_value() && guest.psi_some_avg10.has_value()) stall = *guest.psi_some_avg10;
  s.stall_pct = stall;

  // Refaults: the agent's rate, else major faults and swap-ins from libvirt and the balloon
  // driver's direct scans.
  std::optional<double> refault;
  if (guest.refaults_per_second.has_value()) {
    refault = *guest.refaults_per_second * kGuestPageBytes;
    // The libvirt counters' bases would span the agent's whole reign when it goes silent: one
    // interval's rate taken over hours of counts. They start over after it.
    next->major_fault.reset();
    next->swap_in_kib.reset();
    next->direct_scan_bytes.reset();
    next->direct_scan_s.reset();
    next->direct_scan_bytes_per_s.reset();
    next->fault_bytes_per_s.reset();
  } else {
    if (guest.major_fault.has_value() || guest.swap_in.has_value()) {
      // A rate only when every counter reported has a previous value and did not go backwards.
      double bytes = 0;
      bool measured = interval > 0;
      if (guest.major_fault.has_value()) {
        const double faults = static_cast<double>(*guest.major_fault);
        const std::optional<double> delta = Increase(faults, previous.major_fault);
        measured = measured && delta.has_value();
        bytes += delta.value_or(0) * kGuestPageBytes;
        next->major_fault = faults;
      }
      if (guest.swap_in.has_value()) {
        const double kib = static_cast<double>(*guest.swap_in);
        const std::optional<double> delta = Increase(kib, previous.swap_in_kib);
        measured = measured && delta.has_value();
        bytes += delta.value_or(0) * 1024.0;
        next->swap_in_kib = kib;
      }
      if (measured) refault = bytes / interval;
    }
    next->fault_bytes_per_s = refault;
    if (const std::optional<double> scans = DirectScanRate(guest, now_s, previous, next)) {
      refault = refault.value_or(0) + *scans;
    }
  }
  s.refault_bytes_per_s = refault;

  CountOomKills(guest.oom_kill.has_value() ? guest.oom_kill : guest.balloon_oom_kills, previous, next, &s);
  next->stall_pct = s.stall_pct;
  next->refault_bytes_per_s = s.refault_bytes_per_s;
  return s;
}

bool HostSeesHardDemand(const GuestView& guest, const GuestSignals& signals, double room_bytes) {
  if (signals.source != SignalSource::kAgent) return true;
  if (!guest.usable_bytes.has_value()) return false;
  return static_cast<double>(*guest.usable_bytes) < room_bytes;
}

}  // namespace plimsoll::policy
