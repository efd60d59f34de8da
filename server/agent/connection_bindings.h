// Which guest each connector's connection is, by the name gRPC gives the connection.
//
// A connector (a domain's virtio-serial port, an accepted vsock connection) hands a connected
// socket to the agent server with grpc::AddInsecureChannelFromFd, and gRPC names that transport
// "fd:N", N the descriptor: that is the peer string of every stream on it. The ingest binds
// "fd:N" to the connection's guest before gRPC sees N, and each new stream is that guest's
// (StreamBinding::channel_uuid: no token, no proof).
//
// Why the name cannot point at the wrong guest: a descriptor number is reused only after gRPC
// closed it; gRPC closes it only when the transport and every stream on it are gone; and Bind
// overwrites N's entry before the number's new connection reaches gRPC. Every connector binds
// through the same table, so this holds across connectors too.
//
// A peer of any other form ("ipv4:...", "ipv6:...") came through the TCP listener, whose
// streams prove who they are with the guest's token.
//
// Thread-safe.
#ifndef PLIMSOLL_SERVER_AGENT_CONNECTION_BINDINGS_H_
#define PLIMSOLL_SERVER_AGENT_CONNECTION_BINDINGS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/agent/transport.h"

namespace plimsoll::server::agent {

class Connector;

// One connection's guest, as its connector saw it when it handed the connection over.
struct ConnectionBinding {
  Transport transport = Transport::kVirtioSerial;
  std::string uuid;
  // The connector that made the binding, which vouches for it again at each new stream
  // (Connector::Vouches), and its own note for that (the vsock CID).
  const Connector* connector = nullptr;
  uint64_t key = 0;
  // Set by Bind: tells this binding from a later one of the same descriptor number.
  uint64_t generation = 0;
};

// What a stream's peer is.
enum class PeerKind {
  kNetwork,  // not a handed-over descriptor: the TCP listener's
  kBound,    // a handed-over descriptor with a binding
  kUnbound,  // a handed-over descriptor whose binding is gone (or never was): nobody's
};

struct PeerLookup {
  PeerKind kind = PeerKind::kUnbound;
  ConnectionBinding binding;  // kBound only
};

// "fd:N", the name gRPC gives a descriptor handed to a server.
std::string FdPeer(int fd);

class ConnectionBindings {
 public:
  // Binds descriptor `fd` to `binding` (replacing what the number was bound to before) and
  // returns the binding's generation. Call it before gRPC sees `fd`.
  uint64_t Bind(int fd, ConnectionBinding binding);
  // Forgets `fd`'s binding if it is still the one of `generation` (a later Bind of the same
  // number stays). New streams of that name are then nobody's.
  void Unbind(int fd, uint64_t generation);
  // What the stream peer `peer` (grpc::ServerContext::peer()) is.
  PeerLookup Lookup(absl::string_view peer) const;
  void Clear();
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, ConnectionBinding> by_peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_CONNECTION_BINDINGS_H_
