// The daemon's control loop at scale, against libvirt's test driver:
//
//   bazel run -c opt //bench:control_loop_benchmark 2>/tmp/control_loop_benchmark.log
//
// Each run writes a test-driver host of N running guests (bench/test_node.h) and a /proc for a
// host sized to them (MemTotal = 70% of the guests' <memory> + the 1 GiB reserve), builds the
// daemon as plimsolld does (Daemon::Create with the defaults of an empty config: agent store
// on, overrides, watch hub, metrics; the listeners are not started) and times
// ControlLoop::Tick(): Collect from libvirt -> Snapshot -> Decide -> Apply -> Publish.
//
// BM_Tick/<policy>/<stats>/N, stats:
//   driver: the test driver's stats as they are. Their timestamp never moves, so every guest
//           is stale: the policies hold (they never shrink on stale stats) and Apply moves
//           nothing. The cheapest steady state.
//   fresh:  the same stats, but each read reports a newer timestamp (as a guest that polls
//           its balloon every period does), so the stats are fresh and the policies act on
//           them; the test driver's synthetic numbers (half the guest unused) make them shrink
//           guests, through the real virDomainSetMemoryFlags.
// The timed ticks follow the first three (adoption, the first fresh stats, one more).
// Counters: the phases of ControlLoop::last_tick_times() (ms per tick), the time spent inside
// libvirt calls (ms per tick), balloon moves per tick, the first tick (adoption) and the
// connection (the test driver parsing the host XML). CPU time is the whole process's.
// Results: docs/benchmarks.md, "Control loop at scale (libvirt test driver)".
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/test_node.h"
#include "benchmark/benchmark.h"
#include "common/log.h"
#include "server/config/config.h"
#include "server/config/config_reload.h"
#include "server/daemon.h"
#include "server/hypervisor/hypervisor.h"
#include "server/hypervisor/libvirt_hypervisor.h"
#include "server/loop/control_loop.h"

namespace plimsoll::bench {
namespace {

constexpr int64_t kGiB = 1LL << 30;

// Forwards to the real LibvirtHypervisor, timing the calls and counting balloon moves.
// With `advance_stats`, every stats read reports a newer last_update than the previous read:
// the one thing the test driver cannot do (its last_update is a constant).
class BenchHypervisor : public hypervisor::Hypervisor {
 public:
  BenchHypervisor(std::string uri, bool advance_stats)
      : real_(std::move(uri)), advance_stats_(advance_stats) {}

  absl::Status Connect() override { return real_.Connect(); }
  bool IsConnected() const override { return real_.IsConnected(); }

  absl::StatusOr<std::vector<hypervisor::DomainInfo>> ListActiveDomains() override {
    const absl::Time start = absl::Now();
    auto out = real_.ListActiveDomains();
    libvirt_time_ += absl::Now() - start;
    return out;
  }

  absl::StatusOr<absl::flat_hash_map<std::string, hypervisor::BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) override {
    const absl::Time start = absl::Now();
    auto out = real_.GetBalloonStats(uuids);
    libvirt_time_ += absl::Now() - start;
    if (out.ok() && advance_stats_) {
      ++reads_;
      for (auto& [uuid, s] : *out) {
        if (s.last_update.has_value()) *s.last_update += reads_;
      }
    }
    return out;
  }

  // What the loop calls each tick: plimsolld's own survey (LibvirtHypervisor's, which reads the
  // test driver domain by domain), not the interface's default.
  absl::StatusOr<hypervisor::DomainSurvey> SurveyDomains(bool with_block_stats) override {
    const absl::Time start = absl::Now();
    auto out = real_.SurveyDomains(with_block_stats);
    libvirt_time_ += absl::Now() - start;
    if (out.ok() && advance_stats_) {
      ++reads_;
      for (auto& [uuid, s] : out->stats) {
        if (s.last_update.has_value()) *s.last_update += reads_;
      }
    }
    return out;
  }

  absl::Status EnableStats(const std::string& uuid, int period_seconds) override {
    const absl::Time start = absl::Now();
    absl::Status s = real_.EnableStats(uuid, period_seconds);
    libvirt_time_ += absl::Now() - start;
    return s;
  }

  absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) override {
    const absl::Time start = absl::Now();
    absl::Status s = real_.SetBalloonTarget(uuid, bytes);
    libvirt_time_ += absl::Now() - start;
    ++moves_;
    return s;
  }

  void SetEventCallback(std::function<void(const hypervisor::DomainEvent&)> callback) override {
    real_.SetEventCallback(std::move(callback));
  }

  // Since the last call: time inside libvirt and balloon moves.
  absl::Duration TakeLibvirtTime() { return std::exchange(libvirt_time_, absl::ZeroDuration()); }
  int64_t TakeMoves() { return std::exchange(moves_, 0); }

