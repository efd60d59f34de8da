// Load benchmark of the daemon's agent ingestion (run it; it is not a test):
//   bazel run -c opt //server/agent:agent_load_bench -- --streams=64 --seconds=10
// 1. In-process: AgentStore::Ingest on pre-signed frames (parse, two HMACs, checks, store),
//    without gRPC.
// 2. Loopback gRPC: --streams simulated agents, each on its own connection like a real agent,
//    against a real AgentServer. --interval=0 is closed loop (send, wait for the ack, repeat:
//    the daemon's ceiling); --interval=1s is open loop (each agent reports once a second).
// Latency is per report, from Write() on the agent side to its ack arriving, so it includes
// validation and storing on the daemon side and loopback transport both ways. Client and
// server share the machine's CPUs, so the figures are a lower bound for the daemon alone.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "server/agent/agent_server.h"
#include "server/agent/agent_service.h"
#include "server/agent/agent_store.h"
#include "server/agent/report_validator.h"
#include "server/agent/test_reports.h"

ABSL_FLAG(int, streams, 64, "concurrent simulated agents");
ABSL_FLAG(int, seconds, 10, "duration of the gRPC phase");
ABSL_FLAG(absl::Duration, interval, absl::ZeroDuration(), "per-agent report interval; 0 = closed loop");
ABSL_FLAG(int, ingest_iterations, 200000, "reports for the in-process phase");

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

std::string GuestUuid(int i) { return absl::StrFormat("%08x-0000-4000-8000-%012x", i, i); }

ValidatorOptions Unlimited() {
  ValidatorOptions o;
  o.reports_per_second = 1e9;  // measure the machinery, not the rate limiter
  o.burst = 1e9;
  return o;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

void InProcess(int guests, int iterations) {
  ReportValidator validator(TestHostKey(), Unlimited());
  AgentStore store(&validator, RealClock::Get());
  absl::flat_hash_map<std::string, GuestLimits> known;
  for (int g = 0; g < guests; ++g) known[GuestUuid(g)] = GuestLimits{kGiB};
  store.SetKnownGuests(known);
  std::vector<v1::SignedAgentReport> frames;
  frames.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const int g = i % guests;
    frames.push_back(SignAsSelf(MakeReport(GuestUuid(g), kBootA, 10 + 0.001 * (i / guests + 1), i + 1)));
  }
  const absl::Time start = absl::Now();
  int accepted = 0;
  for (const auto& f : frames) accepted += store.Ingest(f).ok() ? 1 : 0;
  const absl::Duration took = absl::Now() - start;
  std::printf("in-process Ingest: %d reports (%d guests) in %s: %.2f us/report, %.0f reports/s, accepted=%d\n",
              iterations, guests, absl::FormatDuration(took).c_str(),
              absl::ToDoubleMicroseconds(took) / iterations, iterations / absl::ToDoubleSeconds(took), accepted);
}

void OverGrpc(int streams, int seconds, absl::Duration interval) {
  ReportValidator validator(TestHostKey(), Unlimited());
  AgentStore store(&validator, RealClock::Get());
  absl::flat_hash_map<std::string, GuestLimits> known;
  for (int g = 0; g < streams; ++g) known[GuestUuid(g)] = GuestLimits{kGiB};
  store.SetKnownGuests(known);
  AgentServiceOptions so;
  so.max_streams = streams + 16;
  so.frames_per_second = 1e9;
  so.frame_burst = 1e9;
  AgentService service(&store, RealClock::Get(), so);
  AgentServerOptions options;
  options.listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<AgentServer>> server = AgentServer::Start(options, &service);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return;
  }
  const std::string address = (*server)->address();

  std::atomic<bool> go{false}, stop{false};
  absl::Mutex mu;
  std::vector<double> latencies_us;
  uint64_t total = 0, rejected = 0, broken = 0;
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per agent
      auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
      auto stub = v1::AgentChannel::NewStub(channel);
      grpc::ClientContext context;
      auto stream = stub->Report(&context);
      const std::string uuid = GuestUuid(s);
      v1::AgentReply reply;
      bool ok = stream->Read(&reply) && reply.has_hello();
      const std::string nonce = reply.hello().nonce();
      std::vector<double> mine;
      uint64_t mine_rejected = 0;
      while (!go.load()) std::this_thread::yield();
      double t = 10;
      uint64_t seq = 0;
      absl::Time next = absl::Now() + absl::Milliseconds(s % 1000);  // spread open-loop agents
      while (!stop.load() && ok) {
        if (interval > absl::ZeroDuration()) {
          const absl::Time now = absl::Now();
          if (now < next) {
            absl::SleepFor(std::min(next - now, absl::Milliseconds(50)));
            continue;
          }
          next += interval;
        }
        t += 0.001;
        v1::AgentReport report = MakeReport(uuid, kBootA, t, ++seq);
        report.set_stream_nonce(nonce);
        const v1::SignedAgentReport frame = SignAsSelf(report);
        const absl::Time sent = absl::Now();
        ok = stream->Write(frame) && stream->Read(&reply) && reply.has_ack();
        if (!ok) break;
        mine.push_back(absl::ToDoubleMicroseconds(absl::Now() - sent));
        if (!reply.ack().accepted()) ++mine_rejected;
      }
      stream->WritesDone();
      context.TryCancel();
      const grpc::Status finish = stream->Finish();
      absl::MutexLock l(&mu);
      if (!ok && broken == 0) {
        std::fprintf(stderr, "stream %d broke after %zu reports: %d %s\n", s, mine.size(),
                     static_cast<int>(finish.error_code()), finish.error_message().c_str());
      }
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
      total += mine.size();
      rejected += mine_rejected;
      if (!ok) ++broken;
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // let every stream connect
  const absl::Time start = absl::Now();
  go = true;
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  const absl::Duration took = absl::Now() - start;
  for (auto& t : threads) t.join();
  (*server)->Shutdown();
  std::printf(
      "grpc loopback: streams=%d mode=%s duration=%s reports=%llu rate=%.0f reports/s "
      "latency_us p50=%.0f p90=%.0f p99=%.0f max=%.0f rejected=%llu broken_streams=%llu store_accepted=%llu\n",
      streams, interval > absl::ZeroDuration() ? absl::StrCat("open/", absl::FormatDuration(interval)).c_str() : "closed",
      absl::FormatDuration(took).c_str(), static_cast<unsigned long long>(total),
      static_cast<double>(total) / absl::ToDoubleSeconds(took), Percentile(latencies_us, 0.5),
      Percentile(latencies_us, 0.9), Percentile(latencies_us, 0.99),
      latencies_us.empty() ? 0.0 : *std::max_element(latencies_us.begin(), latencies_us.end()),
      static_cast<unsigned long long>(rejected), static_cast<unsigned long long>(broken),
      static_cast<unsigned long long>(store.counters().accepted));
}

}  // namespace
}  // namespace plimsoll::server::agent

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int streams = absl::GetFlag(FLAGS_streams);
  plimsoll::server::agent::InProcess(streams, absl::GetFlag(FLAGS_ingest_iterations));
  plimsoll::server::agent::OverGrpc(streams, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_interval));
  return 0;
}
