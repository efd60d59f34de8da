// FakeControlCore: a complete in-memory ControlCore over a view the test
// sets, for tests of the Control service, the CLI and the TLS/authz wiring.
// It keeps overrides and host policy in an OverrideStore (memory-only unless
// given a state file), publishes events into its own WatchHub, plans reclaims
// with PlanReclaim, and records each call with its caller.
//
// View() returns the test's view with the stored overrides, pause state and
// counters filled in, as the real loop's published view would have them, so
// it can serve as the service's ViewSource.
//
// Thread-safe.
#ifndef PLIMSOLL_SERVER_API_TESTING_FAKE_CONTROL_CORE_H_
#define PLIMSOLL_SERVER_API_TESTING_FAKE_CONTROL_CORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "server/api/control_core.h"
#include "server/api/guest_lookup.h"
#include "server/events/watch_hub.h"
#include "server/state/overrides.h"

namespace plimsoll::server {

class FakeControlCore : public ControlCore {
 public:
  // `clock` borrowed. `store` null: a memory-only OverrideStore.
  explicit FakeControlCore(Clock* clock, std::unique_ptr<OverrideStore> store = nullptr);

  void SetView(plimsoll::v1::ListGuestsResponse view);
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> View() const;
  void set_daemon_dry_run(bool dry_run);

  WatchHub& hub() { return hub_; }
  OverrideStore& store() { return *store_; }

  // "SetGuestPolicy", "Reclaim", ... in call order, and the last caller.
  std::vector<std::string> calls() const;
  Caller last_caller() const;

  absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> SetGuestPolicy(
      const plimsoll::v1::SetGuestPolicyRequest& request, const Caller& caller) override;
  absl::StatusOr<plimsoll::v1::ClearGuestPolicyResponse> ClearGuestPolicy(
      const plimsoll::v1::ClearGuestPolicyRequest& request, const Caller& caller) override;
  // The view's line as of the fake clock (LineAsOf, like the daemon's core).
  absl::StatusOr<plimsoll::v1::HostLine> GetHostLine() override;
  absl::StatusOr<plimsoll::v1::ListGuestPoliciesResponse> ListGuestPolicies() override;
  absl::StatusOr<plimsoll::v1::SetHostPolicyResponse> SetHostPolicy(
      const plimsoll::v1::SetHostPolicyRequest& request, const Caller& caller) override;
  absl::StatusOr<plimsoll::v1::ReclaimPlan> Reclaim(const plimsoll::v1::ReclaimRequest& request,
                                                    const Caller& caller) override;
  std::unique_ptr<WatchSubscription> Watch(const WatchFilter& filter) override;

 private:
  void Record(const std::string& call, const Caller& caller);

  Clock* clock_;
  std::unique_ptr<OverrideStore> store_;
  WatchHub hub_;
  mutable absl::Mutex mu_;
  plimsoll::v1::ListGuestsResponse view_ ABSL_GUARDED_BY(mu_);
  bool daemon_dry_run_ ABSL_GUARDED_BY(mu_) = false;
  int reclaims_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  Caller last_caller_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_TESTING_FAKE_CONTROL_CORE_H_
