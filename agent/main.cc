// plimsoll-agent: runs inside a guest and streams what only the guest knows (page cache
// activity, reclaim, PSI) to plimsolld on the host. See docs/agent.md.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/boottime_clock.h"
#include "agent/compaction.h"
#include "agent/dial.h"
#include "agent/guest_reader.h"
#include "agent/psi_trigger.h"
#include "agent/reclaim_executor.h"
#include "agent/reclaimer.h"
#include "agent/reporter.h"
#include "common/log.h"
#include "common/small_file.h"
#include "google/protobuf/text_format.h"
#include "protocol/report_proof.h"

ABSL_FLAG(std::string, server, plimsoll::agent::kDefaultServer,
          "how to reach plimsolld: virtio-serial:NAME (the domain's own virtio-serial port, no "
          "token needed: the host knows whose port it is), host:port (TCP; 10.0.2.2 is the host "
          "under QEMU user networking; needs the guest token) or vsock:CID:PORT (CID 2 is the host; no "
          "token: the host knows the guest by its CID)");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM file of the CA that signed plimsolld's agent-listener certificate; when set the agent "
          "speaks TLS and refuses a daemon whose certificate does not verify against it (TCP only; "
          "vsock stays plaintext). Unset: plaintext, which plimsolld only offers on loopback");
ABSL_FLAG(std::string, tls_server_name, "",
          "with --tls_ca_file: the name checked against the daemon's certificate instead of the host "
          "in --server (e.g. --server=10.0.2.2:9588 while the certificate names the host)");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(5), "time between regular reports");
ABSL_FLAG(std::string, proc_root, "", "directory holding proc/ (\"\" is the real /proc)");
ABSL_FLAG(std::string, uuid_file, "/sys/class/dmi/id/product_uuid",
          "file holding this guest's SMBIOS UUID (libvirt sets it to the domain UUID)");
ABSL_FLAG(std::string, token_file, "/sys/firmware/qemu_fw_cfg/by_name/opt/org.plimsoll/token/raw",
          "file holding this guest's token in hex, injected by the host (docs/security.md)");
ABSL_FLAG(bool, token_from_cmdline, false,
          "read the token from plimsoll.token=HEX on <proc_root>/proc/cmdline instead of --token_file "
          "(lab guests; the command line is readable by every guest user)");
ABSL_FLAG(bool, psi_trigger, true, "arm a PSI trigger and report at once when it fires");
ABSL_FLAG(std::string, psi_trigger_kind, "some", "PSI trigger line: some or full");
ABSL_FLAG(absl::Duration, psi_threshold, absl::Milliseconds(150), "PSI trigger stall threshold per window");
ABSL_FLAG(absl::Duration, psi_window, absl::Seconds(1),
          "PSI trigger window (500ms..10s; without CAP_SYS_RESOURCE rounded up to a 2s multiple)");
ABSL_FLAG(absl::Duration, max_backoff, absl::Seconds(30), "longest wait between reconnection attempts");
ABSL_FLAG(bool, mlock, true,
          "keep the agent's pages resident (mlockall, on fault): a guest under memory pressure "
          "is when the agent must answer fast, and when its pages would be evicted");
ABSL_FLAG(bool, log_spikes, false,
          "log one line per spike report sent, with the time since the trigger fired (for "
          "latency measurements; chatty under steady pressure)");
ABSL_FLAG(bool, dump, false, "print one sample in protobuf text format and exit (no connection)");
ABSL_FLAG(std::string, reclaim, "on",
          "proactive reclaim of the guest's page cache through memory.reclaim, within the bounds "
          "plimsolld sends (docs/agent.md, \"Reclaim\"): on (nothing happens until plimsolld sends "
          "bounds), off, or dry_run (decide and log, never write)");
ABSL_FLAG(std::string, reclaim_root, "/sys/fs/cgroup", "the cgroup v2 mount whose memory.reclaim the agent writes");
ABSL_FLAG(int64_t, reclaim_min_file_mib, 64,
          "never reclaim the file LRU (Active(file) + Inactive(file)) below this many MiB, whatever "
          "the host says");
ABSL_FLAG(int64_t, reclaim_max_step_mib, 128,
          "one write to memory.reclaim asks for at most this many MiB; 0 switches reclaim off (off_disabled)");
ABSL_FLAG(int64_t, reclaim_max_rate_mib, 64,
          "reclaim at most this many MiB per second on average; 0 switches reclaim off (off_disabled)");
ABSL_FLAG(double, reclaim_psi_stop, 5,
          "stop while PSI memory \"some\" (avg10, or the share of the last second) is over this percent; "
          "the host may only lower it");
