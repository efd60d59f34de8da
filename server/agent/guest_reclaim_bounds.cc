#include "server/agent/guest_reclaim_bounds.h"

#include <algorithm>
#include <utility>

#include "policy/pagecache_law.h"

namespace plimsoll::server::agent {

double GuestReclaimRefaultStop() {
  constexpr double kPageBytes = 4096;
  return policy::LawParams{}.refault_target_bytes_per_second / kPageBytes;
}

v1::ReclaimBounds GuestReclaimBounds(const v1::Guest& guest) {
  v1::ReclaimBounds b;
  if (!guest.has_free_page_reporting() || !guest.free_page_reporting()) return b;
  // Its last reclaim did not come back to the host (reclaim_claim_check.h): paused.
  if (guest.agent().reclaim().bounds_pause_left_seconds() > 0) return b;
  // The view's stats are those the decision was made on: the agent's only when it reported.
  if (!guest.stats().has_anon() || !guest.stats().has_active_file()) return b;
  const v1::Decision& d = guest.last_decision();
  const int64_t keep = std::max(d.working_set_bytes(), d.policy_floor_bytes());
  if (d.working_set_bytes() <= 0 || keep <= 0) return b;
  b.set_enabled(true);
  b.set_keep_bytes(static_cast<uint64_t>(keep));
  b.set_step_bytes(kGuestReclaimStepBytes);
  b.set_max_bytes_per_second(kGuestReclaimBytesPerSecond);
  b.set_refaults_per_second_stop(GuestReclaimRefaultStop());
  return b;
}

void PublishedReclaimBounds::SetSource(Source source) {
  absl::MutexLock l(&mu_);
  source_ = std::move(source);
  indexed_.reset();
  index_.clear();
}

std::optional<v1::ReclaimBounds> PublishedReclaimBounds::BoundsFor(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  if (!source_) return std::nullopt;
  std::shared_ptr<const v1::ListGuestsResponse> view = source_();
  if (view == nullptr) return std::nullopt;
  if (view != indexed_) {
    index_.clear();
    for (int i = 0; i < view->guests_size(); ++i) index_[view->guests(i).uuid()] = i;
    indexed_ = std::move(view);
  }
  auto it = index_.find(uuid);
  if (it == index_.end()) return std::nullopt;
  return GuestReclaimBounds(indexed_->guests(it->second));
}

}  // namespace plimsoll::server::agent
