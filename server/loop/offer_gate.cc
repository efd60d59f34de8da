#include "server/loop/offer_gate.h"

#include <algorithm>

namespace plimsoll::server {

int64_t OfferGate::Update(int64_t headroom_bytes, absl::Time now) {
  if (!samples_.empty() && now < samples_.back().first) samples_.clear();
  // Before the first sample the headroom counts as zero: a new gate offers nothing for `hold`.
  if (samples_.empty()) samples_.emplace_back(now, 0);
  samples_.emplace_back(now, headroom_bytes);
  // The oldest sample stops mattering once the next one already held at the window's start.
  const absl::Time window_start = now - hold_;
  while (samples_.size() > 1 && samples_[1].first <= window_start) samples_.pop_front();
  int64_t lowest = samples_.front().second;
  for (const auto& [at, bytes] : samples_) lowest = std::min(lowest, bytes);
  return std::max<int64_t>(0, lowest);
}

}  // namespace plimsoll::server
