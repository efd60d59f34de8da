// The ways an agent's stream reaches plimsolld (docs/agent.md). TCP streams prove who they are
// with the guest's token in every report; on the other two the connection itself is the
// identity (a domain's virtio-serial port, the vsock CID the host gave the domain).
#ifndef PLIMSOLL_SERVER_AGENT_TRANSPORT_H_
#define PLIMSOLL_SERVER_AGENT_TRANSPORT_H_

namespace plimsoll::server::agent {

enum class Transport {
  kTcp,           // agent.agent_listen
  kVirtioSerial,  // agent.channel_name
  kVsock,         // agent.vsock_port
};
inline constexpr int kNumTransports = 3;

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_TRANSPORT_H_
