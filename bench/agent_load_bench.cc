// Load benchmark of the daemon's agent ingestion (run it; it is not a test):
//   bazel run -c opt //bench:agent_load_bench -- --streams=64 --seconds=10
// 1. In-process: AgentStore::Ingest on pre-signed frames (parse, proof, checks, store), without
//    gRPC, each guest's frames with a StreamBinding of its own as AgentService passes them.
// 2. Loopback gRPC: --streams simulated agents, each on its own connection like a real agent,
//    against a real ingest's TCP listener. --interval=0 is closed loop (send, wait for the ack, repeat:
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
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/cpu_time.h"
#include "bench/pipe_lines.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "protocol/report_proof.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/agent_store.h"
#include "server/agent/report_validator.h"
#include "server/agent/testing/test_reports.h"

ABSL_FLAG(int, streams, 64, "concurrent simulated agents");
ABSL_FLAG(int, seconds, 10, "duration of the gRPC phase");
ABSL_FLAG(absl::Duration, interval, absl::ZeroDuration(), "per-agent report interval; 0 = closed loop");
ABSL_FLAG(int, ingest_iterations, 200000, "reports for the in-process phase");
ABSL_FLAG(int, generator_threads, 1, "threads driving the simulated agents (completion queues)");
ABSL_FLAG(int, processes, 2, "2: the daemon side in a child process of its own; 1: both in one process");

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

std::string GuestUuid(int i) { return absl::StrFormat("%08x-0000-4000-8000-%012x", i, i); }

// MakeReport with every field a real agent fills (all meminfo and vmstat fields, avg300, the
// agent's own info), so the bytes parsed and proved are as many as a real report's.
v1::AgentReport BenchReport(const std::string& uuid, double seconds, uint64_t sequence) {
  v1::AgentReport r = MakeReport(uuid, kBootA, seconds, sequence);
  v1::GuestMeminfo* m = r.mutable_meminfo();
  m->set_buffers_bytes(20 * kMiB);
  m->set_shmem_bytes(3 * kMiB);
  m->set_sreclaimable_bytes(40 * kMiB);
  m->set_sunreclaim_bytes(25 * kMiB);
  v1::GuestVmstat* v = r.mutable_vmstat();
  const uint64_t t = static_cast<uint64_t>(seconds);
  v->set_pgscan_kswapd(1500 + 250 * t);
  v->set_pgscan_direct(500 + 50 * t);
  v->set_pgsteal_kswapd(1200 + 180 * t);
  v->set_pgsteal_direct(300 + 20 * t);
  v->set_allocstall(3 + t / 10);
  v->set_pswpin(0);
  v->set_pswpout(0);
  r.mutable_memory_pressure()->mutable_some()->set_avg300(0.8);
  r.mutable_memory_pressure()->mutable_full()->set_avg60(0.2);
  r.mutable_memory_pressure()->mutable_full()->set_avg300(0.1);
  v1::AgentInfo* a = r.mutable_agent();
  a->set_version("0.1.0-bench");
  a->set_interval_ms(5000);
  a->set_psi_trigger("some 150000 1000000");
  a->set_connections(1);
  return r;
}

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

using ::plimsoll::bench::CpuTime;

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
    frames.push_back(SignAsSelf(BenchReport(GuestUuid(g), 10 + 0.001 * (i / guests + 1), i + 1)));
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
      "in-process Ingest: %d reports of %zu bytes (%d guests) in %s: %.2f us/report wall, %.2f us/report cpu, "
      "%.0f reports/s, accepted=%d\n",
      iterations, frames.empty() ? size_t{0} : frames.back().report().size(), guests, absl::FormatDuration(took).c_str(), absl::ToDoubleMicroseconds(took) / iterations,
      cpu * 1e6 / iterations, iterations / absl::ToDoubleSeconds(took), accepted);
}

// The daemon side: validator, store and the ingest's TCP listener, as plimsolld wires them.
struct Daemon {
  explicit Daemon(int streams) : validator(TestHostKey(), Unlimited()), store(&validator, RealClock::Get()) {
    store.SetKnownGuests(KnownGuests(streams));
    AgentIngestOptions o;
    o.tcp_listen = "127.0.0.1:0";
    o.streams.max_streams = streams + 16;
    o.streams.frames_per_second = 1e9;
    o.streams.frame_burst = 1e9;
    ingest = std::make_unique<AgentIngest>(o, &store, RealClock::Get());
  }
  absl::Status Start() { return ingest->Start(/*hypervisor=*/nullptr); }
  ReportValidator validator;
  AgentStore store;
  std::unique_ptr<AgentIngest> ingest;
};

