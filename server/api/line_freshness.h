// The Plimsoll line as the API serves it: the loop's last published line, withdrawn when the loop
// itself has stopped publishing. The loop marks its own line stale (host data, libvirt), but a
// loop that is stuck publishes nothing at all, and its last line would go on offering memory no
// tick is watching. Pure: the caller passes the time.
#ifndef PLIMSOLL_SERVER_API_LINE_FRESHNESS_H_
#define PLIMSOLL_SERVER_API_LINE_FRESHNESS_H_

#include "absl/time/time.h"
#include "plimsoll/v1/control.pb.h"

namespace plimsoll::server {

// How old a published line may be before it is served stale: three ticks, and never less than
// 15 s (a slow tick, a reload or an early tick's coalescing must not flap the offer).
absl::Duration LineMaxAge(double tick_seconds);

// The view's line as of `now`: unchanged while younger than LineMaxAge(view.host().tick_seconds()),
// else stale ("the control loop has published nothing for 42.0s"), offering 0. A line never
// computed (tick 0) is returned as it is (the loop's own "no tick yet").
plimsoll::v1::HostLine LineAsOf(const plimsoll::v1::ListGuestsResponse& view, absl::Time now);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_LINE_FRESHNESS_H_
