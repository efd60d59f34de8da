// The files plimsolld and its host-side tools use when the configuration names none. One
// definition, so the daemon (config.cc's defaults), plimsoll-agent-token and plimsoll-agent-sink
// cannot drift apart: an operator who mints guest tokens with the tool's default key must
// get tokens the daemon accepts. docs/security.md, the README,
// deploy/config/plimsolld.textproto and config.proto name the same path;
// //server/agent:host_key_path_test fails when any of them disagrees.
#ifndef PLIMSOLL_SERVER_CONFIG_DEFAULT_PATHS_H_
#define PLIMSOLL_SERVER_CONFIG_DEFAULT_PATHS_H_

namespace plimsoll::server {

// The agent channel's host key (agent.agent_host_key_file). Under /var/lib/plimsoll because
// that is the systemd unit's StateDirectory: the daemon creates the key there (mode 0600) at its
// first start, and /etc is read-only to it (ProtectSystem=strict).
inline constexpr char kDefaultAgentHostKeyFile[] = "/var/lib/plimsoll/agent-host.key";

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_CONFIG_DEFAULT_PATHS_H_
