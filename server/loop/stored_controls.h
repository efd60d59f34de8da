// What the operator wrote, laid over the view the loop last published, so a read that follows a
// successful write on the same plimsolld sees that write (the control API reads its own writes):
// every guest's override as stored now (cleared where none is), and the host's runtime policy,
// its pause, the number of stored overrides, and the reserve and guest budget that policy puts
// in force. What the next tick makes of them (targets, management states, the policy in force,
// decisions) waits for that tick, which every write wakes at once.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SERVER_LOOP_STORED_CONTROLS_H_
#define PLIMSOLL_SERVER_LOOP_STORED_CONTROLS_H_

#include <cstdint>
#include <optional>

#include "proto/plimsoll/v1/control.pb.h"
#include "server/state/overrides.h"

namespace plimsoll::server {

// Budget for all guests: min(MemTotal - reserve, cap), never negative.
int64_t GuestBudget(int64_t mem_total_bytes, int64_t reserve_bytes, std::optional<int64_t> cap);

// The configuration file's host settings, beneath the runtime host policy.
struct HostBase {
  int64_t reserve_bytes = 0;
  std::optional<int64_t> budget_cap;
};

// `view` with `stored` laid over it (see above). The budget is recomputed only when the view
// knows the host's MemTotal.
plimsoll::v1::ListGuestsResponse WithStoredControls(const plimsoll::v1::ListGuestsResponse& view,
                                                    const OverrideStore::Snapshot& stored, const HostBase& base);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_STORED_CONTROLS_H_
