// Load benchmark of the daemon's agent ingestion (run it; it is not a test):
//   bazel run -c opt //server/agent:agent_load_bench -- --streams=64 --seconds=10
// 1. In-process: AgentStore::Ingest on pre-signed frames (parse, proof, checks, store), without
//    gRPC, each guest's frames with a StreamBinding of its own as AgentService passes them.
// 2. Loopback gRPC: --streams simulated agents, each on its own connection like a real agent,
//    against a real AgentServer. --interval=0 is closed loop (send, wait for the ack, repeat:
//    the daemon's ceiling); --interval=1s is open loop (each agent reports once a second).
// Latency is per report, from Write() on the agent side to its ack arriving, so it includes
// validation and storing on the daemon side and loopback transport both ways. Client and
// server share the machine's CPUs, so the figures are a lower bound for the daemon alone.
//
// --processes=2 (the default) runs the daemon side in a child process of its own, as plimsolld
// is, so each side's CPU time over the measured window is counted apart (getrusage) and either
// can be profiled alone (`perf record -g -p PID`; the child prints its pid). --processes=1 runs
// both sides in one process, sharing gRPC's threads.
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
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
ABSL_FLAG(int, processes, 2, "2: the daemon side in a child process of its own; 1: both in one process");

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

// CPU seconds (user, system) of the whole process so far.
struct CpuTime {
  double user = 0, sys = 0;
  static CpuTime Now() {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return CpuTime{u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6, u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6};
  }
  CpuTime operator-(const CpuTime& o) const { return CpuTime{user - o.user, sys - o.sys}; }
  double total() const { return user + sys; }
};

double ThreadCpuSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

absl::flat_hash_map<std::string, GuestLimits> KnownGuests(int guests) {
  absl::flat_hash_map<std::string, GuestLimits> known;
  for (int g = 0; g < guests; ++g) known[GuestUuid(g)] = GuestLimits{kGiB};
  return known;
}

void InProcess(int guests, int iterations) {
  ReportValidator validator(TestHostKey(), Unlimited());
  AgentStore store(&validator, RealClock::Get());
  store.SetKnownGuests(KnownGuests(guests));
  std::vector<v1::SignedAgentReport> frames;
  frames.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const int g = i % guests;
    frames.push_back(SignAsSelf(MakeReport(GuestUuid(g), kBootA, 10 + 0.001 * (i / guests + 1), i + 1)));
  }
  std::vector<ProofCache> caches(guests);
  std::vector<StreamBinding> bindings(guests);
  for (int g = 0; g < guests; ++g) bindings[g].proof_cache = &caches[g];
  const absl::Time start = absl::Now();
  const double cpu_start = ThreadCpuSeconds();
  int accepted = 0;
  for (int i = 0; i < iterations; ++i) accepted += store.Ingest(frames[i], bindings[i % guests]).ok() ? 1 : 0;
  const double cpu = ThreadCpuSeconds() - cpu_start;
  const absl::Duration took = absl::Now() - start;
  std::printf(
      "in-process Ingest: %d reports (%d guests) in %s: %.2f us/report wall, %.2f us/report cpu, %.0f reports/s, "
      "accepted=%d\n",
      iterations, guests, absl::FormatDuration(took).c_str(), absl::ToDoubleMicroseconds(took) / iterations,
      cpu * 1e6 / iterations, iterations / absl::ToDoubleSeconds(took), accepted);
}

// The daemon side: validator, store, service and listener, as plimsolld wires them.
struct Daemon {
  explicit Daemon(int streams) : validator(TestHostKey(), Unlimited()), store(&validator, RealClock::Get()) {
    store.SetKnownGuests(KnownGuests(streams));
    AgentServiceOptions so;
    so.max_streams = streams + 16;
    so.frames_per_second = 1e9;
    so.frame_burst = 1e9;
    service = std::make_unique<AgentService>(&store, RealClock::Get(), so);
  }
  absl::Status Start() {
    AgentServerOptions options;
    options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<AgentServer>> s = AgentServer::Start(options, service.get());
    if (!s.ok()) return s.status();
    server = *std::move(s);
    return absl::OkStatus();
  }
  ReportValidator validator;
  AgentStore store;
  std::unique_ptr<AgentService> service;
  std::unique_ptr<AgentServer> server;
};

struct LoadResult {
  uint64_t total = 0, rejected = 0, broken = 0;
  std::vector<double> latencies_us;
  absl::Duration took;
  CpuTime cpu;  // this process over the measured window
};

// The simulated agents. `go` is called when every stream has connected and measuring starts,
// `stop` when it ends (both on this thread).
LoadResult Generate(const std::string& address, int streams, int seconds, absl::Duration interval,
                    const std::function<void()>& go_hook, const std::function<void()>& stop_hook) {
  std::atomic<bool> go{false}, stop{false};
  absl::Mutex mu;
  LoadResult out;
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
      if (!ok && out.broken == 0) {
        std::fprintf(stderr, "stream %d broke after %zu reports: %d %s\n", s, mine.size(),
                     static_cast<int>(finish.error_code()), finish.error_message().c_str());
      }
      out.latencies_us.insert(out.latencies_us.end(), mine.begin(), mine.end());
      out.total += mine.size();
      out.rejected += mine_rejected;
      if (!ok) ++out.broken;
    });
  }
  absl::SleepFor(absl::Milliseconds(500) + absl::Milliseconds(streams));  // let every stream connect
  const absl::Time start = absl::Now();
  const CpuTime cpu_start = CpuTime::Now();
  go_hook();
  go = true;
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  out.cpu = CpuTime::Now() - cpu_start;
  out.took = absl::Now() - start;
  stop_hook();
  for (auto& t : threads) t.join();
  return out;
}

