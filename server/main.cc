// plimsolld: page-cache-aware balloon controller for KVM hosts.
// Usage: plimsolld [--config=FILE] [--check_config] [--<config field>=VALUE ...]
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "server/api/security/tls_credentials.h"
#include "server/config/config.h"
#include "server/config/config_reload.h"
#include "server/daemon.h"

namespace {

constexpr char kUsage[] = R"(plimsolld: page-cache-aware balloon controller for KVM hosts

Usage: plimsolld [--config=FILE] [--check_config] [--FIELD=VALUE ...]

  --config=FILE     configuration in protobuf text format (plimsoll.v1.DaemonConfig)
  --check_config    validate the configuration, print the effective one, exit
  --help            this text

Every configuration field is also a flag of the same name, overriding the file:
  --libvirt_uri=qemu:///system   --grpc_listen=unix:/run/plimsoll/plimsolld.sock
  --metrics_listen=127.0.0.1:9587 --policy=mom   --tick=5s   --dry_run
  --guest_memory_budget_bytes=N   --host_reserve_bytes=N   (nested fields by name)
All config flags: )";

int Fail(const std::string& message) {
  std::cerr << "plimsolld: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc malloc, before any thread exists: at most two arenas (the default is up
  // to 8 per core, one per thread here), and blocks of 128 KiB or more (a /metrics
  // scrape of thousands of guest series) mapped and unmapped on free. Without this,
  // freed scrape buffers stayed resident: 65 MiB after eight scrapes of 1,000 guests,
  // 54 MiB with one arena and these thresholds (docs/benchmarks.md, "Control loop at scale").
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  // Debian's abseil checks every mutex acquisition for lock-order cycles; that cost the agent
  // channel 2-3% of its CPU per report (agent_load_bench). The tests run with it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string config_path;
  bool check_config = false;
  std::vector<std::pair<std::string, std::string>> flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage << "--" << absl::StrJoin(plimsoll::server::ConfigFlagNames(), ", --") << "\n";
      return 0;
    }
    if (!absl::StartsWith(arg, "--")) return Fail("unexpected argument \"" + arg + "\" (see --help)");
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "config") {
      if (value.empty()) return Fail("--config needs a file: --config=/etc/plimsoll/plimsolld.textproto");
      config_path = value;
    } else if (name == "check_config") {
      check_config = true;
    } else {
      flags.emplace_back(name, value);
    }
  }

  auto flag_config = plimsoll::server::ConfigFromFlags(flags);
  if (!flag_config.ok()) return Fail(std::string(flag_config.status().message()));
  // The file overlaid with the flags, defaulted and validated, with the control API's listener
  // security, roles and state file; the same path every SIGHUP reload takes.
  auto loaded = plimsoll::server::LoadEffectiveConfig(config_path, *flag_config);
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  const plimsoll::v1::DaemonConfig& effective = loaded->config;
  const plimsoll::server::Options* options = &loaded->options;
  const plimsoll::server::ControlApiOptions* control = &loaded->control;
  if (check_config && !control->unix_socket) {
    if (absl::Status s = plimsoll::server::CheckTlsFiles(*control); !s.ok()) return Fail(std::string(s.message()));
  }
  if (check_config) {
    for (const std::string& w : options->warnings) std::cerr << "plimsolld: warning: " << w << "\n";
    std::cout << "# effective plimsolld configuration (valid)\n" << plimsoll::server::ToText(effective);
    return 0;
  }

  // Block the shutdown signals in every thread; main waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = plimsoll::server::Daemon::Create(*options, *control);
  if (!daemon.ok()) return Fail(std::string(daemon.status().message()));
  (*daemon)->SetConfigSource(config_path, *flag_config);
  if (absl::Status s = (*daemon)->Start(); !s.ok()) return Fail(std::string(s.message()));

  while (true) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      PLOG_INFO << "SIGHUP: reloading the configuration";
      // Logs and counts its own outcome; a failure keeps the running configuration.
      (void)(*daemon)->ReloadConfig();
      continue;
    }
    PLOG_INFO << "received " << strsignal(sig) << "; shutting down";
    break;
  }
  (*daemon)->Shutdown();
  PLOG_INFO << "plimsolld stopped";
  return 0;
}
