// plimsoll-agent: runs inside a guest and streams what only the guest knows (page cache
// activity, reclaim, PSI) to plimsolld on the host. See docs/agent.md.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
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
#include "agent/dial.h"
#include "agent/guest_reader.h"
#include "agent/psi_trigger.h"
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
            << " proc_root=" << (proc_root.empty() ? "/" : proc_root);
  r->Run();
  return 0;
}

}  // namespace
}  // namespace plimsoll::agent

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("plimsoll-agent: reports guest memory signals to plimsolld (docs/agent.md)");
  absl::ParseCommandLine(argc, argv);
  return plimsoll::agent::Main();
}
