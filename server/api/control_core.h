// server/api/: the control API: the gRPC adapter (control_service), the core it calls
// (control_core, loop_control_core), validation, lookup and the reclaim planner; security/ holds
// authorisation and TLS. It never calls libvirt or /proc: it knows the loop's published view.
//
// ControlCore: what the Control gRPC service needs from the daemon to change
// things. The service (control_service.h) is a thin adapter: it authorizes
// the caller, validates the request with control_validation.h, calls one
// method here, and converts the status once. The control loop implements
// this interface; FakeControlCore (fake_control_core.h) stands in for tests.
//
// Building blocks an implementation is expected to use:
//   - OverrideStore (overrides.h): merge/clear/persist guest overrides and
//     the runtime host policy; the loop reads OverrideStore::snapshot() each
//     tick and applies it (pin, exclude, min/max clamps, shares, priority,
//     budget, reserve, policy, paused).
//   - WatchHub (watch_hub.h): the loop Publish()es events (decisions, guest
//     changes, override/host-policy changes, reclaims); Watch() returns
//     WatchHub::Subscribe(filter).
//
// Contract for every method:
//   - The request has already passed the matching Validate* function of
//     control_validation.h; the core checks only what needs daemon state.
//   - Guests are named by domain name or UUID (UUIDs in any case).
//     NOT_FOUND (naming the guest as given) when no known guest matches.
//   - INVALID_ARGUMENT names the field ("override.pin_bytes: ... above guest
//     \"web\"'s <memory> ..."); FAILED_PRECONDITION says which state refuses.
//   - A change is persisted (when the daemon has a state file) before the
//     method returns OK, takes effect no later than the next tick (the core
//     should wake the loop), and is published as a Watch event.
//
// Thread-safety: every method may be called concurrently from gRPC threads,
// and concurrently with the control loop's tick. Methods must not wait for a
// tick to finish for longer than about a second (Reclaim may wait for the
// next tick to apply its plan; everything else should return at once).
#ifndef PLIMSOLL_SERVER_API_CONTROL_CORE_H_
#define PLIMSOLL_SERVER_API_CONTROL_CORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "plimsoll/v1/control.pb.h"
#include "server/events/watch_hub.h"

namespace plimsoll::server {

// What a caller may do (authz.h decides).
enum class Role {
  kNone = 0,    // authenticated but no role: may call nothing
  kReader = 1,  // ListGuests, GetGuest, GetHostStatus, GetHostLine, ListGuestPolicies, Watch
  kAdmin = 2,   // everything
};

// Who is calling, for audit fields (GuestOverride.updated_by) and logs.
struct Caller {
  Role role = Role::kNone;
  // "unix" for the local socket, else the client certificate's subject
  // ("CN=ops-1,OU=plimsoll-admin,O=Example").
  std::string identity;
  // False for a peer with no verified identity (TCP without a client
  // certificate): such a caller is refused before any role is considered.
  bool authenticated = false;
};

class ControlCore {
 public:
  virtual ~ControlCore() = default;

  // Sets (merges or replaces) the guest's override; the result is checked as
  // a whole (ValidateOverride with the guest) and stored by the guest's UUID.
  // Returns the override in force.
  virtual absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> SetGuestPolicy(
      const plimsoll::v1::SetGuestPolicyRequest& request, const Caller& caller) = 0;

  // Clears some or all settings. The guest may be a running guest or any
  // guest with a stored override (by UUID or last known name); NOT_FOUND
  // only when neither. Clearing nothing is OK with existed=false.
  virtual absl::StatusOr<plimsoll::v1::ClearGuestPolicyResponse> ClearGuestPolicy(
      const plimsoll::v1::ClearGuestPolicyRequest& request, const Caller& caller) = 0;

  // The Plimsoll line (docs/line.md) of the last published tick, served stale (offering 0) when
  // that tick is too old to trust (line_freshness.h).
  virtual absl::StatusOr<plimsoll::v1::HostLine> GetHostLine() = 0;

  // Every stored override, sorted by guest name then UUID.
  virtual absl::StatusOr<plimsoll::v1::ListGuestPoliciesResponse> ListGuestPolicies() = 0;

  // Merges the runtime host policy (unknown policy names: INVALID_ARGUMENT
  // "policy.policy: ..."). Pausing stops balloon moves from the next tick;
  // resuming lets the policy act again.
  virtual absl::StatusOr<plimsoll::v1::SetHostPolicyResponse> SetHostPolicy(
      const plimsoll::v1::SetHostPolicyRequest& request, const Caller& caller) = 0;

  // Plans (dry_run) or plans and applies a reclaim of request.bytes:
  //   - FAILED_PRECONDITION via CheckReclaimAllowed when not dry_run and
  //     management is paused or the daemon runs with dry_run;
  //   - FAILED_PRECONDITION via CheckReclaimPlanSufficient when require_full
  //     and the plan falls short (nothing applied);
  //   - the plan never takes a guest below its floor, never touches excluded
  //     or pinned guests or guests on stale stats, and says why for each
  //     guest it took from (items) or left alone (skipped);
  //   - applied plans hold their guests at or below the new targets for
  //     ReclaimHoldSeconds(request), visible as Guest.reclaim_hold, and
  //     publish ReclaimEvent APPLIED / EXPIRED.
  virtual absl::StatusOr<plimsoll::v1::ReclaimPlan> Reclaim(const plimsoll::v1::ReclaimRequest& request,
                                                            const Caller& caller) = 0;

  // A subscription to the event feed (WatchHub::Subscribe). Never null.
  virtual std::unique_ptr<WatchSubscription> Watch(const WatchFilter& filter) = 0;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_CONTROL_CORE_H_