ABSL_FLAG(double, reclaim_refault_stop, 1000,
          "stop while file refaults per second are over this; the host may only lower it");
ABSL_FLAG(bool, reclaim_compact, true,
          "after a reclaim round that freed at least 32 MiB, write 1 to /proc/sys/vm/compact_memory (at most "
          "every 30 s), so free page reporting, which returns only whole 2 MiB blocks, returns what was freed");
ABSL_FLAG(absl::Duration, reclaim_bounds_ttl, absl::Seconds(20),
          "stop reclaiming when no ack has carried bounds for this long");
ABSL_FLAG(absl::Duration, reclaim_keep_hold, absl::Minutes(5),
          "a keep the host names stays in force this long, whatever lower keep it names later");

namespace plimsoll::agent {
namespace {

absl::StatusOr<std::string> LoadToken(const std::string& proc_root) {
  std::string hex;
  if (absl::GetFlag(FLAGS_token_from_cmdline)) {
    const std::string path = proc_root + "/proc/cmdline";
    absl::StatusOr<std::string> cmdline = ReadSmallFile(path, 64 * 1024);
    if (!cmdline.ok()) return cmdline.status();
    for (absl::string_view word : absl::StrSplit(*cmdline, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&word, "plimsoll.token=")) hex = std::string(word);
    }
    if (hex.empty()) return absl::NotFoundError(absl::StrCat(path, ": no plimsoll.token= word"));
  } else {
    const std::string path = absl::GetFlag(FLAGS_token_file);
    absl::StatusOr<std::string> text = ReadSmallFile(path, 4096);
    if (!text.ok()) return text.status();
    hex = *std::move(text);
  }
  absl::StatusOr<std::string> token = protocol::ParseHexSecret(hex, protocol::kTokenBytes);
  if (!token.ok()) return absl::InvalidArgumentError(absl::StrCat("token: ", token.status().message()));
  if (token->size() != protocol::kTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token: ", token->size(), " bytes, want ", protocol::kTokenBytes));
  }
  return token;
}

// The reclaimer's options from the --reclaim_* flags; errors name the flag.
absl::StatusOr<ReclaimerOptions> ReclaimFlags() {
  ReclaimerOptions o;
  const std::string mode = absl::GetFlag(FLAGS_reclaim);
  if (mode != "on" && mode != "off" && mode != "dry_run") {
    return absl::InvalidArgumentError(absl::StrCat("--reclaim must be on, off or dry_run, not \"", mode, "\""));
  }
  o.enabled = mode != "off";
  constexpr int64_t kMaxMib = int64_t{1} << 30;
  const int64_t min_file = absl::GetFlag(FLAGS_reclaim_min_file_mib);
  const int64_t step = absl::GetFlag(FLAGS_reclaim_max_step_mib);
  const int64_t rate = absl::GetFlag(FLAGS_reclaim_max_rate_mib);
  if (min_file < 0 || min_file > kMaxMib) return absl::InvalidArgumentError("--reclaim_min_file_mib out of range");
  if (step < 0 || step > kMaxMib) return absl::InvalidArgumentError("--reclaim_max_step_mib out of range");
  if (rate < 0 || rate > kMaxMib) return absl::InvalidArgumentError("--reclaim_max_rate_mib out of range");
  o.own.min_file_bytes = static_cast<uint64_t>(min_file) << 20;
  o.own.max_step_bytes = static_cast<uint64_t>(step) << 20;
  o.own.max_bytes_per_second = static_cast<double>(rate) * (1 << 20);
  o.own.psi_stop_pct = absl::GetFlag(FLAGS_reclaim_psi_stop);
  if (!(o.own.psi_stop_pct >= 0 && o.own.psi_stop_pct <= 100)) {
    return absl::InvalidArgumentError("--reclaim_psi_stop must be a percent in [0, 100]");
  }
  o.own.refault_stop_per_second = absl::GetFlag(FLAGS_reclaim_refault_stop);
  if (!(o.own.refault_stop_per_second >= 0) || std::isinf(o.own.refault_stop_per_second)) {
    return absl::InvalidArgumentError("--reclaim_refault_stop must be a finite number >= 0");
  }
  o.own.bounds_ttl = absl::GetFlag(FLAGS_reclaim_bounds_ttl);
  o.own.keep_hold = absl::GetFlag(FLAGS_reclaim_keep_hold);
  if (o.own.bounds_ttl <= absl::ZeroDuration()) return absl::InvalidArgumentError("--reclaim_bounds_ttl must be > 0");
  if (o.own.keep_hold < absl::ZeroDuration()) return absl::InvalidArgumentError("--reclaim_keep_hold must be >= 0");
  o.series_start_boottime_ns = BoottimeNanos();
  return o;
}

// The reclaimer's executor, or null: reclaim is off (ReclaimOffDetail), or unsupported, with
// options->unsupported_detail saying why. A dry run opens memory.reclaim without writing to it.
std::unique_ptr<ReclaimExecutor> MakeReclaimExecutor(ReclaimerOptions* options) {
  if (!ReclaimOffDetail(*options).empty()) return nullptr;
  CgroupReclaimOptions c;
  c.root = absl::GetFlag(FLAGS_reclaim_root);
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> opened =
      OpenReclaimExecutor(/*dry_run=*/absl::GetFlag(FLAGS_reclaim) == "dry_run", c);
  if (!opened.ok()) {
    options->unsupported_detail = std::string(opened.status().message());
    return nullptr;
  }
  return *std::move(opened);
}

// The compactor after reclaim rounds, or null: --reclaim_compact=false, reclaim off, or no
// writable compact_memory (logged: reclaim then returns to the host only what frees whole blocks).
std::unique_ptr<Compactor> MakeCompactor(const ReclaimExecutor* executor) {
  if (executor == nullptr || !absl::GetFlag(FLAGS_reclaim_compact)) return nullptr;
  absl::StatusOr<std::unique_ptr<ProcCompactor>> opened = ProcCompactor::Open();
  if (!opened.ok()) {
    PLOG_WARNING << "no compaction after reclaim (" << opened.status().message()
                 << "): free page reporting returns only the whole 2 MiB blocks reclaim frees";
    return nullptr;
  }
  return *std::move(opened);
}

int Main() {
  std::string proc_root = absl::GetFlag(FLAGS_proc_root);
  while (!proc_root.empty() && proc_root.back() == '/') proc_root.pop_back();
  GuestReader reader(proc_root);

  if (absl::GetFlag(FLAGS_dump)) {
    v1::AgentReport report;
    if (absl::Status s = reader.Read(&report); !s.ok()) {
      PLOG_ERROR << s;
      return 1;
    }
    std::string text;
    google::protobuf::TextFormat::PrintToString(report, &text);
    std::fputs(text.c_str(), stdout);
    return 0;
  }

  if (absl::GetFlag(FLAGS_mlock)) {
    // On fault: pages are locked as they are first touched, so the reserved but unused parts
    // of thread stacks and heaps are never committed. Without it, a lab guest stalled on
    // memory took 1.6-2.8 s from its PSI trigger to sending the spike report (its binary's
    // pages, read over 9p, and its heap evicted by the very pressure it reports).
    if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) {
      PLOG_WARNING << "mlockall failed (errno " << errno << "); under memory pressure reports may be late";
    }
  }

