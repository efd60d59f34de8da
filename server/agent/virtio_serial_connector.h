// The virtio-serial connector of the agent ingest (docs/agent.md, "virtio-serial").
//
// Every running domain may have a virtio-serial port named `channel_name` whose host end is a
// unix socket QEMU listens on (<channel type='unix'><source mode='bind' path=.../>). This class
// finds each running domain's socket in its live XML (Hypervisor::GetAgentChannel), connects to
// it (QEMU accepts one host client at a time), and hands the connection, bound to that domain,
// to the ingest (ConnectionSink::Serve) through a ChannelPump: gRPC gets one end of a socketpair,
// the pump moves bytes between the other end and the channel socket.
//
// Identity: the reports on a domain's channel are that domain's (connection_bindings.h). The
// binding is dropped when the link ends or the domain stops.
//
// Reconnection: a link ends when QEMU closes the socket (domain stopped, rebooted with
// on_reboot=destroy, QEMU restarted) or gRPC closes its end (the session failed, e.g. the agent
// restarted and began a new HTTP/2 session in the middle of the old one). The domain is then
// connected again after a backoff (initial_backoff doubling to max_backoff; reset when a link
// lived at least stable_after). A domain that is gone is forgotten.
//
// Autoattach (options.autoattach): a running domain without the channel gets one hot-plugged
// (Hypervisor::AttachAgentChannel, live only) with its socket at socket_dir/UUID.sock, or where
// libvirt chooses when socket_dir is empty; a domain without a virtio-serial controller cannot
// take one (libvirt cannot hot-plug the controller) and is counted and logged once. A failed
// hot-plug is that domain's alone: counted, logged once per distinct error, retried with a
// backoff of its own, and shown on that guest (AgentStore::SetChannelProblem).
//
// Threads: one manager thread (scans, connects, attaches) and the pump's. Thread-safe.
#ifndef PLIMSOLL_SERVER_AGENT_VIRTIO_SERIAL_CONNECTOR_H_
#define PLIMSOLL_SERVER_AGENT_VIRTIO_SERIAL_CONNECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/agent/agent_store.h"
#include "server/agent/channel_pump.h"
#include "server/agent/connector.h"
#include "server/agent/domain_lister.h"
#include "server/agent/log_budget.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server::agent {

inline constexpr char kDefaultChannelName[] = "org.plimsoll.agent.0";

struct VirtioSerialOptions {
  // The virtio-serial port name (<target type='virtio' name=...>) agents open in the guest.
  std::string channel_name = kDefaultChannelName;
  // Hot-plug the channel into running domains that lack it.
  bool autoattach = false;
  // Where hot-plugged channels' sockets go (QEMU creates them; it must be able to write here).
  std::string socket_dir = "/run/plimsoll/channels";
  // Running domains are listed this often (and at once on Wake()).
  absl::Duration rescan_every = absl::Seconds(5);
  // A domain whose XML has no usable channel is looked at again after this (its XML changes
  // only when someone hot-plugs a device, and Wake() follows lifecycle events).
  absl::Duration recheck_without_channel = absl::Seconds(30);
  // Reconnection backoff after a failed connect or a short-lived link.
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  // A link that lived this long resets its domain's backoff.
  absl::Duration stable_after = absl::Seconds(30);
  // A failed hot-plug is retried after attach_retry, doubling per consecutive failure of that
  // domain up to attach_retry_max (a failure says nothing of the other domains or of libvirt).
  absl::Duration attach_retry = absl::Seconds(15);
  absl::Duration attach_retry_max = absl::Minutes(10);
  PumpLinkOptions link;
};