struct LoadResult {
  uint64_t total = 0, rejected = 0, broken = 0;
  std::vector<double> latencies_us;
  absl::Duration took;
  CpuTime cpu;  // this process over the measured window
};

// One simulated agent: its own connection and stream, its own token (prepared once, as the real
// agent holds its token), and a report rebuilt, re-serialized and re-proved for every send, so
// every report is distinct (sequence, boottime, counters) and fully checked by the daemon. All
// of its events run on the one completion-queue thread it belongs to, so it needs no lock.
class SimAgent {
 public:
  enum class Op { kStart, kRead, kWrite, kAlarm, kWritesDone, kFinish };
  struct Tag {
    SimAgent* agent;
    Op op;
  };

  SimAgent(int index, const std::string& address, grpc::CompletionQueue* cq, absl::Duration interval,
           const std::atomic<bool>* stop)
      : index_(index),
        uuid_(GuestUuid(index)),
        prover_(TokenFor(uuid_)),
        cq_(cq),
        interval_(interval),
        stop_(stop) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per agent
    channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    stub_ = v1::AgentChannel::NewStub(channel_);
    stream_ = stub_->PrepareAsyncReport(&context_, cq_);
    stream_->StartCall(&tags_[static_cast<int>(Op::kStart)]);
  }

  // From the main thread once every agent has its hello: the first report goes out now (closed
  // loop) or at a spread offset within the first interval (open loop).
  void Go() {
    const absl::Duration offset =
        interval_ > absl::ZeroDuration() ? absl::Milliseconds(index_ % 1000) * (interval_ / absl::Seconds(1)) : absl::ZeroDuration();
    next_due_ = absl::Now() + offset;
    alarm_.Set(cq_, absl::ToChronoTime(next_due_), &tags_[static_cast<int>(Op::kAlarm)]);
  }

  // Ends the stream if it is still open and drops a pending alarm (main thread; both are
  // thread-safe in gRPC). The agent then finishes on its own events.
  void Cancel() {
    context_.TryCancel();
    alarm_.Cancel();
  }

  void Handle(Op op, bool ok) {
    switch (op) {
      case Op::kStart:
        if (!ok) {
          Broken();
          finish_wanted_ = true;
          return MaybeFinish();
        }
        StartRead();
        return;
      case Op::kRead:
        reading_ = false;
        if (!ok) {  // the daemon ended the stream (after our WritesDone, or it broke)
          if (!closing_) Broken();
          finish_wanted_ = true;
          return MaybeFinish();
        }
        OnReply();
        if (!finish_wanted_) StartRead();
        return;
      case Op::kWrite:
        writing_ = false;
        if (!ok) {
          Broken();
          finish_wanted_ = true;
          return MaybeFinish();
        }
        if (stop_->load(std::memory_order_relaxed)) return Close();
        if (send_after_write_) {
          send_after_write_ = false;
          Send();
        }
        return MaybeFinish();
      case Op::kAlarm:
        if (finish_wanted_ || closing_) return;
        if (stop_->load(std::memory_order_relaxed)) return Close();
        if (interval_ > absl::ZeroDuration()) {
          next_due_ += interval_;
          alarm_.Set(cq_, absl::ToChronoTime(next_due_), &tags_[static_cast<int>(Op::kAlarm)]);
        }
        Send();
        return;
      case Op::kWritesDone:
        writing_ = false;
        return MaybeFinish();
      case Op::kFinish:
        if (broken_ && status_.error_code() != grpc::StatusCode::OK) {
          broken_detail_ = absl::StrCat(static_cast<int>(status_.error_code()), " ", status_.error_message());
        }
        finished_.store(true, std::memory_order_release);
        return;
    }
  }

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Finish has completed: the agent starts no more operations.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  bool broken() const { return broken_; }
  const std::string& broken_detail() const { return broken_detail_; }
  std::vector<double>& latencies_us() { return latencies_us_; }
  uint64_t rejected() const { return rejected_; }

 private:
  void StartRead() {
    reading_ = true;
    stream_->Read(&reply_, &tags_[static_cast<int>(Op::kRead)]);
  }

  void OnReply() {
    if (reply_.has_hello()) {
      nonce_ = reply_.hello().nonce();
      ready_.store(true, std::memory_order_release);
      return;
    }
    if (!reply_.has_ack()) return;
    const absl::Time now = absl::Now();
    // Acks come in order; match by sequence all the same, so an open-loop agent may have more
    // than one report in flight (the real agent does not wait for acks either).
    while (!in_flight_.empty() && in_flight_.front().first < reply_.ack().sequence()) in_flight_.pop_front();
    if (!in_flight_.empty() && in_flight_.front().first == reply_.ack().sequence()) {
      latencies_us_.push_back(absl::ToDoubleMicroseconds(now - in_flight_.front().second));
      in_flight_.pop_front();
    }
    if (!reply_.ack().accepted()) ++rejected_;
    if (stop_->load(std::memory_order_relaxed)) return Close();
    if (interval_ == absl::ZeroDuration()) Send();  // closed loop: the next report at once
  }

  void Send() {
    if (closing_ || finish_wanted_) return;
    if (writing_) {  // the previous write's completion has not come back yet
      send_after_write_ = true;
      return;
    }
    t_ += 0.001;
    v1::AgentReport report = BenchReport(uuid_, t_, ++sequence_);
    report.set_stream_nonce(nonce_);
    report.SerializeToString(frame_.mutable_report());
    frame_.set_proof(prover_.Prove(frame_.report()));
    in_flight_.emplace_back(sequence_, absl::Now());
    writing_ = true;
    stream_->Write(frame_, &tags_[static_cast<int>(Op::kWrite)]);
  }

  void Close() {
    if (closing_ || finish_wanted_) return MaybeFinish();
    if (writing_) return;  // kWrite comes back here
    closing_ = true;
    writing_ = true;
    stream_->WritesDone(&tags_[static_cast<int>(Op::kWritesDone)]);
  }

  void Broken() {
    if (!stop_->load(std::memory_order_relaxed)) broken_ = true;
  }

  void MaybeFinish() {
    if (!finish_wanted_ || finish_called_ || writing_ || reading_) return;
    finish_called_ = true;
    stream_->Finish(&status_, &tags_[static_cast<int>(Op::kFinish)]);
  }

  const int index_;
  const std::string uuid_;
  plimsoll::protocol::ReportProver prover_;
  grpc::CompletionQueue* const cq_;
  const absl::Duration interval_;
  const std::atomic<bool>* const stop_;
  Tag tags_[6] = {{this, Op::kStart},      {this, Op::kRead},       {this, Op::kWrite},
                  {this, Op::kAlarm},      {this, Op::kWritesDone}, {this, Op::kFinish}};
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentChannel::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::SignedAgentReport, v1::AgentReply>> stream_;
  grpc::Alarm alarm_;
  v1::SignedAgentReport frame_;
  v1::AgentReply reply_;
  grpc::Status status_;
  std::string nonce_;
  std::atomic<bool> ready_{false};
  bool reading_ = false, writing_ = false, send_after_write_ = false, closing_ = false;
  bool finish_wanted_ = false, finish_called_ = false, broken_ = false;
  std::atomic<bool> finished_{false};
  std::string broken_detail_;
  double t_ = 10;
  uint64_t sequence_ = 0;
  absl::Time next_due_;
  std::deque<std::pair<uint64_t, absl::Time>> in_flight_;  // (sequence, sent)
  std::vector<double> latencies_us_;
  uint64_t rejected_ = 0;
};

