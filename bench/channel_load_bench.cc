// Load benchmark of the daemon's virtio-serial agent channels (run it, it is not a test):
//   bazel run -c opt //bench:channel_load_bench -- --channels=N --seconds=10 [--interval=1s]
//
// The daemon side is plimsolld's own channel code: the ingest with its virtio-serial connector,
// a real AgentStore,
// the real clock, and a FakeHypervisor listing N running domains whose channel XML names a unix
// socket. Each socket is a FakeQemuSocket (where QEMU would listen for the host end); what
// the connector connects to it is the guest end of that domain's channel, and a FakeGuest on it
// speaks the Agent service as the agent does over its port: a gRPC client over the connection,
// one Report stream, the reports of agent.proto without a proof (the channel is the identity).
// Every byte therefore goes the daemon's way: channel socket -> ChannelPump -> socketpair ->
// the ingest's gRPC server -> AgentService -> AgentStore::Ingest, and the ack back.
//
// Each fake guest is a synchronous gRPC client on a thread of its own (FakeGuest, as the
// channel tests use it). Once every channel is connected and its stream has had a first report
// acked (the time this takes is printed), the measured window of --seconds starts:
// --interval=0 is closed loop (each guest sends, waits for the ack, repeats: the ceiling);
// --interval=1s is open loop (each guest reports once a second, phases spread evenly).
// Latency is per report, from the guest's Write() to its ack.
//
// Budgets: a guest is allowed 2 reports/s (ReportValidator's token bucket, burst 10), 10 frames/s
// per stream (AgentService) and 64 KiB/s of bytes (ChannelPump). A closed loop goes far above
// all three, and its reports would be refused (rate_limited, flood) or not read (throttled).
// --budgets=lifted raises them out of the way, as agent_load_bench does, so the closed loop
// measures transport and ingestion; --budgets=default keeps plimsolld's defaults. The default,
// auto, lifts them for the closed loop and keeps them for the open loop (1 report/s is inside
// them). Any rejection printed means the benchmark or the daemon is wrong.
//
// --processes=2 (the default) runs the daemon side in a child process of its own, as plimsolld
// is, so each side's CPU over the window is counted apart (getrusage); the child prints its pid
// for `perf record -p`. --processes=1 runs both in one process. Either way both sides share the
// machine's cores, so the rates are a lower bound for the daemon alone.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "bench/cpu_time.h"
#include "bench/pipe_lines.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/agent_store.h"
#include "server/agent/report_validator.h"
#include "server/agent/testing/fake_guest.h"
#include "server/agent/testing/fake_qemu_socket.h"
#include "server/agent/testing/test_reports.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

ABSL_FLAG(int, channels, 64, "domains, each with its own channel and fake guest end");
ABSL_FLAG(int, seconds, 10, "measured window, after every channel is connected");
ABSL_FLAG(absl::Duration, interval, absl::ZeroDuration(), "per-guest report interval; 0 = closed loop");
ABSL_FLAG(std::string, budgets, "auto",
          "per-guest budgets: lifted, default (plimsolld's), or auto (lifted for the closed loop only)");
ABSL_FLAG(int, processes, 2, "2: the daemon side in a child process of its own; 1: both in one process");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(60), "give up waiting for the channels after this");
ABSL_FLAG(std::string, socket_dir, "", "where the fake QEMU sockets go (default /tmp/plimsoll-chbench-PID)");

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

std::string GuestUuid(int i) { return absl::StrFormat("%08x-0000-4000-8000-%012x", i, i); }

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

using ::plimsoll::bench::CpuTime;

// Each channel holds, in the daemon, its socket to QEMU and a socketpair, and in the guest end
// the accepted socket and QEMU's listening one; plus gRPC's and the process's own.
void RaiseFileLimit(int channels) {
  const rlim_t needed = static_cast<rlim_t>(channels) * 6 + 512;
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= needed) return;
  const rlim_t want = std::min(needed, r.rlim_max);
  r.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0 || want < needed) {
    std::fprintf(stderr, "RLIMIT_NOFILE: %llu descriptors, %llu wanted for %d channels: raise the hard limit\n",
                 static_cast<unsigned long long>(want), static_cast<unsigned long long>(needed), channels);
  }
}