  ReporterOptions options;
  options.server_text = absl::GetFlag(FLAGS_server);
  absl::StatusOr<ServerAddress> server = ParseServerAddress(options.server_text);
  if (!server.ok()) {
    PLOG_ERROR << server.status();
    return 2;
  }
  options.server = *server;
  const std::string tls_ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  options.tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (!options.tls.server_name.empty() && tls_ca_file.empty()) {
    PLOG_ERROR << "--tls_server_name needs --tls_ca_file";
    return 2;
  }
  if (!tls_ca_file.empty()) {
    if (server->kind != ServerAddress::Kind::kTcp) {
      PLOG_ERROR << "--tls_ca_file applies to a TCP --server; vsock and virtio-serial are host-local and stay "
                    "plaintext";
      return 2;
    }
    absl::StatusOr<std::string> ca = ReadSmallFile(tls_ca_file, 1 << 20);
    if (!ca.ok()) {
      PLOG_ERROR << "--tls_ca_file: " << ca.status();
      return 1;
    }
    if (!absl::StrContains(*ca, "-----BEGIN CERTIFICATE-----")) {
      PLOG_ERROR << "--tls_ca_file: " << tls_ca_file << " holds no PEM certificate";
      return 1;
    }
    options.tls.ca_pem = *std::move(ca);
  }
  options.interval = absl::GetFlag(FLAGS_interval);
  if (options.interval < absl::Milliseconds(100)) {
    PLOG_ERROR << "--interval must be at least 100ms";
    return 2;
  }
  options.max_backoff = std::max(absl::GetFlag(FLAGS_max_backoff), options.initial_backoff);
  options.log_spikes = absl::GetFlag(FLAGS_log_spikes);

