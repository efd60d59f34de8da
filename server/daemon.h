// Wiring of plimsolld: builds the real seams (libvirt, host /proc), the policy,
// the control loop, the gRPC server and the metrics exposer, and runs them.
// Tests can inject their own hypervisor and host reader.
#ifndef PLIMSOLL_SERVER_DAEMON_H_
#define PLIMSOLL_SERVER_DAEMON_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/config.h"
#include "server/control_loop.h"

namespace grpc {
class Server;
}

namespace plimsoll::server {

class ControlService;
namespace agent {
class AgentServer;
class AgentService;
class AgentStore;
class ReportValidator;
}  // namespace agent

struct DaemonOverrides {
  std::unique_ptr<hypervisor::Hypervisor> hypervisor;  // default: LibvirtHypervisor(libvirt_uri)
  std::unique_ptr<host::HostReader> host;              // default: ProcHostReader(proc_root)
  Clock* clock = nullptr;                              // default: RealClock
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const Options& options,
                                                        DaemonOverrides overrides = {});
  ~Daemon();

  // Serves metrics and the control API, then starts the loop thread. Errors
  // (port in use, socket path not writable) name the listener.
  absl::Status Start();
  // Stops the loop, the gRPC server and the exposer. Idempotent.
  void Shutdown();

  // Where the listeners really are (ports resolved when 0 was asked for).
  std::string grpc_address() const { return grpc_address_; }
  int metrics_port() const;
  // The agent listener's "host:port" (port resolved), empty when the channel is off.
  std::string agent_address() const;

  ControlLoop& loop() { return *loop_; }

 private:
  Daemon() = default;
  absl::Status StartGrpc();
  absl::Status StartAgentChannel();

  Options options_;
  std::unique_ptr<hypervisor::Hypervisor> hypervisor_;
  std::unique_ptr<host::HostReader> host_;
  std::unique_ptr<policy::Policy> policy_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<agent::ReportValidator> agent_validator_;
  std::unique_ptr<agent::AgentStore> agent_store_;
  std::unique_ptr<agent::AgentService> agent_service_;
  std::unique_ptr<agent::AgentServer> agent_server_;
  Clock* clock_ = nullptr;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string grpc_address_;
  std::thread loop_thread_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_DAEMON_H_