// What the daemon side counted: absolute values at one moment; Minus gives a window's.
struct DaemonFigures {
  double cpu_user = 0, cpu_sys = 0;
  uint64_t accepted = 0;
  std::array<uint64_t, kNumRejectReasons> rejected{};
  uint64_t streams_opened = 0, streams_refused = 0, streams_timed_out = 0, streams_superseded = 0,
           streams_denied = 0, streams_flooded = 0;
  uint64_t connected = 0, connects = 0, connect_failures = 0, ended_guest = 0, ended_daemon = 0, ended_error = 0,
           ended_gone = 0;
  uint64_t bytes_from_guests = 0, bytes_to_guests = 0, throttled = 0;

  std::vector<uint64_t*> Integers() {
    std::vector<uint64_t*> v = {&accepted,         &streams_opened,  &streams_refused,  &streams_timed_out,
                                &streams_superseded, &streams_denied, &streams_flooded,  &connected,
                                &connects,         &connect_failures, &ended_guest,     &ended_daemon,
                                &ended_error,      &ended_gone,      &bytes_from_guests, &bytes_to_guests,
                                &throttled};
    for (uint64_t& r : rejected) v.push_back(&r);
    return v;
  }
  std::string ToLine() {
    std::string line = absl::StrFormat("%.6f %.6f", cpu_user, cpu_sys);
    for (uint64_t* i : Integers()) absl::StrAppend(&line, " ", *i);
    return line;
  }
  static std::optional<DaemonFigures> FromLine(const std::string& line) {
    DaemonFigures f;
    std::istringstream in(line);
    in >> f.cpu_user >> f.cpu_sys;
    for (uint64_t* i : f.Integers()) in >> *i;
    if (!in) return std::nullopt;
    return f;
  }
  // The window from `start` to this; `connected` stays the count at the end.
  DaemonFigures Minus(DaemonFigures start) {
    DaemonFigures d = *this;
    d.cpu_user -= start.cpu_user;
    d.cpu_sys -= start.cpu_sys;
    std::vector<uint64_t*> mine = d.Integers();
    std::vector<uint64_t*> theirs = start.Integers();
    for (size_t i = 0; i < mine.size(); ++i) {
      if (mine[i] != &d.connected) *mine[i] -= *theirs[i];
    }
    return d;
  }
};

// plimsolld's channel side: the FakeHypervisor's N domains, each with its channel socket at
// dir/NNNN.sock, the validator, the store, and the ingest as the daemon starts it.
class Daemon {
 public:
  Daemon(int channels, const std::string& dir, bool lifted)
      : validator_(TestHostKey(), ValidatorOptionsFor(lifted)), store_(&validator_, RealClock::Get()) {
    absl::flat_hash_map<std::string, GuestLimits> known;
    for (int i = 0; i < channels; ++i) {
      const std::string uuid = GuestUuid(i);
      hv_.AddDomain(uuid, absl::StrFormat("guest-%04d", i), kGiB, kGiB);
      hypervisor::AgentChannelInfo info;
      info.found = true;
      info.socket_path = absl::StrFormat("%s/%04d.sock", dir, i);
      info.has_virtio_serial_controller = true;
      hv_.SetAgentChannel(uuid, kDefaultChannelName, info);
      known[uuid] = GuestLimits{kGiB};
    }
    store_.SetKnownGuests(std::move(known));
    options_.virtio_serial.emplace();
    options_.streams.max_streams = std::max(options_.streams.max_streams, channels + 16);
    if (lifted) {
      options_.streams.frames_per_second = 1e9;
      options_.streams.frame_burst = 1e9;
      options_.virtio_serial->link.guest_bytes_per_second = 1e12;
      options_.virtio_serial->link.guest_burst_bytes = 1e12;
    }
  }

  static ValidatorOptions ValidatorOptionsFor(bool lifted) {
    ValidatorOptions o;
    if (lifted) {
      o.reports_per_second = 1e9;
      o.burst = 1e9;
    }
    return o;
  }

  absl::Status Start() {
    if (absl::Status s = hv_.Connect(); !s.ok()) return s;
    ingest_ = std::make_unique<AgentIngest>(options_, &store_, RealClock::Get());
    return ingest_->Start(&hv_);
  }

