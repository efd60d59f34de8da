// How the agent reaches plimsolld. Two address forms (docs/agent.md):
//   host:port, [v6]:port   TCP. In a QEMU user-networking guest the host's 127.0.0.1:PORT is
//                          10.0.2.2:PORT.
//   vsock:CID:PORT         AF_VSOCK; CID 2 is the host. gRPC 1.51 has no vsock resolver, so the
//                          agent connects the socket itself and hands it to gRPC. Not exercised on
//                          the development machine (no vhost-vsock there).
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

struct ServerAddress {
  enum class Kind { kTcp, kVsock };
  Kind kind = Kind::kTcp;
  std::string tcp_target;  // "host:port" as gRPC takes it (kTcp)
  uint32_t vsock_cid = 0;  // kVsock
  uint32_t vsock_port = 0;
};

// Parses a --server value. INVALID_ARGUMENT names what is wrong.
absl::StatusOr<ServerAddress> ParseServerAddress(absl::string_view text);

// A fresh channel for one connection attempt, connected (READY) or failed within
// `connect_timeout`. Each attempt gets its own subchannel pool, so the caller's backoff, not
// gRPC's shared reconnect state, decides when the next attempt happens. UNAVAILABLE with the
// reason on failure; DEADLINE_EXCEEDED when the attempt did not finish in time.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ServerAddress& address,
                                                    absl::Duration connect_timeout);

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_DIAL_H_