  absl::StatusOr<std::string> uuid_text = ReadSmallFile(absl::GetFlag(FLAGS_uuid_file), 4096);
  absl::StatusOr<std::string> uuid = uuid_text.ok() ? protocol::NormalizeUuid(*uuid_text) : uuid_text.status();
  if (!uuid.ok()) {
    PLOG_ERROR << "guest uuid (--uuid_file): " << uuid.status();
    return 1;
  }
  options.guest_uuid = *uuid;
  // A virtio-serial port belongs to one domain, and the host knows which; a vsock connection
  // carries the CID the host gave this guest's device: no token on either. TCP needs one.
  if (server->kind == ServerAddress::Kind::kTcp) {
    absl::StatusOr<std::string> token = LoadToken(proc_root);
    if (!token.ok()) {
      // The message never contains the token text.
      PLOG_ERROR << "guest token: " << token.status();
      return 1;
    }
    options.token = *std::move(token);
  }
  absl::StatusOr<std::string> boot_id = reader.ReadBootId();
  if (!boot_id.ok()) {
    PLOG_ERROR << "boot id: " << boot_id.status();
    return 1;
  }
  options.boot_id = *boot_id;

  std::unique_ptr<PsiTrigger> trigger;
  if (absl::GetFlag(FLAGS_psi_trigger)) {
    PsiTriggerOptions t;
    t.kind = absl::GetFlag(FLAGS_psi_trigger_kind);
    t.threshold = absl::GetFlag(FLAGS_psi_threshold);
    t.window = absl::GetFlag(FLAGS_psi_window);
    absl::StatusOr<std::unique_ptr<PsiTrigger>> opened = PsiTrigger::Open(proc_root, t);
    if (opened.ok()) {
      trigger = *std::move(opened);
    } else {
      PLOG_WARNING << "no psi trigger, spikes wait for the next interval: " << opened.status();
    }
  }

  // Signals are taken by one thread with sigwait, never by a handler, so Stop() runs in a normal
  // context. Block them before any other thread starts so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<ReclaimerOptions> reclaim_options = ReclaimFlags();
  if (!reclaim_options.ok()) {
    PLOG_ERROR << reclaim_options.status().message();
    return 2;
  }
  std::unique_ptr<ReclaimExecutor> reclaim_executor = MakeReclaimExecutor(&*reclaim_options);
  // Its own reader (GuestReader keeps no state, but one per thread keeps it obvious) and the
  // guest's CLOCK_BOOTTIME: bounds expire by it even when the wall clock is stepped.
  GuestReader reclaim_reader(proc_root);
  BoottimeClock boottime_clock;
  std::unique_ptr<Compactor> compactor = MakeCompactor(reclaim_executor.get());
  Reclaimer reclaimer(*std::move(reclaim_options), std::move(reclaim_executor), &reclaim_reader, &boottime_clock,
                      std::move(compactor));
  options.reclaim = &reclaimer;

  absl::StatusOr<std::unique_ptr<Reporter>> reporter = Reporter::Create(options, &reader, std::move(trigger));
  if (!reporter.ok()) {
    PLOG_ERROR << reporter.status();
    return 1;
  }
  Reporter* r = reporter->get();
  std::thread signals([r, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    PLOG_INFO << "signal " << sig << ", stopping";
    r->Stop();
  });
  signals.detach();
  PLOG_INFO << "plimsoll-agent starting: server=" << options.server_text
            << " transport="
            << (server->kind == ServerAddress::Kind::kVirtioSerial ? "virtio-serial"
                : server->kind == ServerAddress::Kind::kVsock      ? "vsock"
                                                                    : (options.tls.enabled() ? "tls" : "plaintext"))
            << (options.tls.server_name.empty() ? "" : absl::StrCat(" tls_server_name=", options.tls.server_name))
            << " uuid=" << options.guest_uuid
            << " boot_id=" << options.boot_id << " interval=" << absl::FormatDuration(options.interval)
            << " proc_root=" << (proc_root.empty() ? "/" : proc_root) << " reclaim=" << absl::GetFlag(FLAGS_reclaim);
  std::thread reclaim_thread([&reclaimer] { reclaimer.Run(); });
  r->Run();
  reclaimer.Stop();
  reclaim_thread.join();
  return 0;
}

}  // namespace
}  // namespace plimsoll::agent

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("plimsoll-agent: reports guest memory signals to plimsolld (docs/agent.md)");
  absl::ParseCommandLine(argc, argv);
  return plimsoll::agent::Main();
}
