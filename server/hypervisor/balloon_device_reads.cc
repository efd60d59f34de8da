#include "server/hypervisor/balloon_device_reads.h"

#include <algorithm>

namespace plimsoll::hypervisor {

BalloonDeviceReads::BalloonDeviceReads(BalloonDeviceReadLimits limits)
    : limits_{std::max(1, limits.reads_per_listing), std::max(1, limits.max_backoff_listings)} {}

void BalloonDeviceReads::BeginListing() {
  ++listing_;
  reads_left_ = limits_.reads_per_listing;
}

BalloonDeviceReads::Plan BalloonDeviceReads::Next(const std::string& uuid, unsigned int id) {
  auto it = runs_.find(uuid);
  if (it != runs_.end() && it->second.id == id) {
    if (it->second.read) return Plan{false, it->second.reporting};
    if (listing_ < it->second.retry_at) return Plan{false, std::nullopt};  // backing off
  }
  // Never read, a new run, or a failed run due again.
  if (reads_left_ <= 0) return Plan{false, std::nullopt};
  --reads_left_;
  return Plan{true, std::nullopt};
}

void BalloonDeviceReads::Read(const std::string& uuid, unsigned int id, std::optional<bool> reporting) {
  runs_.insert_or_assign(uuid, Run{id, true, reporting, 0, 0});
}

int BalloonDeviceReads::Failed(const std::string& uuid, unsigned int id, bool* first) {
  Run& run = runs_[uuid];
  if (run.id != id || run.read) run = Run{id, false, std::nullopt, 0, 0};
  ++run.failures;
  *first = run.failures == 1;
  // 1, 2, 4, ... listings, capped (the shift is bounded before it could overflow).
  const int wait = std::min<int64_t>(limits_.max_backoff_listings, int64_t{1} << std::min(run.failures - 1, 30));
  run.retry_at = listing_ + static_cast<uint64_t>(wait);
  return wait;
}

}  // namespace plimsoll::hypervisor
