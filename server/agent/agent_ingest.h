// The agent ingest: everything plimsolld runs to take agents' reports in, whichever way they
// come (docs/agent.md). One gRPC server (agent_server.h), one AgentService with its stream
// defences, one sweeper ending the streams that went silent, and one table binding each
// connector's connection to its guest (connection_bindings.h), fed by
// - the TCP listener (agent.agent_listen), whose streams prove who they are with the guest's
//   token in every report;
// - the virtio-serial connector (agent.channel_name): the domains' own ports;
// - the vsock connector (agent.vsock_port): connections from the domains' CIDs.
// The transports differ only in where a stream's identity comes from; everything after that
// (nonce, budgets, validation, the store) is the same code. Reports of every transport go to
// one AgentStore, and one counters() reads every transport's numbers.
//
// Thread-safe. The store, the clock and the hypervisor must outlive it.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_INGEST_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_INGEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "server/agent/agent_service.h"
#include "server/agent/agent_store.h"
#include "server/agent/connection_bindings.h"
#include "server/agent/connector.h"
#include "server/agent/virtio_serial_connector.h"
#include "server/agent/vsock_connector.h"
#include "server/agent/vsock_listener.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server::agent {

struct AgentIngestOptions {
  // The TCP listener (agent.agent_listen: "127.0.0.1:9588", a bridge address, or port 0 for any
  // free port in tests); empty: none. TLS on it when both files are set
  // (agent.agent_tls_cert_file, agent.agent_tls_key_file; agent_server.h).
  std::string tcp_listen;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The virtio-serial connector; unset: off.
  std::optional<VirtioSerialOptions> virtio_serial;
  // The vsock connector; unset: off.
  std::optional<VsockOptions> vsock;
  // Stream limits (per transport) and timeouts; `origin` is the ingest's own.
  AgentServiceOptions streams;
  // How often the sweeper ends streams past their auth or idle timeout.
  absl::Duration sweep_every = absl::Seconds(1);
};

// Every transport's numbers, read together.
struct AgentIngestCounters {
  AgentServiceCounters streams;        // all transports' streams
  VirtioSerialCounters virtio_serial;  // zero when off
  VsockCounters vsock;                 // zero when off
};

// The connectors hand their connections to the ingest (its ConnectionSink side).
class AgentIngest final : public ConnectionSink {
 public:
  // Builds the service; nothing runs before Start. Reports go to `store`.
  AgentIngest(AgentIngestOptions options, AgentStore* store, Clock* clock);
  // Shuts down.
  ~AgentIngest() override;
  AgentIngest(const AgentIngest&) = delete;
  AgentIngest& operator=(const AgentIngest&) = delete;

  // Starts the server (and the TCP listener), the connectors that are on, and the sweeper.
  // `hypervisor` may be null when no connector is on. `vsock_listener` replaces the AF_VSOCK
  // listener on the vsock port (tests). Errors name the config field: agent.agent_listen (the
  // address cannot be bound), agent.agent_tls_cert_file / agent_tls_key_file,
  // agent.channel_name, agent.vsock_port (no vsock in this kernel, port in use). Call once;
  // after an error, Shutdown (or the destructor) stops what did start.
  absl::Status Start(hypervisor::Hypervisor* hypervisor, std::unique_ptr<VsockListener> vsock_listener = nullptr);

  // A domain started, stopped or changed (the daemon calls it on lifecycle events): the
  // connectors look at the domains again soon. Thread-safe at any time, never blocks.
  void Wake();

  // Stops the connectors, gives open streams `grace` to end, then cancels them, and closes
  // every connection. After it returns no service method runs. Idempotent.
  void Shutdown(absl::Duration grace = absl::Milliseconds(500));

  // Thread-safe at any time (zero for what has not started).
  AgentIngestCounters counters() const;

  // Where a stream whose gRPC peer is `peer` comes from (the service's origin function): the
  // TCP listener's (when there is one), a connection bound to a guest its connector still
  // vouches for, or nowhere (nullopt: refused).
  std::optional<StreamOrigin> Origin(const std::string& peer) const;

  // Ends the streams past their timeouts now, as the sweeper does every sweep_every.
  void Sweep();

  // ConnectionSink: what the connectors call (after Start, until Shutdown stops them).
  uint64_t Serve(int fd, ConnectionBinding binding) override;
  void Unbind(int fd, uint64_t generation) override;

  // "host:port" of the TCP listener with the port bound; empty without one.
  const std::string& tcp_address() const { return tcp_address_; }
  bool tls() const { return tls_; }
  // The connectors, null when off (or not started).
  const VirtioSerialConnector* virtio_serial() const;
  const VsockConnector* vsock() const;

 private:
  void SweepLoop();

  const AgentIngestOptions options_;
  AgentStore* const store_;
  Clock* const clock_;
  ConnectionBindings bindings_;
  std::unique_ptr<AgentService> service_;
  // Set by Start before any connector runs; reset by Shutdown after the connectors stopped.
  std::unique_ptr<grpc::Server> server_;
  std::string tcp_address_;
  bool tls_ = false;
  std::thread sweeper_;
  bool shut_down_ = false;  // Shutdown() ran (owner's thread only)

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<VirtioSerialConnector> virtio_serial_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<VsockConnector> vsock_ ABSL_GUARDED_BY(mu_);
};

// The agent part of plimsolld's "serving" line: "agent=ADDRESS agent_transport=tls|plaintext
// agent_channels=virtio-serial:NAME[ autoattach]|off agent_vsock=port:N|off", with agent=off
// and no agent_transport when there is no TCP listener. Null: every transport off.
std::string DescribeAgentIngest(const AgentIngest* ingest);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_INGEST_H_