  DaemonFigures Snapshot() const {
    DaemonFigures f;
    const CpuTime cpu = CpuTime::Now();
    f.cpu_user = cpu.user;
    f.cpu_sys = cpu.sys;
    const AgentCounters s = store_.counters();
    f.accepted = s.accepted;
    f.rejected = s.rejected;
    const AgentIngestCounters ic = ingest_->counters();
    const AgentServiceCounters& sc = ic.streams;
    f.streams_opened = sc.streams_opened;
    f.streams_refused = sc.streams_refused;
    f.streams_timed_out = sc.streams_timed_out;
    f.streams_superseded = sc.streams_superseded;
    f.streams_denied = sc.streams_denied;
    f.streams_flooded = sc.streams_flooded;
    const VirtioSerialCounters& cc = ic.virtio_serial;
    f.connected = static_cast<uint64_t>(cc.connected);
    f.connects = cc.connects;
    f.connect_failures = cc.connect_failures;
    f.ended_guest = cc.ended_guest;
    f.ended_daemon = cc.ended_daemon;
    f.ended_error = cc.ended_error;
    f.ended_gone = cc.ended_gone;
    f.bytes_from_guests = cc.pump.bytes_from_guests;
    f.bytes_to_guests = cc.pump.bytes_to_guests;
    f.throttled = cc.pump.throttled;
    return f;
  }

  void Shutdown() {
    if (ingest_ != nullptr) ingest_->Shutdown();
  }

 private:
  hypervisor::FakeHypervisor hv_;
  ReportValidator validator_;
  AgentStore store_;
  AgentIngestOptions options_;
  std::unique_ptr<AgentIngest> ingest_;
};

// The daemon side as the guest side drives it: in this process, or in a child over two pipes.
class DaemonHandle {
 public:
  virtual ~DaemonHandle() = default;
  virtual DaemonFigures Snapshot() = 0;
  virtual void Stop() = 0;
};

class LocalDaemon : public DaemonHandle {
 public:
  explicit LocalDaemon(std::unique_ptr<Daemon> d) : d_(std::move(d)) {}
  DaemonFigures Snapshot() override { return d_->Snapshot(); }
  void Stop() override { d_->Shutdown(); }

 private:
  std::unique_ptr<Daemon> d_;
};

using ::plimsoll::bench::ReadLine;
using ::plimsoll::bench::WriteAll;

// The child: starts the daemon side, then answers "n" (a snapshot) until "q".
[[noreturn]] void DaemonChild(std::unique_ptr<Daemon> daemon, int control_fd, int report_fd) {
  if (absl::Status s = daemon->Start(); !s.ok()) {
    WriteAll(report_fd, absl::StrCat("error ", s.ToString(), "\n"));
    _exit(1);
  }
  WriteAll(report_fd, absl::StrCat("started ", getpid(), "\n"));
  char c = 0;
  while (read(control_fd, &c, 1) == 1 && c == 'n') WriteAll(report_fd, daemon->Snapshot().ToLine() + "\n");
  daemon->Shutdown();
  _exit(0);
}

class ChildDaemon : public DaemonHandle {
 public:
  ChildDaemon(pid_t pid, int control_fd, int report_fd) : pid_(pid), control_fd_(control_fd), report_fd_(report_fd) {}
  ~ChildDaemon() override { Stop(); }
  DaemonFigures Snapshot() override {
    WriteAll(control_fd_, "n");
    const std::string line = ReadLine(report_fd_);
    std::optional<DaemonFigures> f = DaemonFigures::FromLine(line);
    if (!f.has_value()) {
      std::fprintf(stderr, "no figures from the daemon child: \"%s\"\n", line.c_str());
      return DaemonFigures();
    }
    return *f;
  }
  void Stop() override {
    if (pid_ <= 0) return;
    WriteAll(control_fd_, "q");
    close(control_fd_);
    waitpid(pid_, nullptr, 0);
    close(report_fd_);
    pid_ = -1;
  }

 private:
  pid_t pid_;
  int control_fd_, report_fd_;
};

// What one fake guest saw over the window.
struct GuestResult {
  bool opened = false;
  bool broken = false;  // the stream ended during the window
  std::string broken_detail;
  uint64_t acked = 0;
  std::map<std::string, uint64_t> rejected;  // by the ack's reason
  std::vector<double> latencies_us;
};

// The window's shared state, set by the main thread.
struct Window {
  absl::Notification go;
  absl::Time start;
  absl::Notification stop;
  std::atomic<bool> stopped{false};
  std::atomic<int> ready{0};
};

