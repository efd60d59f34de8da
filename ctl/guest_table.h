// ctl/: plimsollctl, the operator's command line. It talks to plimsolld only over the control API
// (proto/); nothing here may depend on server/ outside tests.
//
// Renders the control API's guest view as a fixed-width text table, the one
// format shared by `plimsollctl guests`, `top` and the demo.
#ifndef PLIMSOLL_CTL_GUEST_TABLE_H_
#define PLIMSOLL_CTL_GUEST_TABLE_H_

#include <string>
#include <vector>

#include "plimsoll/v1/control.pb.h"

namespace plimsoll::ctl {

// A header line about the host (and the line, when the view has one), then one line per guest:
// GUEST STATE MAX MIN TARGET ACTUAL CACHE USABLE AGE REASON.
// `line_width` > 0: every line fits in it: host lines wrap, and each guest's reason takes its
// short form (ctl/short_reason.h) in what the columns before it leave (guest names and columns
// wider than the line are not cut). 0: full reasons, unwrapped.
std::string RenderGuestTable(const plimsoll::v1::ListGuestsResponse& view, size_t line_width = 0);

// One guest, every field on its own line.
std::string RenderGuest(const plimsoll::v1::Guest& guest);

// The host status block.
std::string RenderHost(const plimsoll::v1::HostStatus& host);

// The Plimsoll line on one line, for the tables' header: "line: offered=.. headroom=..
// committed=../capacity=.." and, when so, "OVER THE LINE" and "STALE (reason)".
std::string RenderLineSummary(const plimsoll::v1::HostLine& line);
// The Plimsoll line in full (`plimsollctl line`): each term on its own line with what it is.
std::string RenderLine(const plimsoll::v1::HostLine& line);

// An override's settings on one line ("pin=1024Mi shares=200 (by unix at ...)").
std::string RenderOverride(const plimsoll::v1::GuestOverride& o);
// Every stored override, one line each.
std::string RenderOverrides(const std::vector<plimsoll::v1::GuestOverride>& overrides);
// The runtime host policy on one line ("budget=8.0Gi paused").
std::string RenderHostPolicy(const plimsoll::v1::HostPolicy& p);
// A reclaim plan: summary, then one line per guest taken from or skipped.
std::string RenderPlan(const plimsoll::v1::ReclaimPlan& plan);
// One Watch event on one line, with its local time.
std::string RenderEvent(const plimsoll::v1::WatchEvent& event);

// "1023.5Mi" style sizes: short, binary units, stable width.
std::string HumanBytes(int64_t bytes);

}  // namespace plimsoll::ctl

#endif  // PLIMSOLL_CTL_GUEST_TABLE_H_
