// How long MomPolicy::Decide takes for a host of 10,000 guests (oVirt MoM's rule interpreter
// spends ~2 ms per guest, domain.md section 5). Run: bazel run -c opt //bench:mom_policy_benchmark
#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "policy/mom_policy.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;

// `guests` guests of 1-5 GiB with varied free memory, every tenth one with stale stats, and a
// budget that puts the host at `host_free_pct` free.
Snapshot MakeSnapshot(int guests, double host_free_pct) {
  Snapshot snapshot;
  int64_t sum = 0;
  for (int i = 0; i < guests; ++i) {
    GuestView guest;
    guest.name = "vm" + std::to_string(i);
    guest.uuid = "00000000-0000-0000-0000-" + std::to_string(100000000000 + i);
    guest.actual_bytes = (1024 + (i * 37) % 4096) * kMib;
    guest.target_bytes = guest.actual_bytes;
    guest.max_bytes = 8192 * kMib;
    guest.min_bytes = 512 * kMib;
    guest.has_stats = true;
    guest.stats_fresh = i % 10 != 0;
    guest.unused_bytes = guest.actual_bytes / (2 + i % 7);
    sum += guest.actual_bytes;
    snapshot.guests.push_back(guest);
  }
  snapshot.host.guest_budget_bytes = static_cast<int64_t>(sum / (1 - host_free_pct));
  snapshot.host.mem_available_bytes = snapshot.host.guest_budget_bytes;
  return snapshot;
}

void BM_MomDecide(benchmark::State& state) {
  const int guests = static_cast<int>(state.range(0));
  const double host_free_pct = static_cast<double>(state.range(1)) / 100.0;
  const Snapshot snapshot = MakeSnapshot(guests, host_free_pct);
  const MomPolicy policy;
  const PolicyState policy_state;
  for (auto _ : state) {
    Decisions decisions = policy.Decide(snapshot, policy_state);
    benchmark::DoNotOptimize(decisions);
  }
  state.SetItemsProcessed(state.iterations() * guests);
  state.counters["ns_per_guest"] = benchmark::Counter(
      static_cast<double>(guests), benchmark::Counter::kIsIterationInvariantRate |
                                       benchmark::Counter::kInvert);
}
// 10,000 guests, in pressure (10% free: shrink) and without (50% free: grow).
BENCHMARK(BM_MomDecide)->Args({10000, 10})->Args({10000, 50})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace plimsoll::policy
