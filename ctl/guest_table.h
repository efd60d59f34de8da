// Renders the control API's guest view as a fixed-width text table, the one
// format shared by `plimsollctl guests`, `top` and the demo.
#ifndef PLIMSOLL_CTL_GUEST_TABLE_H_
#define PLIMSOLL_CTL_GUEST_TABLE_H_

#include <string>

#include "plimsoll/v1/control.pb.h"

namespace plimsoll::ctl {

// A header line about the host, then one line per guest:
// GUEST STATE MAX MIN TARGET ACTUAL CACHE USABLE AGE REASON.
// `reason_width` > 0 truncates reasons to fit a terminal.
std::string RenderGuestTable(const plimsoll::v1::ListGuestsResponse& view, int reason_width = 0);

// One guest, every field on its own line.
std::string RenderGuest(const plimsoll::v1::Guest& guest);

// The host status block.
std::string RenderHost(const plimsoll::v1::HostStatus& host);

// "1023.5Mi" style sizes: short, binary units, stable width.
std::string HumanBytes(int64_t bytes);

}  // namespace plimsoll::ctl

#endif  // PLIMSOLL_CTL_GUEST_TABLE_H_
