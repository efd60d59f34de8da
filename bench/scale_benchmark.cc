// The simulator at scale: 10,000 guests on one simulated host.
//
//   bazel run -c opt //bench:scale_benchmark
//
// BM_Decide/<policy>: one Decide() over the 10,000-guest snapshot (with the state a minute of
// running leaves), i.e. the policy's cost per daemon tick. BM_SimulatedTick: one 5 s tick of
// the whole loop: five 1 s steps of every guest model, the snapshot, pagecache's Decide and
// applying its decisions. BM_GuestStep: one 1 s step of every guest model alone.
// Results and the machine they were measured on: docs/benchmarks.md, "Scale".
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "policy/policy.h"
#include "sim/scenario.h"
#include "sim/simulation.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr int kGuests = 10000;

// Four kinds of guests, 1-8 GiB, some without the agent; the budget is 70% of their total.
Scenario MakeFleet(int guests) {
  Scenario s;
  s.name = "fleet";
  s.duration = 3600;
  s.tick = 5;
  double total = 0;
  for (int i = 0; i < guests; ++i) {
    GuestSpec g;
    g.name = absl::StrCat("vm", i);
    g.max = (1 + i % 8) * kGib;
    g.min = 256 * kMib;
    g.agent = i % 5 != 0;
    Phase p;
    switch (i % 4) {
      case 0:  // streaming
        p.anon = 0.2 * g.max;
        p.stream_rate = 20 * kMib;
        break;
      case 1:  // hot reader
        p.anon = 0.25 * g.max;
        p.hot = 0.4 * g.max;
        p.hot_rate = 40 * kMib;
        break;
      case 2:  // idle
        p.anon = 0.15 * g.max;
        break;
      default:  // a bit of everything
        p.anon = 0.3 * g.max;
        p.hot = 0.2 * g.max;
        p.hot_rate = 10 * kMib;
        p.stream_rate = 5 * kMib;
        break;
    }
    g.phases.push_back(p);
    total += g.max;
    s.guests.push_back(g);
  }
  s.host.total = total;
  s.host.reserve = 0;
  s.host.budget = 0.7 * total;
  return s;
}

// A fleet that has been run for a minute under `policy`, with its policy state.
struct Warm {
  Scenario scenario;
  std::unique_ptr<Simulation> sim;
  std::unique_ptr<policy::Policy> policy;
  policy::PolicyState state;
};

std::unique_ptr<Warm> WarmUp(const std::string& policy_name) {
  auto w = std::make_unique<Warm>();
  w->scenario = MakeFleet(kGuests);
  w->sim = std::make_unique<Simulation>(w->scenario);
  w->policy = *policy::MakePolicy(policy_name);
  for (int step = 1; step <= 60; ++step) {
    w->sim->Step(1);
    if (step % 5 == 0) {
      policy::Decisions d = w->policy->Decide(w->sim->MakeSnapshot(), std::move(w->state));
      w->sim->Apply(d);
      w->state = std::move(d.next_state);
    }
  }
  return w;
}

void PerGuestCounter(benchmark::State& state) {
  state.counters["ns_per_guest"] = benchmark::Counter(
      kGuests, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Decide(benchmark::State& state, const char* policy_name) {
  std::unique_ptr<Warm> w = WarmUp(policy_name);
  // A tick of its own, as every decision in the daemon: a snapshot at the warm-up's last time
  // repeats that decision's readings (no time has passed: no rate of anything), which makes the
  // pagecache's pass look 9% cheaper than a real tick's.
  w->sim->Step(5);
  const policy::Snapshot snapshot = w->sim->MakeSnapshot();
  for (auto _ : state) {
    // The daemon moves its state in (control_loop.cc); here every pass starts from the same
    // state, so a copy is moved in, made outside the timing.
    state.PauseTiming();
    policy::PolicyState copy = w->state;
    state.ResumeTiming();
    policy::Decisions d = w->policy->Decide(snapshot, std::move(copy));
    benchmark::DoNotOptimize(d);
  }
  PerGuestCounter(state);
}
BENCHMARK_CAPTURE(BM_Decide, pagecache, "pagecache")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decide, mom, "mom")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decide, proxmox, "proxmox")->Unit(benchmark::kMillisecond);

void BM_SimulatedTick(benchmark::State& state) {
  std::unique_ptr<Warm> w = WarmUp("pagecache");
  for (auto _ : state) {
    for (int i = 0; i < 5; ++i) w->sim->Step(1);
    policy::Decisions d = w->policy->Decide(w->sim->MakeSnapshot(), std::move(w->state));
    w->sim->Apply(d);
    w->state = std::move(d.next_state);
  }
  PerGuestCounter(state);
}
BENCHMARK(BM_SimulatedTick)->Unit(benchmark::kMillisecond);

void BM_GuestStep(benchmark::State& state) {
  std::unique_ptr<Warm> w = WarmUp("pagecache");
  for (auto _ : state) w->sim->Step(1);
  PerGuestCounter(state);
}
BENCHMARK(BM_GuestStep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace plimsoll::sim
