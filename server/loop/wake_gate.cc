#include "server/loop/wake_gate.h"

#include <algorithm>

namespace plimsoll::server {

void WakeGate::Wake(absl::Time now) {
  if (!woken_at_.has_value()) woken_at_ = now;
}

std::optional<int64_t> WakeGate::Spike(const std::string& uuid, absl::Time now) {
  Wake(now);
  if (spiked_set_.insert(uuid).second) spiked_.push_back(uuid);
  SpikeLog& log = spike_log_[uuid];
  if (now - log.logged_at < log_every_) {
    ++log.unlogged;
    return std::nullopt;
  }
  const int64_t unlogged = log.unlogged;
  log = SpikeLog{now, 0};
  return unlogged;
}

absl::Time WakeGate::NextTickAt(absl::Time last_start, absl::Duration tick) const {
  const absl::Time scheduled = last_start + tick;
  if (!woken_at_.has_value()) return scheduled;
  return std::min(scheduled, std::max(*woken_at_, last_start + min_interval_));
}

std::vector<std::string> WakeGate::StartTick() {
  woken_at_.reset();
  spiked_set_.clear();
  std::vector<std::string> out;
  out.swap(spiked_);
  return out;
}

void WakeGate::Forget(const std::string& uuid) { spike_log_.erase(uuid); }

}  // namespace plimsoll::server
