// The words an agent's reclaim part may be shown with. Its state is an enum and its reason a
// string the guest chose: both are mapped onto the documented names (docs/agent.md "Reclaim")
// before they reach the API, a metric label or a terminal, so a guest cannot write there.
#ifndef PLIMSOLL_SERVER_AGENT_RECLAIM_NAMES_H_
#define PLIMSOLL_SERVER_AGENT_RECLAIM_NAMES_H_

#include <array>

#include "absl/strings/string_view.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::server::agent {

// "off_disabled", "off_unsupported", "idle", "active", "stopped_pressure", "failed"; "unknown" for
// any other value (unspecified included).
absl::string_view ReclaimStateName(v1::ReclaimState state);
// Every name ReclaimStateName gives but "unknown", in enum order (the metric's label values).
const std::array<absl::string_view, 6>& AllReclaimStateNames();

// `reason` when it is one of the agent's documented decisions ("step", "below_keep", ...),
// else "unknown".
absl::string_view DocumentedReclaimReason(absl::string_view reason);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_RECLAIM_NAMES_H_
