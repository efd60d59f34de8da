// The scenario corpus: every policy on `count` generated cases of one seed
// (scenario_generator.h), and the two oracles beside them (oracle_policy.h: `oracle`, with the
// pagecache policy's headroom, and `limit`, without headroom or chasing), measured the same way
// for all, so that a policy is judged on many cases and against the limit, not on a handful.
//
// Per case and policy (names as in the JSON, corpus_report.h):
//   reclaimed_gib_s           the runner's: sum over guests and seconds of max - actual
//   stall_s, refault_gib, oom_kills   the runner's
//   traffic_gib               balloon traffic: GiB moved by inflation and deflation (churn_gib)
//   reversals_per_guest_hour  wide reversals (balloon target direction changes of at least 2%
//                             of the guest's max, runner.h) / (guests * duration in hours)
//   reversals_any_per_guest_hour  every target direction reversal, however small, likewise
//   fit_s                     when the guests' total came under the budget for good: 0 if it
//                             never was over, absent if it was still over at the end
//   oracle_share              reclaimed_gib_s / the oracle's on the same case (absent when the
//                             oracle reclaimed nothing)
//   safe_reclaimed_gib_s      reclaim above the guests' true working sets (runner.h)
//   safe_reclaim_share        safe_reclaimed_gib_s / the limit's (absent when it is 0)
//   policy_kills, budget_kills  OOM kills while the guests' hard demand fits the host budget
//                             (the policy's), and while it does not (the budget's; runner.h)
//   over_budget_s, budget_over_budget_s  seconds over the host budget, feasible and not
//   excess_stall_s            sum over guests of max(0, the guest's stall - its stall under the
//                             limit): stall the limit did not have (0 for the limit itself)
//   traffic_per_safe_gib_s    traffic_gib / safe_reclaimed_gib_s (absent when that is 0)
//   kill_causes               OOM kills by cause (runner.h kills.<cause>)
//   host_returned_gib_s       the runner's: sum over guests and seconds of max - what the guest
//                             costs the host (its RSS: its actual size without in-guest reclaim,
//                             less the free pages its balloon reports with it)
//   host_returned_share       host_returned_gib_s / the oracle's (absent when the oracle's is 0)
//   safe_returned_gib_s       the runner's: safe_reclaimed_gib_s with the guests at what they cost
//                             the host (RSS) rather than their balloon sizes
//   safe_returned_share       safe_returned_gib_s / the limit's (absent when it is 0)
//   over_budget_rss_s         the runner's: over_budget_s with the guests counted at what they
//                             cost the host (over_budget_s itself without in-guest reclaim)
// and per case:
//   cache_heavy               page cache is at least half of what the guests hold: with every
//                             balloon at its start size and no policy (the unconstrained
//                             baseline), the guests' page cache (hot + cold) integrated over the
//                             run is at least half of their kernel + unreclaimable + anon + page
//                             cache integrated likewise (free memory is not held)
//   agent                     every guest runs the agent
//   agent_guests              how many guests run the agent (0: an agentless case)
//   infeasible_s              seconds the guests' hard demand did not fit the host budget
//                             (runner.h), the same for every policy
//
// With RunOptions::in_guest_reclaim the policies play with in-guest reclaim; the oracle and the
// limit always play without it, so that every share has the same reference in both modes (and
// the oracle's host_returned_gib_s is its reclaimed_gib_s).
//
// Deterministic: the same seed and count give the same numbers, whatever the thread count.
#ifndef PLIMSOLL_SIM_CORPUS_H_
#define PLIMSOLL_SIM_CORPUS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

struct CorpusMeasures {
  double reclaimed_gib_s = 0;
  double stall_s = 0;
  double refault_gib = 0;
  int64_t oom_kills = 0;
  double traffic_gib = 0;
  double reversals_per_guest_hour = 0;
  std::optional<double> fit_s;
  std::optional<double> oracle_share;
  double safe_reclaimed_gib_s = 0;
  std::optional<double> safe_reclaim_share;
  int64_t policy_kills = 0;
  int64_t budget_kills = 0;
  double over_budget_s = 0;
  double budget_over_budget_s = 0;
  double excess_stall_s = 0;
  std::optional<double> traffic_per_safe_gib_s;
  double reversals_any_per_guest_hour = 0;
  std::map<std::string, int64_t> kill_causes;
  double host_returned_gib_s = 0;
  std::optional<double> host_returned_share;
  double safe_returned_gib_s = 0;
  std::optional<double> safe_returned_share;
  double over_budget_rss_s = 0;
};

struct CorpusCase {
  std::string name;
  int index = 0;
  size_t guests = 0;
  double cache_share = 0;  // the baseline's page cache / what the guests hold (see above)
  bool cache_heavy = false;
  bool agent = false;
  size_t agent_guests = 0;  // guests that run the agent (0: an agentless case)
  double duration_s = 0;
  double infeasible_s = 0;
  std::map<std::string, CorpusMeasures> results;  // by policy
};

struct CorpusRun {
  uint64_t seed = 0;
  int count = 0;
  std::vector<std::string> policies;  // as asked, then the oracle and the limit
  std::vector<CorpusCase> cases;      // by index
};

// The baseline's page-cache share of what the guests hold (cache_heavy is share >= 0.5).
double CacheShare(const Scenario& scenario);

// The corpus measures of one run; oracle_share, safe_reclaim_share, excess_stall_s,
// host_returned_share and safe_returned_share, which need the oracles' runs, are left to the
// caller.
CorpusMeasures MeasuresOf(const RunResult& run, size_t guests);

// Plays `policies` and the oracle and the limit (added when not among them) on cases 0..count-1 of `seed`,
// on `threads` threads (at least 1). INVALID_ARGUMENT for an unknown policy or count < 1.
// `progress`, when set, is called after each case with the number done (from any thread, one
// call at a time).
absl::StatusOr<CorpusRun> RunCorpus(uint64_t seed, int count, std::vector<std::string> policies,
                                    int threads = 1,
                                    const std::function<void(int done)>& progress = nullptr,
                                    const RunOptions& options = RunOptions());

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_CORPUS_H_
