// Derives a guest's history (guest_history.h) from one snapshot of it to the next: the one place
// where landing, report freshness against the landing, counter rates, the size at a report's
// time, the memory outside MemTotal and the balloon's progress are worked out. plimsolld's
// collect step (server/loop/guest_tracker.h) and the simulator (sim/simulation.h) call it once per
// snapshot for every guest, with the guest's view as they built it (identity, limits, actual and
// target, stats, agent signals, disk reads) and the memory they keep for it.
//
//   landed     |actual - target| <= LandingToleranceBytes(target); a new target (a change of a
//              byte or more) starts the journey again; first seen landed: landed long ago
//   measured   the latest report is newer than the landing (report_after_landing)
//   rates      guest_signals.h ReadSignals over the reports (stall, refaults, OOM kills);
//              disk reads over the host's reads of them (each at its own time)
//   size at    the latest size recorded at or before the report's time (8 snapshots kept)
//   size after the size at the first snapshot at or after the report's time, as the snapshot
//              that first saw the report found it, kept until the next report
//   outside    min over snapshots of max(0, max_bytes - MemTotal)
//   progress   balloon_progress.h CheckProgress
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_HISTORY_DERIVER_H_
#define PLIMSOLL_POLICY_HISTORY_DERIVER_H_

#include <array>
#include <optional>
#include <utility>

#include "policy/balloon_progress.h"
#include "policy/guest_history.h"
#include "policy/guest_signals.h"
#include "policy/policy.h"

namespace plimsoll::policy {

// A balloon within this of its target has arrived: the driver keeps a few pages, and a large
// target moves in larger steps. max(16 MiB, 1% of the target).
double LandingToleranceBytes(double target_bytes);

// What DeriveHistory keeps between snapshots for one guest. Starts empty for a guest never seen.
struct HistoryMemory {
  std::optional<double> target_bytes;  // the target at the previous snapshot
  std::optional<double> landed_s;
  SignalMemory signals;                // the reports' counters and rates
  ProgressMemory progress;             // CheckProgress's windows
  // The disk read counter at the previous read, when it was read, and the rate then (since the
  // read before it).
  std::optional<double> disk_read_bytes;
  double disk_read_s = 0;
  std::optional<double> disk_read_bytes_per_s;
  std::optional<double> disk_read_since_s;
  // The balloon's size at the latest snapshots, oldest first (unix seconds, bytes).
  std::array<std::pair<double, double>, 8> sizes_at{};
  int sizes_at_count = 0;
  std::optional<double> outside_bytes;
  std::optional<double> size_after_report_bytes;  // GuestHistory's, for the latest report
};

// The history of `guest` at `now_s` (unix seconds), updating `memory`. `guest.max_bytes` is the
// balloon's ceiling (<memory>, not an operator's override of it). The result's
// pending_target_bytes is left absent: the caller knows its calls in flight.
GuestHistory DeriveHistory(const GuestView& guest, double now_s, HistoryMemory* memory);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_HISTORY_DERIVER_H_
