// LoopControlCore: the daemon's ControlCore, backed by the control loop.
//
// Changes go into the OverrideStore (persisted before a method returns OK)
// and take effect on the loop's next tick, which the core asks for at once
// (ControlLoop::Wake). The loop reads OverrideStore::snapshot() each tick and
// applies it (control_loop.h says how each setting acts). Reclaims are planned
// with PlanReclaim over the loop's published view (with the overrides stored
// since that view was published laid over it) and handed to the loop as holds
// (ControlLoop::AddReclaimHold); the loop publishes ReclaimEvent APPLIED when
// its next tick puts them in force and EXPIRED when they end. Reclaim returns
// before that tick: applied=true means "handed to the loop, which was woken".
// A plan that takes from no guest is returned with applied=false and holds
// nothing. Override and host-policy changes are published here, as they are
// acknowledged.
//
// Guests are resolved against the loop's published view, so a guest that
// started since the last tick is NOT_FOUND until the next one (at most one
// tick, and a domain start wakes the loop).
//
// Thread-safe: every method may run on any gRPC thread, concurrently with the
// tick. No method waits for a tick; mutators wait only for the state file's
// write (OverrideStore serialises them), which never holds up the tick.
#ifndef PLIMSOLL_SERVER_API_LOOP_CONTROL_CORE_H_
#define PLIMSOLL_SERVER_API_LOOP_CONTROL_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "server/api/control_core.h"
#include "server/api/reclaim_planner.h"
#include "server/events/watch_hub.h"
#include "server/loop/control_loop.h"
#include "server/state/overrides.h"

namespace plimsoll::server {

class LoopControlCore : public ControlCore {
 public:
  // Everything borrowed; must outlive the core. `store` and `hub` must be the
  // ones the loop was given (LoopDeps::overrides, LoopDeps::hub).
  LoopControlCore(ControlLoop* loop, OverrideStore* store, WatchHub* hub, Clock* clock,
                  ReclaimPlannerOptions planner = {});

  absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> SetGuestPolicy(
      const plimsoll::v1::SetGuestPolicyRequest& request, const Caller& caller) override;
  absl::StatusOr<plimsoll::v1::ClearGuestPolicyResponse> ClearGuestPolicy(
      const plimsoll::v1::ClearGuestPolicyRequest& request, const Caller& caller) override;
  absl::StatusOr<plimsoll::v1::HostLine> GetHostLine() override;
  absl::StatusOr<plimsoll::v1::ListGuestPoliciesResponse> ListGuestPolicies() override;
  absl::StatusOr<plimsoll::v1::SetHostPolicyResponse> SetHostPolicy(
      const plimsoll::v1::SetHostPolicyRequest& request, const Caller& caller) override;
  absl::StatusOr<plimsoll::v1::ReclaimPlan> Reclaim(const plimsoll::v1::ReclaimRequest& request,
                                                    const Caller& caller) override;
  std::unique_ptr<WatchSubscription> Watch(const WatchFilter& filter) override;

 private:
  ControlLoop* loop_;
  OverrideStore* store_;
  WatchHub* hub_;
  Clock* clock_;
  ReclaimPlannerOptions planner_;
  std::atomic<int64_t> reclaims_{0};
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_LOOP_CONTROL_CORE_H_