void PrintResult(int streams, absl::Duration interval, LoadResult& r, uint64_t accepted, const char* cpu_text) {
  const double secs = absl::ToDoubleSeconds(r.took);
  const double n = std::max<double>(1, static_cast<double>(r.total));
  std::printf(
      "grpc loopback: streams=%d mode=%s duration=%s reports=%llu rate=%.0f reports/s "
      "latency_us p50=%.0f p90=%.0f p99=%.0f max=%.0f rejected=%llu broken_streams=%llu store_accepted=%llu\n",
      streams, interval > absl::ZeroDuration() ? absl::StrCat("open/", absl::FormatDuration(interval)).c_str() : "closed",
      absl::FormatDuration(r.took).c_str(), static_cast<unsigned long long>(r.total), static_cast<double>(r.total) / secs,
      Percentile(r.latencies_us, 0.5), Percentile(r.latencies_us, 0.9), Percentile(r.latencies_us, 0.99),
      r.latencies_us.empty() ? 0.0 : *std::max_element(r.latencies_us.begin(), r.latencies_us.end()),
      static_cast<unsigned long long>(r.rejected), static_cast<unsigned long long>(r.broken),
      static_cast<unsigned long long>(accepted));
  std::printf("cpu over the window: %s; generator user=%.2fs sys=%.2fs (%.1f us/report)\n", cpu_text, r.cpu.user,
              r.cpu.sys, r.cpu.total() * 1e6 / n);
}

void OneProcess(int streams, int seconds, absl::Duration interval) {
  Daemon daemon(streams);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return;
  }
  LoadResult r = Generate(daemon.server->address(), streams, seconds, interval, [] {}, [] {});
  daemon.server->Shutdown();
  PrintResult(streams, interval, r, daemon.store.counters().accepted,
              "one process (daemon and generator together; the generator figure below is both)");
}

bool WriteAll(int fd, const std::string& s) { return write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()); }

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// The child: serves until the parent says stop, measuring its CPU between "go" and "stop".
[[noreturn]] void DaemonChild(int streams, int control_fd, int report_fd) {
  Daemon daemon(streams);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    _exit(1);
  }
  WriteAll(report_fd, absl::StrCat(daemon.server->address(), "\n"));
  char c = 0;
  if (read(control_fd, &c, 1) != 1) _exit(1);  // go
  const CpuTime start = CpuTime::Now();
  const uint64_t accepted_start = daemon.store.counters().accepted;
  if (read(control_fd, &c, 1) != 1) _exit(1);  // stop
  const CpuTime cpu = CpuTime::Now() - start;
  const uint64_t accepted = daemon.store.counters().accepted - accepted_start;
  WriteAll(report_fd, absl::StrFormat("%.6f %.6f %llu\n", cpu.user, cpu.sys, static_cast<unsigned long long>(accepted)));
  daemon.server->Shutdown();
  _exit(0);
}

void TwoProcesses(int streams, int seconds, absl::Duration interval) {
  int control[2], report[2];
  if (pipe(control) != 0 || pipe(report) != 0) {
    std::perror("pipe");
    return;
  }
  std::fflush(stdout);
  // Fork before either side touches gRPC: gRPC's threads do not survive a fork.
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return;
  }
  if (child == 0) {
    close(control[1]);
    close(report[0]);
    DaemonChild(streams, control[0], report[1]);
  }
  close(control[0]);
  close(report[1]);
  const std::string address = ReadLine(report[0]);
  if (address.empty()) {
    std::fprintf(stderr, "the daemon child did not start\n");
    waitpid(child, nullptr, 0);
    return;
  }
  std::printf("daemon child pid=%d address=%s\n", static_cast<int>(child), address.c_str());
  std::fflush(stdout);
  LoadResult r = Generate(
      address, streams, seconds, interval, [&] { WriteAll(control[1], "g"); }, [&] { WriteAll(control[1], "s"); });
  const std::string line = ReadLine(report[0]);
  close(control[1]);
  waitpid(child, nullptr, 0);
  double user = 0, sys = 0;
  unsigned long long accepted = 0;
  if (std::sscanf(line.c_str(), "%lf %lf %llu", &user, &sys, &accepted) != 3) {
    std::fprintf(stderr, "no figures from the daemon child: \"%s\"\n", line.c_str());
  }
  const double n = std::max<double>(1, static_cast<double>(accepted));
  PrintResult(streams, interval, r, accepted,
              absl::StrFormat("daemon user=%.2fs sys=%.2fs (%.1f us/report)", user, sys, (user + sys) * 1e6 / n).c_str());
}

}  // namespace
}  // namespace plimsoll::server::agent

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int streams = absl::GetFlag(FLAGS_streams);
  plimsoll::server::agent::InProcess(streams, absl::GetFlag(FLAGS_ingest_iterations));
  if (absl::GetFlag(FLAGS_processes) == 1) {
    plimsoll::server::agent::OneProcess(streams, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_interval));
  } else {
    plimsoll::server::agent::TwoProcesses(streams, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_interval));
  }
  return 0;
}
