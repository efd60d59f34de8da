// Counts a balloon's direction changes that matter: a zigzag filter over the targets it was
// given, in which a change of direction counts only once the target has moved at least
// `threshold` bytes back from the furthest point of the run before it. Smaller wiggles neither
// count nor turn the direction, and the first move of at least `threshold` from the start only
// sets it. The corpus's reversals_per_guest_hour uses it with 2% of the guest's max
// (sim/runner.h wide_reversals): a policy whose floor drifts by a few MiB each report moves its
// target up and down for nothing a balloon needs, and that is not what a reversal measures.
//
// Value type; not thread-safe.
#ifndef PLIMSOLL_SIM_REVERSAL_COUNTER_H_
#define PLIMSOLL_SIM_REVERSAL_COUNTER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace plimsoll::sim {

class ReversalCounter {
 public:
  ReversalCounter(double start, double threshold)
      : low_(start), high_(start), threshold_(threshold) {}

  // The next target (bytes).
  void Add(double target) {
    if (direction_ == 0) {
      low_ = std::min(low_, target);
      high_ = std::max(high_, target);
      if (target - low_ >= threshold_) {
        direction_ = 1;
        extreme_ = target;
      } else if (high_ - target >= threshold_) {
        direction_ = -1;
        extreme_ = target;
      }
      return;
    }
    if ((target - extreme_) * direction_ >= 0) {
      extreme_ = target;  // further the same way
    } else if (std::fabs(target - extreme_) >= threshold_) {
      ++reversals_;
      direction_ = -direction_;
      extreme_ = target;
    }
  }

  int64_t reversals() const { return reversals_; }

 private:
  double low_, high_;  // the range seen before a direction was set
  double threshold_;
  int direction_ = 0;  // +1 growing, -1 shrinking, 0 not yet known
  double extreme_ = 0;  // the furthest target of the current direction
  int64_t reversals_ = 0;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_REVERSAL_COUNTER_H_
