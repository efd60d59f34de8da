// Does a guest's balloon follow the target we set? Three ways it does not, each from a seed
// lesson (domain.md section 2) or a squeezed one (section 5):
// - stuck: actual does not approach the target within a time bound. Progress is judged over a
//   window as a rate (bytes per second), so a guest that moves one page every few seconds is
//   stuck, not "cooperating" (squeezed counts any progress at all).
// - churning: while we inflate, the guest's own balloon_deflate counter rises by a large part of
//   what balloon_inflate rose: the balloon-vs-page-cache busy no-op of the 2020 thread, where a
//   53 GB inflation moved 154,828,377 pages each way.
// - self_deflated: actual rose above the target without us asking: the guest deflated on OOM
//   (autodeflate='on'). Risen from the least it was seen at since the target was set, at the
//   calls or by a balloon-change event between them (NoteBalloonSize): a balloon that reached
//   its target and came back up between two calls is seen too.
// The caller decides what to do about it; this file only observes.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_BALLOON_PROGRESS_H_
#define PLIMSOLL_POLICY_BALLOON_PROGRESS_H_

#include <optional>
#include <string>

#include "policy/policy.h"

namespace plimsoll::policy {

struct ProgressParams {
  // |actual - target| within max(tolerance_min_bytes, tolerance_fraction * target) is "there".
  double tolerance_min_bytes = 16.0 * (1 << 20);
  double tolerance_fraction = 0.01;
  // A guest short of its target is judged once per window...
  double window_seconds = 30;
  // ...and must have moved at least this fast towards it (or arrived) to count as following.
  // 1 MiB/s is 256 pages/s; a healthy balloon moves tens to hundreds of MiB/s.
  double min_rate_bytes_per_second = 1.0 * (1 << 20);
  // Churn: balloon_deflate rose by at least this share of what balloon_inflate rose, and by at
  // least churn_min_bytes, between two reports while we were inflating.
  double churn_ratio = 0.5;
  double churn_min_bytes = 16.0 * (1 << 20);
  // Deflation we asked for is not churn: not within this long of a raise of the target (the
  // agent's counters arrive a report after the balloon moved). Both counters must have risen
  // by churn_min_bytes: a guest that only deflated was following a raise.
  double churn_after_raise_seconds = 5;
};

// What CheckProgress remembers between calls for one guest.
struct ProgressMemory {
  std::optional<double> target;  // target_bytes at the previous call
  std::optional<double> actual;  // actual_bytes at the previous call
  // The current window: the direction the guest was asked to move in (-1 inflate, +1 deflate,
  // 0 at its target), since when, and from where.
  int window_direction = 0;
  double window_start_s = 0;
  double window_start_actual = 0;
  std::optional<double> inflate_pages;
  std::optional<double> deflate_pages;
  double raise_s = -1e18;  // when the target was last raised
  // The lowest actual seen while the target was lowest_for_target (unix seconds not needed: only
  // the level), from the calls and from balloon-change events between them (NoteBalloonSize).
  std::optional<double> lowest_actual;
  double lowest_for_target = 0;
};

struct ProgressVerdict {
  ProgressEvent event = ProgressEvent::kNone;
  // True when the guest arrived at a target it had to travel to since the previous call.
  bool arrived = false;
  double tolerance_bytes = 0;
  // Numbers behind the verdict, key=value ("moved=2.0MiB in 30.0s need=30MiB").
  std::string detail;
};

// The tolerance for `target_bytes` under `params`.
double ProgressTolerance(double target_bytes, const ProgressParams& params);

// Judges `guest` (its actual_bytes against its target_bytes) at `now_s`. `memory` is read and
// updated. Progress is measured as movement of actual in the asked direction, so a target that
// keeps moving the same way (a probe every tick) does not restart the clock; a change of
// direction or arriving does. The first call only records.
ProgressVerdict CheckProgress(const GuestView& guest, double now_s, const ProgressParams& params,
                              ProgressMemory* memory);

// Records a balloon size seen between calls (a balloon-change event) for a guest whose target is
// `target_bytes`: the self-deflation check measures a rise from the least size seen.
void NoteBalloonSize(double actual_bytes, double target_bytes, ProgressMemory* memory);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_BALLOON_PROGRESS_H_
