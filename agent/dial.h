// How the agent reaches plimsolld. Three address forms (docs/agent.md):
//   virtio-serial:NAME     the domain's own virtio-serial port NAME (the default,
//                          virtio-serial:org.plimsoll.agent.0): no network, no token; the host
//                          knows which domain the port belongs to. Bridged to gRPC through a
//                          socketpair (virtio_port.h).
//   host:port, [v6]:port   TCP. In a QEMU user-networking guest the host's 127.0.0.1:PORT is
//                          10.0.2.2:PORT.
//   vsock:CID:PORT         AF_VSOCK; CID 2 is the host. No token: plimsolld knows the guest by the
//                          CID the host gave its vsock device. gRPC 1.51 has no vsock resolver, so
//                          the agent connects the socket itself and hands it to gRPC. Not exercised
//                          against a real host on the development machine (no vhost-vsock there).
#ifndef PLIMSOLL_AGENT_DIAL_H_
#define PLIMSOLL_AGENT_DIAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace plimsoll::agent {

inline constexpr char kDefaultServer[] = "virtio-serial:org.plimsoll.agent.0";

struct ServerAddress {
  enum class Kind { kTcp, kVsock, kVirtioSerial };
  Kind kind = Kind::kTcp;
  std::string port_name;    // kVirtioSerial: the port's name
  std::string virtio_root;  // kVirtioSerial: "" = the real /dev and /sys (tests: a fake tree)
  std::string tcp_target;  // "host:port" as gRPC takes it (kTcp)
  uint32_t vsock_cid = 0;  // kVsock
  uint32_t vsock_port = 0;
};

// Transport security for a TCP server address. Empty ca_pem: plaintext (the daemon allows that
// on a loopback listener only, which is where QEMU user networking delivers guest connections).
// Set: TLS, the daemon's certificate verified against ca_pem and against the host name of the
// --server address, or server_name when set (e.g. dialling 10.0.2.2 while the certificate
// names the host). Server-authenticated only: the agent presents no certificate, its token
// proves who it is. vsock is always plaintext (host-local; see docs/security.md).
struct AgentTls {
  std::string ca_pem;       // PEM of the CA(s) that signed the daemon's certificate
  std::string server_name;  // overrides the name checked against the certificate
  bool enabled() const { return !ca_pem.empty(); }
};

// Parses a --server value. INVALID_ARGUMENT names what is wrong.
absl::StatusOr<ServerAddress> ParseServerAddress(absl::string_view text);

// A fresh channel for one connection attempt, connected (READY) or failed within
// `connect_timeout`. Each attempt gets its own subchannel pool, so the caller's backoff, not
// gRPC's shared reconnect state, decides when the next attempt happens. UNAVAILABLE with the
// reason on failure (for TLS, gRPC's handshake error when it gives one, e.g. a certificate
// that does not verify); DEADLINE_EXCEEDED when the attempt did not finish in time.
// INVALID_ARGUMENT when `tls` is enabled for a vsock or virtio-serial address. For those two the
// channel is made on a connected descriptor (gRPC cannot report such a channel's connectivity,
// so the attempt is "connected" once the descriptor is; a dead one fails the first stream).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ServerAddress& address,
                                                    absl::Duration connect_timeout,
                                                    const AgentTls& tls = {});

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_DIAL_H_
