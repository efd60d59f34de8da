#include "sim/corpus.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "policy/policy.h"
#include "sim/oracle_policy.h"
#include "sim/scenario_generator.h"
#include "sim/simulation.h"
#include "sim/units.h"

namespace plimsoll::sim {

double CacheShare(const Scenario& scenario) {
  Simulation sim(scenario);
  double cache = 0, held = 0;
  const auto add = [&]() {
    for (const GuestModel& g : sim.guests()) {
      const double c = g.hot() + g.cold();
      cache += c;
      held += g.kernel() + g.spec().unreclaimable + g.anon() + c;
    }
  };
  const int64_t steps = static_cast<int64_t>(scenario.duration);
  for (int64_t i = 0; i < steps; ++i) {
    sim.Step(1);
    add();
  }
  return held > 0 ? cache / held : 0;
}

CorpusMeasures MeasuresOf(const RunResult& r, size_t guests) {
  CorpusMeasures m;
  m.reclaimed_gib_s = r.reclaimed_byte_s / kGib;
  m.stall_s = r.stall_s;
  m.refault_gib = r.refault_bytes / kGib;
  m.oom_kills = r.oom_kills;
  m.traffic_gib = r.churn_bytes / kGib;
  const double guest_hours = static_cast<double>(guests) * r.duration / 3600;
  m.reversals_per_guest_hour = guest_hours > 0 ? static_cast<double>(r.reversals) / guest_hours : 0;
  if (r.converge_s >= 0) m.fit_s = r.converge_s;
  m.reversals_any_per_guest_hour = m.reversals_per_guest_hour;
  m.reversals_per_guest_hour =
      guest_hours > 0 ? static_cast<double>(r.wide_reversals) / guest_hours : 0;
  m.safe_reclaimed_gib_s = r.safe_reclaimed_byte_s / kGib;
  if (m.safe_reclaimed_gib_s > 0) m.traffic_per_safe_gib_s = m.traffic_gib / m.safe_reclaimed_gib_s;
  m.policy_kills = r.policy_kills;
  m.budget_kills = r.budget_kills;
  m.over_budget_s = r.over_budget_s;
  m.budget_over_budget_s = r.budget_over_budget_s;
  m.kill_causes = r.kill_causes;
  m.host_returned_gib_s = r.host_returned_byte_s / kGib;
  m.safe_returned_gib_s = r.safe_returned_byte_s / kGib;
  m.over_budget_rss_s = r.over_budget_rss_s;
  return m;
}

namespace {

// One case: generated, its baseline measured, every policy played.
absl::StatusOr<CorpusCase> RunCase(uint64_t seed, int index,
                                   const std::vector<std::string>& policies, RunOptions options) {
  const Scenario s = GenerateScenario(seed, index);
  CorpusCase c;
  c.name = s.name;
  c.index = index;
  c.guests = s.guests.size();
  c.cache_share = CacheShare(s);
  c.cache_heavy = c.cache_share >= 0.5;
  c.agent =
      std::all_of(s.guests.begin(), s.guests.end(), [](const GuestSpec& g) { return g.agent; });
  c.agent_guests = static_cast<size_t>(
      std::count_if(s.guests.begin(), s.guests.end(), [](const GuestSpec& g) { return g.agent; }));
  c.duration_s = s.duration;
  options.record_every = s.duration;  // the corpus does not plot
  std::map<std::string, std::vector<double>> guest_stall;
  for (const std::string& p : policies) {
    // The references play without in-guest reclaim (corpus.h).
    RunOptions run_options = options;
    if (p == kOraclePolicyName || p == kLimitPolicyName) run_options.in_guest_reclaim = false;
    absl::StatusOr<RunResult> run = RunScenario(s, p, run_options);
    if (!run.ok()) return run.status();
    c.results[p] = MeasuresOf(*run, c.guests);
    c.infeasible_s = run->infeasible_s;  // the case's, whichever policy plays
    for (const GuestResult& g : run->guests) guest_stall[p].push_back(g.stall_s);
  }
  const double oracle = c.results[kOraclePolicyName].reclaimed_gib_s;
  const double limit = c.results[kLimitPolicyName].safe_reclaimed_gib_s;
  const double oracle_returned = c.results[kOraclePolicyName].host_returned_gib_s;
  const double limit_returned = c.results[kLimitPolicyName].safe_returned_gib_s;
  const std::vector<double>& limit_stall = guest_stall[kLimitPolicyName];
  for (auto& [name, m] : c.results) {
    if (oracle > 0) m.oracle_share = m.reclaimed_gib_s / oracle;
    if (limit > 0) m.safe_reclaim_share = m.safe_reclaimed_gib_s / limit;
    if (oracle_returned > 0) m.host_returned_share = m.host_returned_gib_s / oracle_returned;
    if (limit_returned > 0) m.safe_returned_share = m.safe_returned_gib_s / limit_returned;
    const std::vector<double>& stall = guest_stall[name];
    for (size_t i = 0; i < stall.size() && i < limit_stall.size(); ++i) {
      m.excess_stall_s += std::max(0.0, stall[i] - limit_stall[i]);
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<CorpusRun> RunCorpus(uint64_t seed, int count, std::vector<std::string> policies,
                                    int threads, const std::function<void(int)>& progress,
                                    const RunOptions& options) {
  if (count < 1) return absl::InvalidArgumentError("count must be at least 1");
  for (const char* oracle : {kOraclePolicyName, kLimitPolicyName}) {
    if (std::find(policies.begin(), policies.end(), oracle) == policies.end()) {
      policies.push_back(oracle);
    }
  }
  for (const std::string& p : policies) {
    if (p == kOraclePolicyName || p == kLimitPolicyName) continue;
    if (absl::StatusOr<std::unique_ptr<policy::Policy>> made = policy::MakePolicy(p); !made.ok()) {
      return made.status();
    }
  }
  CorpusRun run;
  run.seed = seed;
  run.count = count;
  run.policies = policies;
  run.cases.resize(count);
  std::vector<absl::Status> errors(count);
  std::atomic<int> next{0};
  std::mutex progress_mu;
  int done = 0;
  const auto work = [&]() {
    for (int i = next++; i < count; i = next++) {
      absl::StatusOr<CorpusCase> c = RunCase(seed, i, policies, options);
      if (c.ok()) {
        run.cases[i] = *std::move(c);
      } else {
        errors[i] = c.status();
      }
      std::lock_guard<std::mutex> lock(progress_mu);
      ++done;
      if (progress) progress(done);
    }
  };
  const int n = std::clamp(threads, 1, count);
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const absl::Status& st : errors) {
    if (!st.ok()) return st;
  }
  return run;
}

}  // namespace plimsoll::sim
