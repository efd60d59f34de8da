// server/: plimsolld's wiring only (main.cc, daemon.*). It builds the parts that live in the
// folders below it and connects them; no decision, RPC handler or libvirt call is written here.
//
// Wiring of plimsolld: builds the real seams (libvirt, host /proc), the policy,
// the control loop, the control plane (overrides persisted in the state file,
// the watch hub, the loop-backed ControlCore, authorization), the gRPC server
// (unix socket, or TCP with mutual TLS) and the metrics exposer, and runs them.
// Tests can inject their own hypervisor and host reader.
#ifndef PLIMSOLL_SERVER_DAEMON_H_
#define PLIMSOLL_SERVER_DAEMON_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "plimsoll/v1/config.pb.h"
#include "server/agent/guest_reclaim_bounds.h"
#include "server/agent/vsock_listener.h"
#include "server/api/loop_control_core.h"
#include "server/api/security/authz.h"
#include "server/api/security/tls_credentials.h"
#include "server/config/config.h"
#include "server/config/config_reload.h"
#include "server/events/watch_hub.h"
#include "server/loop/control_loop.h"
#include "server/state/overrides.h"

namespace grpc {
class Server;
}

namespace plimsoll::server {

class ControlService;
namespace agent {
class AgentIngest;
class AgentStore;
class ReportValidator;
}  // namespace agent

struct DaemonOverrides {
  std::unique_ptr<hypervisor::Hypervisor> hypervisor;  // default: LibvirtHypervisor(libvirt_uri)
  std::unique_ptr<host::HostReader> host;              // default: ProcHostReader(proc_root)
  Clock* clock = nullptr;                              // default: RealClock
  // Used when agent.vsock_port is set. Default: ListenVsock(VMADDR_CID_ANY, vsock_port) at Start.
  std::unique_ptr<agent::VsockListener> vsock_listener;
};

class Daemon {
 public:
  // `control` is ResolveControlApi(config). The state file is opened here: a
  // file that could not be used has been set aside, is logged at ERROR and
  // shown in HostStatus.state_problem; one that cannot be read at all (or set
  // aside) is an error, so the daemon never runs without the operator's
  // overrides by accident. An empty control.state_file keeps state in memory.
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const Options& options, const ControlApiOptions& control,
                                                        DaemonOverrides overrides = {});
  // For tests: the control API's defaults for options.grpc_listen (a TCP
  // listener then has no TLS files and fails to start) and state in memory only.
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const Options& options, DaemonOverrides overrides = {});
  ~Daemon();

  // Serves metrics and the control API, then starts the loop thread. Errors
  // (port in use, socket path not writable) name the listener.
  absl::Status Start();
  // Stops the loop, the gRPC server and the exposer. Idempotent.
  void Shutdown();

  // Where ReloadConfig reads the configuration from: the --config file (may be
  // empty: flags only) and the command-line flags, which override the file on
  // every reload as at startup.
  void SetConfigSource(std::string config_path, plimsoll::v1::DaemonConfig flag_config);

  // Configuration reload (SIGHUP calls this; so do tests). Re-reads the source
  // (LoadEffectiveConfig). On failure nothing changes: logged at ERROR with the
  // parser's or validator's message, counted as a failure, returned. On
  // success the live settings (config_reload.h) are handed to the loop (from
  // its next tick, which starts at once) and the role rules to the Authorizer;
  // changed restart-only settings are logged at WARNING and otherwise ignored.
  // One INFO line lists what changed. FAILED_PRECONDITION without a source.
  absl::Status ReloadConfig();

  // The options in force (restart-only ones as started; live ones as last reloaded).
  Options options() const;

  // Where the listeners really are (ports resolved when 0 was asked for).
  std::string grpc_address() const { return grpc_address_; }
  int metrics_port() const;
  // The agent listener's "host:port" (port resolved), empty when the channel is off.
  std::string agent_address() const;

  ControlLoop& loop() { return *loop_; }
  ControlCore& core() { return *core_; }
  OverrideStore& overrides() { return *store_; }

 private:
  Daemon() = default;
  absl::Status StartGrpc();

  Options options_;
  ControlApiOptions control_;
  std::unique_ptr<hypervisor::Hypervisor> hypervisor_;
  std::unique_ptr<host::HostReader> host_;
  std::unique_ptr<policy::Policy> policy_;
  // Both actuators live as long as the daemon; dry_run picks the loop's.
  std::unique_ptr<Actuator> live_actuator_;
  std::unique_ptr<Actuator> dry_run_actuator_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<OverrideStore> store_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<LoopControlCore> core_;
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<agent::ReportValidator> agent_validator_;
  std::unique_ptr<agent::AgentStore> agent_store_;
  // agent.reclaim_bounds: what the ingest puts in acks, read from loop_'s published view; null
  // when off. Declared before agent_, which calls it, so that it outlives it.
  std::unique_ptr<agent::PublishedReclaimBounds> reclaim_bounds_;
  // Every agent transport (agent.agent_listen, channel_name, vsock_port); null when all are
  // off. Built here, started by Start(); its Wake and counters may be called at any time.
  std::unique_ptr<agent::AgentIngest> agent_;
  std::unique_ptr<agent::VsockListener> vsock_listener_;  // until Start hands it to agent_
  Clock* clock_ = nullptr;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string grpc_address_;
  std::thread loop_thread_;
  mutable absl::Mutex reload_mu_;  // serialises ReloadConfig; guards options_/control_ for options()
  bool has_config_source_ = false;
  std::string config_path_;
  plimsoll::v1::DaemonConfig flag_config_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_DAEMON_H_
