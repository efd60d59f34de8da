// Component of the pagecache law (pagecache_law.h): remember where pressure began.
//
// Without it, a backoff gives half the gap to the ceiling, the cooldown ends, and the probes
// walk the guest back down to the size that hurt it: a sawtooth whose every tooth is balloon
// traffic (a hot guest of 8 GiB moved 27 GiB in 25 minutes). With it, the law remembers the
// last size a measured report found calm (C) and the size pressure was measured at (E):
//   backoff, first of an episode, C > A measured within the window:  a <- max(a, C + s)
//     (the step from C caused the pressure: give it back and one step more)
//   any other backoff: the law's own, a <- max(a, A + backoff * (M - A))
//   the edge  L = C + s after the first, A + s after the other; within window_seconds of the
//   backoff no take or probe goes below L.
// s is the probe step (probe_fraction * M). Pressure that persists after the small backoff
// ends the episode's first backoff, so the next is the law's own: a workload that grew gets
// half the gap one measurement later.
//
// Switched off by window_seconds <= 0.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_PRESSURE_EDGE_H_
#define PLIMSOLL_POLICY_PRESSURE_EDGE_H_

#include <limits>
#include <optional>

namespace plimsoll::policy {

struct EdgeParams {
  double window_seconds = 600;  // <= 0: off
};

struct EdgeMemory {
  std::optional<double> calm_bytes;  // C: the last size a measured report found calm
  double calm_s = -std::numeric_limits<double>::infinity();
  double limit_bytes = 0;  // L
  double limit_until_s = -std::numeric_limits<double>::infinity();
};

// A measured report found the guest calm at `actual_bytes`.
void RecordCalm(double actual_bytes, double now_s, EdgeMemory* memory);

// The allowance after a measured backoff of a guest at `actual_bytes`, where the law's own
// backoff would give `law_allowance_bytes`; `first_in_episode` when no cooldown is running.
// Updates the edge. Returns law_allowance_bytes when the component is off.
double EdgeBackoff(double actual_bytes, double law_allowance_bytes, double step_bytes,
                   bool first_in_episode, double now_s, const EdgeParams& params,
                   EdgeMemory* memory);

// The lowest allowance a take or probe may reach at `now_s` (-infinity when there is no edge).
double EdgeLimit(double now_s, const EdgeMemory& memory);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PRESSURE_EDGE_H_