 private:
  hypervisor::LibvirtHypervisor real_;
  const bool advance_stats_;
  int64_t reads_ = 0;
  // Loop thread only (the benchmark's thread).
  absl::Duration libvirt_time_;
  int64_t moves_ = 0;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// A fresh directory for one run's host XML, /proc and agent key; removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "plimsoll-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void BM_Tick(benchmark::State& state, const std::string& policy, bool fresh) {
  const int n = static_cast<int>(state.range(0));
  TempDir dir;
  const std::string node = dir.path() + "/node.xml";
  if (absl::Status s = WriteTestNode(node, n); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  const int64_t reserve = 1 * kGiB;
  if (absl::Status s = WriteHostProc(dir.path(), TestFleetMaxBytes(n) / 10 * 7 + reserve); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  // The daemon's own defaults, as plimsolld resolves an empty config and these flags.
  auto flags = server::ConfigFromFlags({{"libvirt_uri", "test://" + node},
                                        {"policy", policy},
                                        {"proc_root", dir.path()},
                                        {"host_reserve_bytes", absl::StrCat(reserve)},
                                        {"agent_host_key_file", dir.path() + "/agent.key"}});
  if (!flags.ok()) {
    state.SkipWithError(std::string(flags.status().message()).c_str());
    return;
  }
  auto config = server::LoadEffectiveConfig("", *flags);
  if (!config.ok()) {
    state.SkipWithError(std::string(config.status().message()).c_str());
    return;
  }
  auto hv = std::make_unique<BenchHypervisor>(config->options.libvirt_uri, fresh);
  BenchHypervisor* bench_hv = hv.get();
  server::DaemonOverrides overrides;
  overrides.hypervisor = std::move(hv);
  auto daemon = server::Daemon::Create(config->options, std::move(overrides));
  if (!daemon.ok()) {
    state.SkipWithError(std::string(daemon.status().message()).c_str());
    return;
  }
  server::ControlLoop& loop = (*daemon)->loop();

  absl::Time t = absl::Now();
  if (absl::Status s = bench_hv->Connect(); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  const absl::Duration connect = absl::Now() - t;
  t = absl::Now();
  loop.Tick();
  const absl::Duration first_tick = absl::Now() - t;
  if (loop.Published()->guests_size() != n) {
    state.SkipWithError(absl::StrCat("published ", loop.Published()->guests_size(), " guests, not ", n).c_str());
    return;
  }
  loop.Tick();
  loop.Tick();
  bench_hv->TakeLibvirtTime();
  bench_hv->TakeMoves();

  absl::Duration collect, decide, apply, publish, total, libvirt;
  int64_t moves = 0;
  for (auto _ : state) {
    loop.Tick();
    const server::TickTimes& tt = loop.last_tick_times();
    collect += tt.collect;
    decide += tt.decide;
    apply += tt.apply;
    publish += tt.publish;
    total += tt.total;
    libvirt += bench_hv->TakeLibvirtTime();
    moves += bench_hv->TakeMoves();
  }
  using benchmark::Counter;
  state.counters["collect_ms"] = Counter(Ms(collect), Counter::kAvgIterations);
  state.counters["decide_ms"] = Counter(Ms(decide), Counter::kAvgIterations);
  state.counters["apply_ms"] = Counter(Ms(apply), Counter::kAvgIterations);
  state.counters["publish_ms"] = Counter(Ms(publish), Counter::kAvgIterations);
  state.counters["tick_ms"] = Counter(Ms(total), Counter::kAvgIterations);
  state.counters["libvirt_ms"] = Counter(Ms(libvirt), Counter::kAvgIterations);
  state.counters["moves"] = Counter(static_cast<double>(moves), Counter::kAvgIterations);
  state.counters["first_tick_ms"] = Ms(first_tick);
  state.counters["connect_ms"] = Ms(connect);
}

// Ticks are 100-300 ms of CPU at 10,000 guests: a fixed count per size keeps each run to
// seconds and every repetition on the same stretch of the fleet's history.
// PLIMSOLL_BENCH_TICKS=N times N ticks at every size instead (for profiling: bench/tick_profile.py).
int Register() {
  const char* ticks_env = getenv("PLIMSOLL_BENCH_TICKS");
  const int ticks = ticks_env != nullptr ? atoi(ticks_env) : 0;
  for (const char* policy : {"static", "mom", "pagecache"}) {
    for (bool fresh : {false, true}) {
      for (int n : {100, 1000, 10000}) {
        benchmark::RegisterBenchmark(absl::StrCat("BM_Tick/", policy, fresh ? "/fresh" : "/driver").c_str(),
                                     [policy = std::string(policy), fresh](benchmark::State& s) {
                                       BM_Tick(s, policy, fresh);
                                     })
            ->Arg(n)
            ->Iterations(ticks > 0 ? ticks : n <= 100 ? 200 : n <= 1000 ? 50 : 10)
            ->Unit(benchmark::kMillisecond)
            ->MeasureProcessCPUTime()
            ->UseRealTime();
      }
    }
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace
}  // namespace plimsoll::bench