// One domain's guest end: opens the stream on the accepted connection, has a first report acked
// (as an agent does when it connects), then reports through the window.
void RunGuest(int index, int channels, int fd, absl::Duration interval, Window* w, GuestResult* out) {
  FakeGuest guest;
  const std::string uuid = GuestUuid(index);
  if (!guest.Open(fd, uuid)) {
    out->broken_detail = "no hello";
    return;
  }
  std::optional<v1::AgentReportAck> first = guest.Report();
  if (!first.has_value() || !first->accepted()) {
    out->broken_detail = first.has_value() ? absl::StrCat("first report rejected: ", first->reject_reason())
                                           : std::string("the stream ended at the first report");
    return;
  }
  out->opened = true;
  w->ready.fetch_add(1);
  w->go.WaitForNotification();
  absl::Time next = w->start + interval * (static_cast<double>(index) / channels);
  while (!w->stopped.load(std::memory_order_relaxed)) {
    if (interval > absl::ZeroDuration()) {
      if (w->stop.WaitForNotificationWithTimeout(next - absl::Now())) break;
      next += interval;
    }
    // FakeGuest::Report, with the clock read around the Write and the Read only.
    const v1::SignedAgentReport frame = guest.Frame(uuid);
    const absl::Time sent = absl::Now();
    v1::AgentReply reply;
    const bool ok = guest.stream->Write(frame) && guest.stream->Read(&reply) && reply.has_ack();
    const absl::Time acked = absl::Now();
    const std::optional<v1::AgentReportAck> ack = ok ? std::optional<v1::AgentReportAck>(reply.ack()) : std::nullopt;
    if (!ack.has_value()) {
      if (!w->stopped.load()) {
        out->broken = true;
        const grpc::Status s = guest.End();
        out->broken_detail = absl::StrCat(static_cast<int>(s.error_code()), " ", s.error_message());
      }
      return;
    }
    if (w->stopped.load(std::memory_order_relaxed)) break;  // acked after the window: not counted
    out->latencies_us.push_back(absl::ToDoubleMicroseconds(acked - sent));
    ++out->acked;
    if (!ack->accepted()) ++out->rejected[ack->reject_reason()];
  }
}

