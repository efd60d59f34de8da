#include "agent/reclaim_bounds.h"

#include <algorithm>
#include <cmath>

namespace plimsoll::agent {
namespace {

// A host stop is usable when it is a real, non-negative number.
bool ValidStop(bool has, double v) { return !has || (std::isfinite(v) && v >= 0); }

}  // namespace

void WindowMax::Record(uint64_t value, absl::Time at) {
  // An earlier value no larger than this one can never be the maximum again.
  while (!run_.empty() && run_.back().second <= value) run_.pop_back();
  run_.emplace_back(at, value);
  // Entries already outside the window for `at` are dropped here too, so the run stays short
  // even when Max is never called; the newest always stays.
  while (run_.size() > 1 && at - run_.front().first >= window_) run_.pop_front();
}

uint64_t WindowMax::Max(absl::Time now) const {
  for (const auto& [at, value] : run_) {
    // The first entry still inside the window is the largest of those inside (values fall).
    if (now - at < window_) return value;
  }
  return run_.empty() ? 0 : run_.back().second;
}

ReclaimBoundsKeeper::ReclaimBoundsKeeper(ReclaimOwnLimits own)
    : own_(own), keep_(own.keep_hold), keep_file_(own.keep_hold) {}

void ReclaimBoundsKeeper::Update(const v1::ReclaimBounds& bounds, absl::Time now) {
  last_ = bounds;
  received_ = now;
  valid_ = ValidStop(bounds.has_psi_some_avg10_stop_pct(), bounds.psi_some_avg10_stop_pct()) &&
           ValidStop(bounds.has_refaults_per_second_stop(), bounds.refaults_per_second_stop());
  keep_.Record(bounds.keep_bytes(), now);
  keep_file_.Record(bounds.keep_file_bytes(), now);
}

BoundsStatus ReclaimBoundsKeeper::Effective(absl::Time now, ReclaimLimits* limits) const {
  *limits = ReclaimLimits{};
  limits->keep_bytes = keep_.Max(now);
  limits->keep_file_bytes = std::max(keep_file_.Max(now), own_.min_file_bytes);
  if (!last_.has_value()) return BoundsStatus::kNone;
  if (now - received_ > own_.bounds_ttl) return BoundsStatus::kExpired;
  if (!valid_) return BoundsStatus::kInvalid;
  const v1::ReclaimBounds& b = *last_;
  limits->enabled = b.enabled();
  limits->step_bytes = std::min(b.step_bytes(), own_.max_step_bytes);
  limits->max_bytes_per_second = std::min(static_cast<double>(b.max_bytes_per_second()), own_.max_bytes_per_second);
  limits->psi_stop_pct =
      b.has_psi_some_avg10_stop_pct() ? std::min(b.psi_some_avg10_stop_pct(), own_.psi_stop_pct) : own_.psi_stop_pct;
  limits->refault_stop_per_second = b.has_refaults_per_second_stop()
                                        ? std::min(b.refaults_per_second_stop(), own_.refault_stop_per_second)
                                        : own_.refault_stop_per_second;
  return BoundsStatus::kLive;
}

}  // namespace plimsoll::agent
