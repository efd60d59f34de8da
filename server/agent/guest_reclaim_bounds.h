// The reclaim bounds plimsolld sends each agent (agent.reclaim_bounds; the agent's side is
// docs/agent.md, "Reclaim"): the policy names what the guest keeps, the balloon's free page
// reporting decides whether reclaiming returns anything to the host.
//
// For a guest in the published view:
//   - free page reporting not known to be on: enabled = false. Without it the cache the agent
//     drops stays in QEMU's memory: the guest loses its cache and the host gains nothing.
//   - reclaim paused (AgentReclaim.bounds_pause_left_seconds > 0: its last claimed reclaim did
//     not show in QEMU's RSS, server/loop/reclaim_claim_check.h): enabled = false.
//   - no decision naming a working set (a policy other than pagecache, or none yet), or a
//     decision made without the agent's figures: enabled = false. Without them pagecache's W
//     counts all cache as hot, an upper bound; the agent would hold it as its keep for minutes
//     (seen on a real guest: 774 MiB named before its first report, 256 MiB after).
//   - otherwise: keep_bytes = max(the decision's working set, its floor), the step and rate
//     below, and a refault stop at pagecache's refault target (below); the PSI stop is the
//     agent's own.
// The agent holds a keep for minutes even if a lower one follows, and stops when bounds stop
// coming (docs/agent.md), so a guest whose stats go stale keeps the last keep it was named.
#ifndef PLIMSOLL_SERVER_AGENT_GUEST_RECLAIM_BOUNDS_H_
#define PLIMSOLL_SERVER_AGENT_GUEST_RECLAIM_BOUNDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "plimsoll/v1/agent.pb.h"
#include "plimsoll/v1/control.pb.h"
#include "server/agent/reclaim_bounds_provider.h"

namespace plimsoll::server::agent {

// 64 MiB a write and 32 MiB/s: a 1 GiB guest's cold cache back in under half a minute, in steps
// small enough that the agent's pressure stop comes between two of them.
inline constexpr uint64_t kGuestReclaimStepBytes = uint64_t{64} << 20;
inline constexpr uint64_t kGuestReclaimBytesPerSecond = uint64_t{32} << 20;
// File refaults per second (4 KiB pages) over which the agent stops: pagecache's refault target
// (LawParams, 1 MiB/s), the rate at which the policy itself calls a guest pressed. The agent's
// own stop (1000/s) let it take a hot set back and forth at ~600 refaults/s on the lab's trio.
double GuestReclaimRefaultStop();

// The bounds for `guest` (see the file comment). Pure.
v1::ReclaimBounds GuestReclaimBounds(const v1::Guest& guest);

// A ReclaimBoundsProvider reading the loop's published view. Thread-safe; until SetSource, and
// for a guest the view does not hold, it gives none.
class PublishedReclaimBounds final : public ReclaimBoundsProvider {
 public:
  using Source = std::function<std::shared_ptr<const v1::ListGuestsResponse>()>;
  void SetSource(Source source);
  std::optional<v1::ReclaimBounds> BoundsFor(const std::string& uuid) override;

 private:
  absl::Mutex mu_;
  Source source_ ABSL_GUARDED_BY(mu_);
  // The view last indexed, and its guests by uuid: a view is published once a tick, reports
  // come many times a tick.
  std::shared_ptr<const v1::ListGuestsResponse> indexed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_GUEST_RECLAIM_BOUNDS_H_