int Run(int channels, int seconds, absl::Duration interval, bool lifted, int processes, absl::Duration connect_timeout,
        std::string dir) {
  if (dir.empty()) dir = absl::StrCat("/tmp/plimsoll-chbench-", getpid());
  mkdir(dir.c_str(), 0700);
  RaiseFileLimit(channels);
  const std::string mode = interval > absl::ZeroDuration() ? absl::StrCat("open/", absl::FormatDuration(interval))
                                                            : std::string("closed");
  std::printf("channel_load_bench: channels=%d mode=%s window=%ds processes=%d load_average=%s\n", channels,
              mode.c_str(), seconds, processes, LoadAverage().c_str());
  std::printf("budgets=%s\n", lifted ? "lifted (validator 1e9 reports/s, service 1e9 frames/s, pump 1e12 bytes/s: "
                                       "the window measures transport and ingestion, not the per-guest budgets)"
                                     : "plimsolld's defaults (validator 2 reports/s burst 10, service 10 frames/s "
                                       "burst 20, pump 64 KiB/s burst 256 KiB)");
  std::printf("guest ends and daemon share this machine's %u cores%s: the rates are a lower bound for the daemon "
              "alone\n",
              std::thread::hardware_concurrency(), processes == 1 ? " and one process" : "");
  std::fflush(stdout);

  // QEMU's listening sockets exist before the daemon's first scan, as they do for running domains.
  std::vector<std::unique_ptr<FakeQemuSocket>> qemu;
  for (int i = 0; i < channels; ++i) {
    qemu.push_back(std::make_unique<FakeQemuSocket>(absl::StrFormat("%s/%04d.sock", dir, i)));
    if (!qemu.back()->ok()) return 1;
  }

  auto daemon = std::make_unique<Daemon>(channels, dir, lifted);
  std::unique_ptr<DaemonHandle> handle;
  absl::Time started;
  if (processes == 1) {
    if (absl::Status s = daemon->Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    started = absl::Now();
    handle = std::make_unique<LocalDaemon>(std::move(daemon));
  } else {
    int control[2], report[2];
    if (pipe(control) != 0 || pipe(report) != 0) {
      std::perror("pipe");
      return 1;
    }
    std::fflush(stdout);
    // Before either side touches gRPC: gRPC's threads do not survive a fork.
    const pid_t child = fork();
    if (child < 0) {
      std::perror("fork");
      return 1;
    }
    if (child == 0) {
      close(control[1]);
      close(report[0]);
      for (auto& q : qemu) close(q->fd());  // the guest ends' side, not the daemon's
      DaemonChild(std::move(daemon), control[0], report[1]);
    }
    close(control[0]);
    close(report[1]);
    daemon.reset();  // the parent's copy never started
    const std::string line = ReadLine(report[0]);
    started = absl::Now();
    if (line.rfind("started ", 0) != 0) {
      std::fprintf(stderr, "the daemon child did not start: %s\n", line.c_str());
      waitpid(child, nullptr, 0);
      return 1;
    }
    std::printf("daemon child pid=%s\n", line.substr(8).c_str());
    std::fflush(stdout);
    handle = std::make_unique<ChildDaemon>(child, control[1], report[0]);
  }

  // Accept each channel as the daemon connects it and start its guest end.
  Window w;
  std::vector<GuestResult> results(channels);
  std::vector<std::thread> guests;
  std::vector<bool> accepted(channels, false);
  int n_accepted = 0;
  absl::Duration all_accepted_after = absl::InfiniteDuration();
  const absl::Time deadline = started + connect_timeout;
  while (n_accepted < channels && absl::Now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int i = 0; i < channels; ++i) {
      if (accepted[i]) continue;
      fds.push_back(pollfd{qemu[i]->fd(), POLLIN, 0});
      which.push_back(i);
    }
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if ((fds[k].revents & POLLIN) == 0) continue;
      const int i = which[k];
      const int fd = qemu[i]->Accept(absl::ZeroDuration());
      if (fd < 0) continue;
      accepted[i] = true;
      ++n_accepted;
      guests.emplace_back(RunGuest, i, channels, fd, interval, &w, &results[i]);
    }
  }
  if (n_accepted == channels) all_accepted_after = absl::Now() - started;
  while (w.ready.load() < n_accepted && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  const absl::Duration ready_after = absl::Now() - started;
  const int ready = w.ready.load();
  std::printf("connect: %d/%d channels connected by the daemon in %s; %d/%d streams open with a first report "
              "acked in %s (from AgentIngest::Start returning)\n",
              n_accepted, channels,
              all_accepted_after == absl::InfiniteDuration() ? "-" : absl::FormatDuration(all_accepted_after).c_str(),
              ready, channels, absl::FormatDuration(ready_after).c_str());
  std::fflush(stdout);

  // The window.
  DaemonFigures d0 = handle->Snapshot();
  std::printf("before the window: connects=%llu connect_failures=%llu streams_opened=%llu accepted=%llu\n",
              static_cast<unsigned long long>(d0.connects), static_cast<unsigned long long>(d0.connect_failures),
              static_cast<unsigned long long>(d0.streams_opened), static_cast<unsigned long long>(d0.accepted));
  std::fflush(stdout);
  const CpuTime c0 = CpuTime::Now();
  w.start = absl::Now();
  w.go.Notify();
  absl::SleepFor(absl::Seconds(seconds));
  w.stopped.store(true);
  w.stop.Notify();
  const CpuTime guest_cpu = CpuTime::Now() - c0;
  const absl::Duration took = absl::Now() - w.start;
  DaemonFigures d = handle->Snapshot().Minus(d0);
  for (std::thread& t : guests) t.join();
  handle->Stop();
  qemu.clear();
  rmdir(dir.c_str());

  // Figures.
  const double secs = absl::ToDoubleSeconds(took);
  uint64_t acked = 0, broken = 0, never_opened = 0;
  std::map<std::string, uint64_t> client_rejected;
  std::vector<double> lat;
  std::string first_broken;
  for (int i = 0; i < channels; ++i) {
    GuestResult& r = results[i];
    if (!r.opened) ++never_opened;
    if (r.broken) ++broken;
    if ((r.broken || (!r.opened && accepted[i])) && first_broken.empty()) {
      first_broken = absl::StrCat(GuestUuid(i), ": ", r.broken_detail);
    }
    acked += r.acked;
    for (const auto& [reason, n] : r.rejected) client_rejected[reason] += n;
    lat.insert(lat.end(), r.latencies_us.begin(), r.latencies_us.end());
  }
  std::vector<std::string> daemon_rejected;
  uint64_t rejected_total = 0;
  for (RejectReason reason : AllRejectReasons()) {
    const uint64_t n = d.rejected[static_cast<int>(reason)];
    rejected_total += n;
    if (n > 0) daemon_rejected.push_back(absl::StrCat(RejectReasonName(reason), "=", n));
  }
  std::vector<std::string> acks_rejected;
  for (const auto& [reason, n] : client_rejected) acks_rejected.push_back(absl::StrCat(reason, "=", n));

  std::printf("window: %s; accepted by the store %llu = %.0f reports/s; acked to the guests %llu = %.0f reports/s\n",
              absl::FormatDuration(took).c_str(), static_cast<unsigned long long>(d.accepted),
              static_cast<double>(d.accepted) / secs, static_cast<unsigned long long>(acked),
              static_cast<double>(acked) / secs);
  std::printf("rejected by the store: %llu (%s); acks saying rejected: %s\n",
              static_cast<unsigned long long>(rejected_total),
              daemon_rejected.empty() ? "none" : absl::StrJoin(daemon_rejected, " ").c_str(),
              acks_rejected.empty() ? "none" : absl::StrJoin(acks_rejected, " ").c_str());
  std::printf("streams over the window: opened=%llu refused=%llu timed_out=%llu superseded=%llu denied=%llu "
              "flooded=%llu; guests whose stream broke=%llu, never opened=%llu%s%s\n",
              static_cast<unsigned long long>(d.streams_opened), static_cast<unsigned long long>(d.streams_refused),
              static_cast<unsigned long long>(d.streams_timed_out),
              static_cast<unsigned long long>(d.streams_superseded), static_cast<unsigned long long>(d.streams_denied),
              static_cast<unsigned long long>(d.streams_flooded), static_cast<unsigned long long>(broken),
              static_cast<unsigned long long>(never_opened), first_broken.empty() ? "" : "; first: ",
              first_broken.c_str());
  std::printf("channels: connected at the end=%llu; over the window connects=%llu connect_failures=%llu "
              "ended guest/daemon/error/gone=%llu/%llu/%llu/%llu; pump throttled=%llu\n",
              static_cast<unsigned long long>(d.connected), static_cast<unsigned long long>(d.connects),
              static_cast<unsigned long long>(d.connect_failures), static_cast<unsigned long long>(d.ended_guest),
              static_cast<unsigned long long>(d.ended_daemon), static_cast<unsigned long long>(d.ended_error),
              static_cast<unsigned long long>(d.ended_gone), static_cast<unsigned long long>(d.throttled));
  const double n = std::max<double>(1, static_cast<double>(d.accepted));
  std::printf("bytes through the pump per accepted report: %.0f from the guest, %.0f to it (HTTP/2 framing included)\n",
              static_cast<double>(d.bytes_from_guests) / n, static_cast<double>(d.bytes_to_guests) / n);
  std::printf("latency_us (guest Write() to its ack): p50=%.0f p90=%.0f p99=%.0f max=%.0f (%zu reports)\n",
              Percentile(lat, 0.5), Percentile(lat, 0.9), Percentile(lat, 0.99),
              lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end()), lat.size());
  if (processes == 1) {
    std::printf("cpu over the window (daemon and guests in one process): user=%.2fs sys=%.2fs = %.1f us/report\n",
                guest_cpu.user, guest_cpu.sys, guest_cpu.total() * 1e6 / n);
  } else {
    std::printf("cpu over the window: daemon user=%.2fs sys=%.2fs = %.1f us/report; guests user=%.2fs sys=%.2fs = "
                "%.1f us/report\n",
                d.cpu_user, d.cpu_sys, (d.cpu_user + d.cpu_sys) * 1e6 / n, guest_cpu.user, guest_cpu.sys,
                guest_cpu.total() * 1e6 / n);
  }
  std::printf("load_average at the end=%s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace plimsoll::server::agent

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Duration interval = absl::GetFlag(FLAGS_interval);
  const std::string budgets = absl::GetFlag(FLAGS_budgets);
  bool lifted = interval == absl::ZeroDuration();
  if (budgets == "lifted") {
    lifted = true;
  } else if (budgets == "default") {
    lifted = false;
  } else if (budgets != "auto") {
    std::fprintf(stderr, "--budgets: lifted, default or auto, not \"%s\"\n", budgets.c_str());
    return 2;
  }
  const int channels = absl::GetFlag(FLAGS_channels);
  if (channels < 1 || channels > 9999) {
    std::fprintf(stderr, "--channels: 1 to 9999\n");
    return 2;
  }
  return plimsoll::server::agent::Run(channels, absl::GetFlag(FLAGS_seconds), interval, lifted,
                                      absl::GetFlag(FLAGS_processes), absl::GetFlag(FLAGS_connect_timeout),
                                      absl::GetFlag(FLAGS_socket_dir));
}
