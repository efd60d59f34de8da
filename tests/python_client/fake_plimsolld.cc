// A stand-in for plimsolld for the Python client test: the real ControlService
// over FakeControlCore (overrides persisted to --state_file), with gRPC health
// and reflection, on --grpc_listen. It lets the Python test exercise every
// mutating RPC before the real daemon's control core is wired. Other
// plimsolld flags are accepted and ignored. Test-only.
#include <signal.h>
#include <sys/stat.h>

#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/api/control_service.h"
#include "server/api/testing/fake_control_core.h"

int main(int argc, char** argv) {
  std::string listen, state_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::cout << "fake_plimsolld: --grpc_listen=unix:PATH --state_file=PATH (other flags ignored)\n";
      return 0;
    }
    if (absl::StartsWith(a, "--grpc_listen=")) listen = a.substr(14);
    if (absl::StartsWith(a, "--state_file=")) state_file = a.substr(13);
  }
  if (!absl::StartsWith(listen, "unix:")) {
    std::cerr << "fake_plimsolld: --grpc_listen=unix:PATH required\n";
    return 2;
  }
  plimsoll::RealClock clock;
  std::unique_ptr<plimsoll::server::OverrideStore> store;
  if (!state_file.empty()) {
    auto opened = plimsoll::server::OverrideStore::Open(
        std::make_unique<plimsoll::server::StateStore>(state_file, &clock), &clock);
    if (!opened.ok()) {
      std::cerr << "fake_plimsolld: " << opened.status() << "\n";
      return 1;
    }
    store = std::move(*opened);
  }
  plimsoll::server::FakeControlCore core(&clock, std::move(store));
  plimsoll::v1::ListGuestsResponse view;
  google::protobuf::TextFormat::ParseFromString(R"(
    guests { name: "test" uuid: "6695eb01-f6a4-8304-79aa-97f2502e193f" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_MANAGED max_bytes: 8589934592 min_bytes: 2147483648
             target_bytes: 4294967296 actual_bytes: 4294967296
             stats { stats_fresh: true usable { bytes: 2147483648 } disk_caches { bytes: 1073741824 } } }
    guests { name: "stale" uuid: "6695eb01-f6a4-8304-79aa-97f2502e1940" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_STALE_STATS max_bytes: 2147483648 min_bytes: 536870912
             target_bytes: 2147483648 actual_bytes: 2147483648 stats { stats_age_seconds: 60 } }
    host { mem_total_bytes: 17179869184 mem_available_bytes: 12884901888 guest_budget_bytes: 4294967296
           psi_memory_some_avg10: 1.5 policy: "mom" libvirt_connected: true tick: 5 tick_seconds: 0.2 }
    host_line { capacity_bytes: 4294967296 committed_bytes: 3221225472 burst_reserve_bytes: 1073741824
                new_guest_room_bytes: 536870912 headroom_bytes: 536870912 offered_bytes: 536870912
                guests: 2 guests_at_ceiling: 1 tick: 5 })",
                                                &view);
  // As fresh as the daemon's own line; GetHostLine serves it stale once it is 15 s old.
  view.mutable_host_line()->set_computed_unix_micros(absl::ToUnixMicros(clock.Now()));
  core.SetView(view);
  plimsoll::server::ControlServiceOptions options;
  options.policy_names = {"mom", "static"};
  plimsoll::server::ControlService service([&core] { return core.View(); }, &core, options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const mode_t old = umask(0177);
  auto server = builder.BuildAndStart();
  umask(old);
  if (!server) return 1;
  int sig = 0;
  sigwait(&signals, &sig);
  core.hub().Close();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  unlink(listen.substr(5).c_str());
  return 0;
}
