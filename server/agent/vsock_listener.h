// The listening end of the agent's vsock port: an interface with one real implementation
// (AF_VSOCK, ListenVsock) and one fake (testing/fake_vsock_listener.h: socketpairs and chosen
// CIDs), so that VsockConnector's accept and identity path is tested on machines without
// vhost-vsock (docs/agent.md, "vsock").
//
// What matters to the caller is the peer's CID, which the kernel fills in accept()'s
// sockaddr_vm: on the host it is the CID the hypervisor gave the guest's vsock device
// (<vsock><cid address=N/>), which the guest cannot choose (docs/security.md, "vsock").
#ifndef PLIMSOLL_SERVER_AGENT_VSOCK_LISTENER_H_
#define PLIMSOLL_SERVER_AGENT_VSOCK_LISTENER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace plimsoll::server::agent {

// One accepted connection: a connected stream socket (non-blocking and close-on-exec, as gRPC's
// endpoints want it), owned by the caller, and the peer's CID.
struct VsockConnection {
  int fd = -1;
  uint32_t cid = 0;
};

// Thread-safe: Accept runs on one thread while another calls Shutdown.
class VsockListener {
 public:
  virtual ~VsockListener() = default;
  // Blocks until a connection arrives or Shutdown() is called. CANCELLED once shut down (and
  // from then on); any other error is transient (the caller pauses and calls again), e.g.
  // RESOURCE_EXHAUSTED when the process is out of descriptors.
  virtual absl::StatusOr<VsockConnection> Accept() = 0;
  // Wakes a blocked Accept and stops accepting. Idempotent; never blocks.
  virtual void Shutdown() = 0;
  // The port listened on (the one the kernel chose when asked for any).
  virtual uint32_t port() const = 0;
};

// Listens on AF_VSOCK at (cid, port): plimsolld uses VMADDR_CID_ANY (every transport the
// kernel has: vhost-vsock's guests on a host), tests VMADDR_CID_LOCAL (1, vsock_loopback) and
// VMADDR_PORT_ANY. UNAVAILABLE, naming the errno, when the socket cannot be made or bound
// (EAFNOSUPPORT: no vsock in this kernel; EADDRNOTAVAIL: no transport for that CID).
absl::StatusOr<std::unique_ptr<VsockListener>> ListenVsock(uint32_t cid, uint32_t port);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_VSOCK_LISTENER_H_
