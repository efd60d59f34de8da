// Watch events derived from two successive published views: guests that
// appeared, changed (run state, management state, detail, override, reclaim
// hold) or disappeared, each new decision, and the host line when its offer,
// over_line or staleness changed. Pure. The control loop can
// publish EventsBetween(previous, next) into its WatchHub on every Publish;
// the Control service uses it to serve Watch from the view alone while no
// ControlCore is wired.
#ifndef PLIMSOLL_SERVER_EVENTS_VIEW_EVENTS_H_
#define PLIMSOLL_SERVER_EVENTS_VIEW_EVENTS_H_

#include <vector>

#include "plimsoll/v1/control.pb.h"

namespace plimsoll::server {

// `previous` may be null (first view: every guest APPEARED). Events carry no
// sequence; their time is the decision's time or 0 (the hub stamps it).
std::vector<plimsoll::v1::WatchEvent> EventsBetween(const plimsoll::v1::ListGuestsResponse* previous,
                                                    const plimsoll::v1::ListGuestsResponse& next);

// One GuestEvent CHANGE_SNAPSHOT per guest of `view`, the host line (when the view has one), then
// SnapshotComplete.
std::vector<plimsoll::v1::WatchEvent> SnapshotEvents(const plimsoll::v1::ListGuestsResponse& view);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_EVENTS_VIEW_EVENTS_H_