// The simulated agents, on `threads` completion-queue threads (a real host's agents are separate
// processes in separate guests; here they share as little CPU as possible with the daemon). `go`
// is called when every stream has its hello and measuring starts, `stop` when it ends (both on
// this thread).
LoadResult Generate(const std::string& address, int streams, int seconds, absl::Duration interval, int threads,
                    const std::function<void()>& go_hook, const std::function<void()>& stop_hook) {
  std::atomic<bool> stop{false};
  threads = std::max(1, std::min(threads, streams));
  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs;
  for (int i = 0; i < threads; ++i) cqs.push_back(std::make_unique<grpc::CompletionQueue>());
  std::vector<std::unique_ptr<SimAgent>> agents;
  for (int s = 0; s < streams; ++s) {
    agents.push_back(std::make_unique<SimAgent>(s, address, cqs[s % threads].get(), interval, &stop));
  }
  std::vector<std::thread> pollers;
  for (int i = 0; i < threads; ++i) {
    pollers.emplace_back([cq = cqs[i].get()] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
        auto* t = static_cast<SimAgent::Tag*>(tag);
        t->agent->Handle(t->op, ok);
      }
    });
  }
  // Every stream connected and greeted before measuring starts.
  const absl::Time connect_deadline = absl::Now() + absl::Seconds(10) + absl::Milliseconds(10 * streams);
  while (absl::Now() < connect_deadline &&
         !std::all_of(agents.begin(), agents.end(), [](const auto& a) { return a->ready(); })) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  LoadResult out;
  const absl::Time start = absl::Now();
  const CpuTime cpu_start = CpuTime::Now();
  go_hook();
  for (auto& a : agents) {
    if (a->ready()) a->Go();
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  out.cpu = CpuTime::Now() - cpu_start;
  out.took = absl::Now() - start;
  stop_hook();
  // Agents close their streams on their next event; an open-loop agent's next event may be up
  // to one interval away, and a stream that never got its hello never has one: cancel those.
  // A completion queue may only shut down once no agent will start another operation on it.
  auto all_finished = [&] { return std::all_of(agents.begin(), agents.end(), [](const auto& a) { return a->finished(); }); };
  const auto wait_for_all = [&](absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    while (!all_finished() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  };
  wait_for_all(std::min(interval, absl::Seconds(2)) + absl::Milliseconds(500));
  for (auto& a : agents) a->Cancel();
  wait_for_all(absl::Seconds(30));
  if (!all_finished()) {
    std::fprintf(stderr, "simulated agents did not finish; exiting without cleanup\n");
    std::fflush(stdout);
    _exit(2);
  }
  for (auto& cq : cqs) cq->Shutdown();
  for (auto& t : pollers) t.join();
  for (auto& a : agents) {
    if (a->broken()) {
      if (out.broken == 0) {
        std::fprintf(stderr, "a stream broke after %zu reports: %s\n", a->latencies_us().size(),
                     a->broken_detail().c_str());
      }
      ++out.broken;
    }
    out.total += a->latencies_us().size();
    out.rejected += a->rejected();
    out.latencies_us.insert(out.latencies_us.end(), a->latencies_us().begin(), a->latencies_us().end());
  }
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

void OneProcess(int streams, int seconds, absl::Duration interval, int threads) {
  Daemon daemon(streams);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return;
  }
  LoadResult r = Generate(daemon.ingest->tcp_address(), streams, seconds, interval, threads, [] {}, [] {});
  daemon.ingest->Shutdown();
  PrintResult(streams, interval, r, daemon.store.counters().accepted,
              "one process (daemon and generator together; the generator figure below is both)");
}

using ::plimsoll::bench::ReadLine;
using ::plimsoll::bench::WriteAll;

// The child: serves until the parent says stop, measuring its CPU between "go" and "stop".
[[noreturn]] void DaemonChild(int streams, int control_fd, int report_fd) {
  Daemon daemon(streams);
  if (absl::Status s = daemon.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    _exit(1);
  }
  WriteAll(report_fd, absl::StrCat(daemon.ingest->tcp_address(), "\n"));
  char c = 0;
  if (read(control_fd, &c, 1) != 1) _exit(1);  // go
  const CpuTime start = CpuTime::Now();
  const uint64_t accepted_start = daemon.store.counters().accepted;
  if (read(control_fd, &c, 1) != 1) _exit(1);  // stop
  const CpuTime cpu = CpuTime::Now() - start;
  const uint64_t accepted = daemon.store.counters().accepted - accepted_start;
  WriteAll(report_fd, absl::StrFormat("%.6f %.6f %llu\n", cpu.user, cpu.sys, static_cast<unsigned long long>(accepted)));
  daemon.ingest->Shutdown();
  _exit(0);
}

void TwoProcesses(int streams, int seconds, absl::Duration interval, int threads) {
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
      address, streams, seconds, interval, threads, [&] { WriteAll(control[1], "g"); },
      [&] { WriteAll(control[1], "s"); });
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
  const int threads = absl::GetFlag(FLAGS_generator_threads);
  if (absl::GetFlag(FLAGS_processes) == 1) {
    plimsoll::server::agent::OneProcess(streams, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_interval), threads);
  } else {
    plimsoll::server::agent::TwoProcesses(streams, absl::GetFlag(FLAGS_seconds), absl::GetFlag(FLAGS_interval),
                                          threads);
  }
  return 0;
}
