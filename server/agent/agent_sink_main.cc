// plimsoll-agent-sink: a stand-alone agent listener for trying agents before (or without)
// plimsolld: it validates and stores reports exactly as the daemon does and prints each guest's
// signals periodically. A development and lab tool, not a deployment.
//   plimsoll-agent-sink --listen=127.0.0.1:9588 --key_file=KEY --guest=UUID:MAX_MIB[,UUID:MAX_MIB...]
// With --reclaim_bounds (or --reclaim_bounds_file, re-read every second) it also sends every
// guest's agent those reclaim bounds, for trying the reclaimer before plimsolld has a policy.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/report_proof.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/agent_sink_line.h"
#include "server/agent/agent_store.h"
#include "server/agent/host_key.h"
#include "server/agent/reclaim_bounds_provider.h"
#include "server/agent/report_validator.h"
#include "common/small_file.h"
#include "server/config/default_paths.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:9588", "agent listener address");
ABSL_FLAG(std::string, key_file, plimsoll::server::kDefaultAgentHostKeyFile, "host key (hex, mode 0600)");
ABSL_FLAG(std::vector<std::string>, guest, {}, "guests to accept, UUID:MAX_MIB[,UUID:MAX_MIB...]");
ABSL_FLAG(absl::Duration, print_every, absl::Seconds(2), "how often to print the signals");
ABSL_FLAG(absl::Duration, duration, absl::InfiniteDuration(), "stop after this long");
ABSL_FLAG(std::string, reclaim_bounds, "",
          "reclaim bounds for every guest's agent: \"off\" or e.g. \"keep_mib=600,step_mib=64,rate_mib=32\" "
          "(keys keep_mib, keep_file_mib, step_mib, rate_mib, psi_stop, refault_stop); empty: none");
ABSL_FLAG(std::string, reclaim_bounds_file, "",
          "a file holding such a spec, re-read every second (tests change the bounds by writing it); "
          "missing or empty: none. Overrides --reclaim_bounds");

namespace {

using plimsoll::server::agent::ParseReclaimBoundsSpec;

// The same bounds for every guest, from the flag or the file.
class SinkBounds : public plimsoll::server::agent::ReclaimBoundsProvider {
 public:
  SinkBounds(std::optional<plimsoll::v1::ReclaimBounds> fixed, std::string file)
      : fixed_(std::move(fixed)), file_(std::move(file)) {}
  std::optional<plimsoll::v1::ReclaimBounds> BoundsFor(const std::string&) override {
    if (file_.empty()) return fixed_;
    absl::MutexLock l(&mu_);
    if (absl::Now() - read_ >= absl::Seconds(1)) {
      read_ = absl::Now();
      absl::StatusOr<std::string> text = plimsoll::ReadSmallFile(file_, 4096);
      std::optional<plimsoll::v1::ReclaimBounds> next;
      if (text.ok() && !absl::StripAsciiWhitespace(*text).empty()) {
        absl::StatusOr<plimsoll::v1::ReclaimBounds> parsed = ParseReclaimBoundsSpec(*text);
        if (parsed.ok()) {
          next = *parsed;
        } else {
          PLOG_WARNING << "--reclaim_bounds_file " << file_ << ": " << parsed.status() << "; sending none";
        }
      }
      current_ = next;
    }
    return current_;
  }

 private:
  const std::optional<plimsoll::v1::ReclaimBounds> fixed_;
  const std::string file_;
  absl::Mutex mu_;
  absl::Time read_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<plimsoll::v1::ReclaimBounds> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int main(int argc, char** argv) {
  using namespace plimsoll::server::agent;  // NOLINT: a small tool
  absl::SetProgramUsageMessage("plimsoll-agent-sink: validate and print agent reports");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<std::string> key = LoadHostKey(absl::GetFlag(FLAGS_key_file));
  if (!key.ok()) {
    PLOG_ERROR << key.status();
    return 1;
  }
  absl::flat_hash_map<std::string, GuestLimits> guests;
  for (const std::string& g : absl::GetFlag(FLAGS_guest)) {
    std::vector<std::string> parts = absl::StrSplit(g, absl::MaxSplits(':', 1));
    absl::StatusOr<std::string> uuid = parts.size() == 2 ? plimsoll::protocol::NormalizeUuid(parts[0])
                                                         : absl::InvalidArgumentError("want UUID:MAX_MIB");
    int64_t mib = 0;
    if (!uuid.ok() || !absl::SimpleAtoi(parts[1], &mib) || mib <= 0) {
      PLOG_ERROR << "--guest " << g << ": want UUID:MAX_MIB";
      return 2;
    }
    guests[*uuid] = GuestLimits{mib << 20};
  }
  ReportValidator validator(*key);
  AgentStore store(&validator, plimsoll::RealClock::Get());
  store.SetKnownGuests(guests);
  std::optional<plimsoll::v1::ReclaimBounds> fixed;
  if (!absl::GetFlag(FLAGS_reclaim_bounds).empty()) {
    absl::StatusOr<plimsoll::v1::ReclaimBounds> parsed = ParseReclaimBoundsSpec(absl::GetFlag(FLAGS_reclaim_bounds));
    if (!parsed.ok()) {
      PLOG_ERROR << "--reclaim_bounds: " << parsed.status().message();
      return 2;
    }
    fixed = *parsed;
  }
  SinkBounds bounds(fixed, absl::GetFlag(FLAGS_reclaim_bounds_file));
  AgentIngestOptions options;
  options.tcp_listen = absl::GetFlag(FLAGS_listen);
  options.streams.reclaim_bounds = &bounds;
  AgentIngest ingest(options, &store, plimsoll::RealClock::Get());
  if (absl::Status s = ingest.Start(/*hypervisor=*/nullptr); !s.ok()) {
    PLOG_ERROR << s;
    return 1;
  }
  PLOG_INFO << "agent sink listening on " << ingest.tcp_address() << " guests=" << guests.size();

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  absl::Notification done;
  std::thread([&stop, &done] {
    int sig = 0;
    sigwait(&stop, &sig);
    done.Notify();
  }).detach();

  const absl::Time end = absl::Now() + absl::GetFlag(FLAGS_duration);
  while (!done.WaitForNotificationWithTimeout(absl::GetFlag(FLAGS_print_every)) && absl::Now() < end) {
    for (const AgentSignals& s : store.AllSignals()) {
      std::printf("%s\n", SinkLine(s).c_str());
    }
    const AgentCounters c = store.counters();
    std::printf("accepted=%llu rejected=%llu", static_cast<unsigned long long>(c.accepted),
                static_cast<unsigned long long>(c.rejected_total()));
    for (RejectReason r : AllRejectReasons()) {
      if (c.rejected_for(r) > 0) {
        std::printf(" %s=%llu", std::string(RejectReasonName(r)).c_str(),
                    static_cast<unsigned long long>(c.rejected_for(r)));
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  ingest.Shutdown();
  return 0;
}
