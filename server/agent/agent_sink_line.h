// The line plimsoll-agent-sink prints for each guest (agent_sink_main.cc): its stored signals as
// key=value words, one word per value, so that a script can split the line on spaces.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_SINK_LINE_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_SINK_LINE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/agent/agent_store.h"

namespace plimsoll::server::agent {

// A string the guest chose, as one printable word: at most kMaxGuestWordBytes of it, escaped
// with absl::CHexEscape as the project's parsers quote hostile text, spaces as \x20, "..." when
// cut; "-" when empty. The documented reason names come out as they are.
inline constexpr size_t kMaxGuestWordBytes = 64;
std::string GuestWord(absl::string_view untrusted);

// One guest's line, without the newline.
std::string SinkLine(const AgentSignals& s);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_SINK_LINE_H_
