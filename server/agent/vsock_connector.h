// The vsock connector of the agent ingest (docs/agent.md, "vsock").
//
// Guests with a virtio vsock device (<vsock model='virtio'><cid address=N/></vsock>) dial the
// host (CID 2) on agent.vsock_port. gRPC 1.51 cannot listen on AF_VSOCK, so this class runs the
// accept loop itself and hands every accepted connection, bound to its domain, to the ingest
// (ConnectionSink::Serve; an accepted vsock socket supports sendmsg/recvmsg, so no pump is
// needed in between).
//
// Identity: the peer's CID, which accept() reports and which the host gave the guest's device
// (a guest cannot choose another's). A map CID -> domain is built from the running domains'
// live XML (Hypervisor::GetAgentChannel, VsockDevice) and refreshed on lifecycle events (Wake)
// and periodically. A connection whose CID no running domain has (or, after a stale read, more
// than one) is closed at once and counted; it never reaches gRPC. Otherwise it is bound to the
// CID's domain (connection_bindings.h), and at each new stream on it the CID's domain is
// checked again (Vouches), so a stream is never bound to a domain that no longer has that CID.
//
// Threads: an accept thread and a manager thread (scans). Thread-safe.
#ifndef PLIMSOLL_SERVER_AGENT_VSOCK_CONNECTOR_H_
#define PLIMSOLL_SERVER_AGENT_VSOCK_CONNECTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/agent/connector.h"
#include "server/agent/domain_lister.h"
#include "server/agent/log_budget.h"
#include "server/agent/vsock_listener.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server::agent {

struct VsockOptions {
  // The port agents dial (agent.vsock_port); the ingest listens on it unless given a listener.
  uint32_t port = 9588;
  // The name passed to Hypervisor::GetAgentChannel: the read returns the vsock device whatever
  // the name; this one also lets the XML read serve a virtio-serial channel of that name.
  std::string channel_name = "org.plimsoll.agent.0";
  // Running domains are listed this often; the XML of domains not seen before is read then.
  absl::Duration rescan_every = absl::Seconds(5);
  // Every domain's XML is read again this often, and on Wake() or an unknown CID, but no more
  // often than min_refresh_interval (a stranger that keeps connecting must not make plimsolld
  // read every domain's XML in a loop).
  absl::Duration refresh_every = absl::Minutes(1);
  absl::Duration min_refresh_interval = absl::Seconds(1);
  // After an accept error (e.g. out of descriptors) the accept thread waits this long.
  absl::Duration accept_error_pause = absl::Milliseconds(100);
};

struct VsockCounters {
  int64_t domains_with_cid = 0;  // running domains whose XML gives a usable vsock CID now
  uint64_t accepted = 0;         // connections from a domain's CID, handed to gRPC
  uint64_t unknown_cid = 0;      // connections closed: no running domain (or more than one) has the CID
  uint64_t accept_errors = 0;    // accept() failures (out of descriptors, ...)
  uint64_t refreshes = 0;        // full re-reads of every domain's XML
};

class VsockConnector final : public Connector {
 public:
  // Starts the accept and manager threads; the first scan runs before the first connection is
  // accepted. `hypervisor`, `clock` and `sink` must outlive the object; it owns `listener`.
  static absl::StatusOr<std::unique_ptr<VsockConnector>> Start(hypervisor::Hypervisor* hypervisor, Clock* clock,
                                                               ConnectionSink* sink,
                                                               std::unique_ptr<VsockListener> listener,
                                                               VsockOptions options);
  ~VsockConnector() override;
  VsockConnector(const VsockConnector&) = delete;
  VsockConnector& operator=(const VsockConnector&) = delete;

  // Re-reads every running domain's CID soon (on domain lifecycle events).
  void Wake() override;
  // Stops accepting and scanning.
  void Stop() override;
  // True while the binding's CID is still its domain's.
  bool Vouches(const ConnectionBinding& binding) const override;

  VsockCounters counters() const;
  uint32_t port() const { return port_; }
  // The running domain whose vsock CID is `cid`, if exactly one is.
  std::optional<std::string> DomainOfCid(uint32_t cid) const;

 private:
  VsockConnector(hypervisor::Hypervisor* hypervisor, Clock* clock, ConnectionSink* sink,
                 std::unique_ptr<VsockListener> listener, VsockOptions options);
  void AcceptLoop();
  void ManagerLoop();
  // Lists the running domains, reads the XML of new ones (of all with `full`), rebuilds the
  // CID map. False when the domains could not be listed (the old map stays).
  bool Scan(bool full);
  std::optional<std::string> DomainOfCidLocked(uint32_t cid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wants a full refresh, and wakes the manager to schedule it.
  void AskRefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  hypervisor::Hypervisor* const hypervisor_;
  Clock* const clock_;
  ConnectionSink* const sink_;
  std::unique_ptr<VsockListener> listener_;
  const VsockOptions options_;
  const uint32_t port_;
  DomainLister lister_;  // Scan's: Start's first scan, then the manager thread's
  std::thread accept_thread_;
  std::thread manager_;
  bool stopped_ = false;  // Stop() ran (owner's thread only)

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool refresh_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool refresh_asked_ ABSL_GUARDED_BY(mu_) = false;  // since the manager last looked
  // Per running domain: its CID from the XML (0: none usable) and its name, for logs.
  struct Domain {
    std::string name;
    uint32_t cid = 0;
  };
  absl::flat_hash_map<std::string, Domain> domains_ ABSL_GUARDED_BY(mu_);
  // CID -> uuid, of CIDs exactly one running domain has (rebuilt from domains_ by each scan).
  absl::flat_hash_map<uint32_t, std::string> by_cid_ ABSL_GUARDED_BY(mu_);
  VsockCounters counters_ ABSL_GUARDED_BY(mu_);
  // Connection events (a stranger connecting in a loop must not flood the log).
  LogBudget log_budget_ ABSL_GUARDED_BY(mu_){"agent vsock"};
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_VSOCK_CONNECTOR_H_