struct VirtioSerialCounters {
  int64_t connected = 0;           // domains whose channel is connected now
  int64_t without_channel = 0;     // running domains with no usable channel now
  int64_t without_controller = 0;  // ... of which cannot take a hot-plugged one
  uint64_t connects = 0;           // connections made
  uint64_t connect_failures = 0;   // connect() to a channel socket failed
  uint64_t ended_guest = 0;        // links ended by the guest side (QEMU closed the socket)
  uint64_t ended_daemon = 0;       // ... by the gRPC side (session over)
  uint64_t ended_error = 0;        // ... by an I/O error
  uint64_t ended_gone = 0;         // ... because the domain stopped
  uint64_t attached = 0;           // channels hot-plugged
  uint64_t attach_failed = 0;      // hot-plugs libvirt refused (other than no controller)
  uint64_t attach_no_controller = 0;  // domains found without a virtio-serial controller
  PumpCounters pump;
};

// One running domain as the channels see it, for logs, tests and diagnostics.
struct ChannelState {
  std::string uuid;
  std::string name;
  std::string socket_path;  // as last read from the XML
  // "connected", "connecting" (waiting for a retry), "no_channel", "no_controller", "unusable"
  std::string state;
  std::string problem;  // why not connected, when known
  int failures = 0;     // consecutive failed or short-lived attempts
};

class VirtioSerialConnector final : public Connector {
 public:
  // Starts the pump and the manager thread, whose first scan runs at once. `hypervisor`,
  // `store`, `clock` and `sink` must outlive the object.
  static absl::StatusOr<std::unique_ptr<VirtioSerialConnector>> Start(hypervisor::Hypervisor* hypervisor,
                                                                      AgentStore* store, Clock* clock,
                                                                      ConnectionSink* sink,
                                                                      VirtioSerialOptions options);
  // Stops, then closes every channel socket: QEMU tells each guest the host end went away.
  ~VirtioSerialConnector() override;
  VirtioSerialConnector(const VirtioSerialConnector&) = delete;
  VirtioSerialConnector& operator=(const VirtioSerialConnector&) = delete;

  // Rescans now (on domain lifecycle events).
  void Wake() override;
  void Stop() override;
  // A domain's channel is its own for as long as the link lives; its end unbinds it.
  bool Vouches(const ConnectionBinding& binding) const override { return true; }

  const VirtioSerialOptions& options() const { return options_; }
  VirtioSerialCounters counters() const;
  std::vector<ChannelState> channels() const;  // sorted by uuid

 private:
  struct Domain;
  VirtioSerialConnector(hypervisor::Hypervisor* hypervisor, AgentStore* store, Clock* clock, ConnectionSink* sink,
                        VirtioSerialOptions options);
  void ManagerLoop();
  // One pass over the running domains; false when they could not be listed.
  bool Scan();
  // One domain's turn in a scan: read its channel, attach or connect. Called without mu_.
  void Visit(const hypervisor::DomainInfo& domain);
  void Connect(const std::string& uuid, const std::string& name, const std::string& path);
  void OnLinkEnd(const std::string& uuid, uint64_t generation, int grpc_fd, LinkEnd why, const std::string& detail);
  absl::Duration BackoffLocked(int failures) const;
  // Logs at most one line per domain per state change (`key`); a domain that fails the same way
  // every few seconds logs once.
  void LogOnChangeLocked(Domain& d, const std::string& key, const std::string& line)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  hypervisor::Hypervisor* const hypervisor_;
  AgentStore* const store_;
  Clock* const clock_;
  ConnectionSink* const sink_;
  const VirtioSerialOptions options_;
  DomainLister lister_;  // the manager thread's
  std::unique_ptr<ChannelPump> pump_;
  std::thread manager_;
  bool stopped_ = false;  // Stop() ran (owner's thread only)

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool unsupported_logged_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::unique_ptr<Domain>> domains_ ABSL_GUARDED_BY(mu_);
  // Domains whose channel problem the store shows now, to clear it once they are gone.
  absl::flat_hash_set<std::string> shown_problems_ ABSL_GUARDED_BY(mu_);
  VirtioSerialCounters counters_ ABSL_GUARDED_BY(mu_);
  // Channel log lines across all domains (a host of agent-less guests whose links time out
  // together must not flood the log).
  LogBudget log_budget_ ABSL_GUARDED_BY(mu_){"agent channel"};
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_VIRTIO_SERIAL_CONNECTOR_H_
