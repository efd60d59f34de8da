#include "sim/runner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "policy/policy.h"
#include "sim/guest_model.h"
#include "sim/oracle_policy.h"
#include "sim/reversal_counter.h"
#include "sim/simulation.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr double kStepSeconds = 1;
// The guests' total counts as within the budget up to this much over it.
constexpr double kBudgetSlack = 16 * kMib;
// A balloon direction change counts as a wide reversal when it moves at least this share of the
// guest's max against the way the target was going.
constexpr double kWideReversalShare = 0.02;


// What the model knows and the oracle is told before each decision: each guest's need with
// the lead of one tick (the next decision may be that far away) and a step.
OracleTruth TruthOf(const Simulation& sim) {
  OracleTruth truth;
  truth.host_other = sim.HostOther();
  truth.guests.reserve(sim.guests().size());
  for (const GuestModel& g : sim.guests()) {
    const GuestModel::WorkingSet need = g.NeedAhead(sim.now(), sim.scenario().tick + kStepSeconds);
    truth.guests.push_back(OracleGuestTruth{need.hard, need.cache, g.BalloonMoves(sim.now())});
  }
  return truth;
}

// The policy of that name: the oracle, given the simulation's truth, or one of plimsolld's.
absl::StatusOr<std::unique_ptr<policy::Policy>> MakeSimPolicy(absl::string_view name,
                                                              const Simulation* sim) {
  if (name == kOraclePolicyName) {
    return std::make_unique<OraclePolicy>([sim]() { return TruthOf(*sim); });
  }
  if (name == kLimitPolicyName) {
    return std::make_unique<LimitPolicy>([sim]() { return TruthOf(*sim); });
  }
  return policy::MakePolicy(name);
}

// The keep plimsolld names in a guest's reclaim bounds (GuestReclaimBounds): with free page
// reporting on and a decision made on the agent's figures that names a working set,
// max(working set, floor); none otherwise, and the agent reclaims nothing.
std::optional<double> ReclaimKeep(const policy::GuestView& view, const policy::GuestDecision& d) {
  if (!view.free_page_reporting.value_or(false)) return std::nullopt;
  if (!view.anon_bytes.has_value() || !view.active_file_bytes.has_value()) return std::nullopt;
  const int64_t keep = std::max(d.working_set_bytes, d.floor_bytes);
  if (d.working_set_bytes <= 0 || keep <= 0) return std::nullopt;
  return static_cast<double>(keep);
}

}  // namespace

absl::StatusOr<RunResult> RunScenario(const Scenario& given, absl::string_view policy_name,
                                      const RunOptions& options) {
  const bool changed = options.tick_seconds > 0 || options.stats_period > 0 ||
                       options.balloon_pressure.has_value() || options.steady_reads;
  Scenario retimed;
  if (changed) {
    retimed = given;
    if (options.tick_seconds > 0) retimed.tick = options.tick_seconds;
    if (options.stats_period > 0) {
      for (GuestSpec& g : retimed.guests) g.stats_period = options.stats_period;
    }
    if (options.balloon_pressure.has_value()) {
      for (GuestSpec& g : retimed.guests) g.balloon_pressure = *options.balloon_pressure;
    }
    if (options.steady_reads) {
      for (GuestSpec& g : retimed.guests) g.read_drift = 0;
    }
  }
  const Scenario& scenario = changed ? retimed : given;
  Simulation sim(scenario);
  absl::StatusOr<std::unique_ptr<policy::Policy>> made = MakeSimPolicy(policy_name, &sim);
  if (!made.ok()) return made.status();
  const policy::Policy& policy = **made;
  sim.set_omit_psi_total(options.omit_psi_total);
  sim.set_block_stats_interval(options.block_stats_interval);
  sim.set_in_guest_reclaim(options.in_guest_reclaim);
  RunResult r;
  r.scenario = scenario.name;
  r.policy = std::string(policy_name);
  r.duration = scenario.duration;
  const size_t n = scenario.guests.size();
  r.guests.resize(n);
  r.series.actual.resize(n);
  r.series.target.resize(n);
  std::vector<double> thrash_run(n, 0);
  std::vector<int> last_direction(n, 0);
  std::vector<ReversalCounter> wide;
  wide.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    r.guests[i].name = scenario.guests[i].name;
    r.guests[i].min_actual = sim.guests()[i].actual();
    wide.emplace_back(sim.guests()[i].target(), kWideReversalShare * scenario.guests[i].max);
  }
  // For the kill causes: the newest report of each guest a decision has seen (seconds), whether
  // its stats were fresh at the last decision, and when its allocation under way began.
  std::vector<double> seen_report(n, -1e18);
  std::vector<bool> fresh(n, true);
  std::vector<std::optional<double>> allocation_began(n);
  const double budget = scenario.GuestBudget();
  policy::PolicyState state;
  double last_decision = -1e9;
  double last_over = -1;

  const auto decide = [&](bool early) {
    const policy::Snapshot snapshot = sim.MakeSnapshot();
    policy::Decisions decisions = policy.Decide(snapshot, std::move(state));
    ++r.decisions;
    if (early) ++r.early_decisions;
    last_decision = sim.now();
    for (size_t i = 0; i < n && i < decisions.guests.size(); ++i) {
      const policy::GuestDecision& d = decisions.guests[i];
      const double previous = sim.guests()[i].target();
      const double asked = static_cast<double>(d.target_bytes);
      const int direction = asked > previous + 0.5 ? 1 : asked < previous - 0.5 ? -1 : 0;
      if (direction != 0) {
        if (last_direction[i] != 0 && direction != last_direction[i]) ++r.reversals;
        last_direction[i] = direction;
      }
      if (!d.state.empty()) r.guests[i].first_state_s.emplace(d.state, sim.now());
      if (!options.trace_guest.empty() && scenario.guests[i].name == options.trace_guest) {
        const GuestModel& g = sim.guests()[i];
        r.trace.push_back(absl::StrFormat(
            "t=%.0f actual=%s anon=%s hot=%s cold=%s free=%s psi_avg10=%.1f | %s", sim.now(),
            FormatBytes(g.actual()), FormatBytes(g.anon()), FormatBytes(g.hot()),
            FormatBytes(g.cold()), FormatBytes(g.Free()), g.psi_avg10(), d.reason));
      }
      const policy::GuestView& view = snapshot.guests[i];
      if (options.in_guest_reclaim) sim.SetReclaimKeep(i, ReclaimKeep(view, d));
      if ((!view.has_stats || !view.stats_fresh) && d.target_bytes < view.target_bytes) {
        ++r.guests[i].unsafe_shrink_asks;
      }
      if (d.target_bytes < view.min_bytes) ++r.guests[i].below_min_asks;
      fresh[i] = view.has_stats && view.stats_fresh;
      if (view.has_stats) {
        double age = view.stats_age_seconds;
        if (view.agent_age_seconds.has_value()) age = std::min(age, *view.agent_age_seconds);
        seen_report[i] = std::max(seen_report[i], sim.now() - age);
      }
    }
    sim.Apply(decisions);
    for (size_t i = 0; i < n; ++i) wide[i].Add(sim.guests()[i].target());
    r.last_summary = decisions.summary;
    state = std::move(decisions.next_state);
  };

  const auto record = [&]() {
    r.series.t.push_back(sim.now());
    for (size_t i = 0; i < n; ++i) {
      r.series.actual[i].push_back(sim.guests()[i].actual());
      r.series.target[i].push_back(sim.guests()[i].target());
    }
    r.series.sum_actual.push_back(sim.SumActual());
    r.series.budget.push_back(budget);
    r.series.host_available.push_back(sim.HostAvailable());
  };

  decide(false);
  record();
  const int64_t steps = static_cast<int64_t>(std::llround(scenario.duration / kStepSeconds));
  const int64_t tick_steps = std::max<int64_t>(1, std::llround(scenario.tick / kStepSeconds));
  const int64_t record_steps =
      std::max<int64_t>(1, std::llround(options.record_every / kStepSeconds));
  for (int64_t step = 1; step <= steps; ++step) {
    sim.Step(kStepSeconds);
    // Feasibility: the guests' hard demand now (the scenario's truth: kernel, unreclaimable,
    // the phase's anon, the min-free watermark; each within [min, max]) against what the host
    // can give them (the budget, less the memory outside the guests and the reserve).
    const double host_budget =
        std::min(budget, scenario.host.total - sim.HostOther() - scenario.host.reserve);
    std::vector<GuestModel::WorkingSet> ws(n);
    double hard_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const GuestSpec& spec = scenario.guests[i];
      ws[i] = sim.guests()[i].WorkingSetAt(sim.now());
      hard_sum += std::clamp(ws[i].hard, spec.min, spec.max);
    }
    const bool feasible = hard_sum <= host_budget;
    if (!feasible) r.infeasible_s += kStepSeconds;
    for (size_t i = 0; i < n; ++i) {
      const GuestModel& g = sim.guests()[i];
      const StepOutcome& o = g.last();
      GuestResult& gr = r.guests[i];
      const double max = g.spec().max;
      gr.safe_reclaimed_byte_s +=
          std::max(0.0, max - std::max(g.actual(), std::min(ws[i].total(), max))) * kStepSeconds;
      gr.safe_returned_byte_s +=
          std::max(0.0, max - std::max(g.HostRss(), std::min(ws[i].total(), max))) * kStepSeconds;
      if (o.oom_kill) {
        const char* cause;
        if (ws[i].hard > max) {
          cause = "ceiling";
        } else if (!feasible) {
          cause = "budget";
        } else if (!g.BalloonMoves(sim.now())) {
          cause = "stuck_balloon";
        } else if (!fresh[i]) {
          cause = "blind";
        } else if (seen_report[i] <= allocation_began[i].value_or(sim.now() - kStepSeconds) + 0.5) {
          cause = g.spec().agent ? "faster_than_stats" : "faster_than_stats_no_agent";
        } else {
          cause = g.spec().agent ? "held_low" : "held_low_no_agent";
        }
        ++r.kill_causes[cause];
        const bool policys = feasible && ws[i].hard <= max;
        ++(policys ? r.policy_kills : r.budget_kills);
      }
      allocation_began[i] = g.allocation_began();
      gr.stall_s += o.stall * kStepSeconds;
      gr.refault_bytes += o.refault_bytes;
      gr.oom_kills += o.oom_kill ? 1 : 0;
      gr.self_deflates += o.self_deflated ? 1 : 0;
      thrash_run[i] = o.thrashing ? thrash_run[i] + kStepSeconds : 0;
      gr.max_thrash_s = std::max(gr.max_thrash_s, thrash_run[i]);
      gr.min_actual = std::min(gr.min_actual, g.actual());
      gr.mean_actual += g.actual() * kStepSeconds / scenario.duration;
      gr.reclaimed_byte_s += (g.spec().max - g.actual()) * kStepSeconds;
      gr.host_returned_byte_s += (g.spec().max - g.HostRss()) * kStepSeconds;
      gr.traffic_bytes += o.inflated_bytes + o.deflated_bytes;
      r.churn_bytes += o.inflated_bytes + o.deflated_bytes;
    }
    const double sum = sim.SumActual();
    if (sum > budget + kBudgetSlack) {
      r.over_budget_byte_s += (sum - budget) * kStepSeconds;
      last_over = sim.now();
    }
    if (sum > host_budget + kBudgetSlack) {
      (feasible ? r.over_budget_s : r.budget_over_budget_s) += kStepSeconds;
    }
    if (feasible && sim.SumHostRss() > host_budget + kBudgetSlack) {
      r.over_budget_rss_s += kStepSeconds;
    }
    if (sim.HostAvailable() < scenario.host.reserve) r.host_short_s += kStepSeconds;
    const bool on_tick = step % tick_steps == 0;
    const bool spike = sim.AnySpike() && sim.now() - last_decision >= 1;
    if (on_tick || spike) decide(!on_tick);
    if (step % record_steps == 0) record();
  }
  for (size_t i = 0; i < n; ++i) {
    GuestResult& gr = r.guests[i];
    gr.final_actual = sim.guests()[i].actual();
    gr.final_target = sim.guests()[i].target();
    gr.disk_read_bytes = sim.guests()[i].disk_read_bytes();
    gr.disk_read_requests = sim.guests()[i].disk_read_requests();
    gr.wide_reversals = wide[i].reversals();
    gr.agent_reclaimed_bytes = sim.guests()[i].agent_reclaimed_bytes();
    r.host_returned_byte_s += gr.host_returned_byte_s;
    r.safe_returned_byte_s += gr.safe_returned_byte_s;
    r.agent_reclaimed_bytes += gr.agent_reclaimed_bytes;
    r.wide_reversals += gr.wide_reversals;
    r.safe_reclaimed_byte_s += gr.safe_reclaimed_byte_s;
    r.reclaimed_byte_s += gr.reclaimed_byte_s;
    r.stall_s += gr.stall_s;
    r.refault_bytes += gr.refault_bytes;
    r.oom_kills += gr.oom_kills;
    r.self_deflates += gr.self_deflates;
  }
  if (last_over < 0) {
    r.converge_s = 0;
  } else if (last_over >= scenario.duration) {
    r.converge_s = -1;
  } else {
    r.converge_s = last_over + kStepSeconds;
  }
  return r;
}

absl::StatusOr<double> MetricValue(const RunResult& r, absl::string_view metric) {
  if (metric == "reclaimed_gib_s") return r.reclaimed_byte_s / kGib;
  if (metric == "mean_reclaimed_gib") return r.reclaimed_byte_s / kGib / r.duration;
  if (metric == "stall_s") return r.stall_s;
  if (metric == "refault_gib") return r.refault_bytes / kGib;
  if (metric == "oom_kills") return static_cast<double>(r.oom_kills);
  if (metric == "self_deflates") return static_cast<double>(r.self_deflates);
  if (metric == "churn_gib") return r.churn_bytes / kGib;
  if (metric == "reversals") return static_cast<double>(r.reversals);
  if (metric == "converge_s") return r.converge_s;
  if (metric == "over_budget_gib_s") return r.over_budget_byte_s / kGib;
  if (metric == "host_short_s") return r.host_short_s;
  if (metric == "safe_reclaimed_gib_s") return r.safe_reclaimed_byte_s / kGib;
  if (metric == "infeasible_s") return r.infeasible_s;
  if (metric == "policy_kills") return static_cast<double>(r.policy_kills);
  if (metric == "budget_kills") return static_cast<double>(r.budget_kills);
  if (metric == "over_budget_s") return r.over_budget_s;
  if (metric == "budget_over_budget_s") return r.budget_over_budget_s;
  if (metric == "wide_reversals") return static_cast<double>(r.wide_reversals);
  if (metric == "host_returned_gib_s") return r.host_returned_byte_s / kGib;
  if (metric == "safe_returned_gib_s") return r.safe_returned_byte_s / kGib;
  if (metric == "agent_reclaimed_gib") return r.agent_reclaimed_bytes / kGib;
  if (metric == "over_budget_rss_s") return r.over_budget_rss_s;
  if (absl::StartsWith(metric, "kills.")) {
    auto it = r.kill_causes.find(std::string(metric.substr(6)));
    return it == r.kill_causes.end() ? 0.0 : static_cast<double>(it->second);
  }
  if (metric == "decisions") return static_cast<double>(r.decisions);
  if (metric == "early_decisions") return static_cast<double>(r.early_decisions);
  if (absl::StartsWith(metric, "guest.")) {
    std::vector<absl::string_view> parts = absl::StrSplit(metric, absl::MaxSplits('.', 2));
    if (parts.size() == 3) {
      for (const GuestResult& g : r.guests) {
        if (g.name != parts[1]) continue;
        const absl::string_view m = parts[2];
        if (m == "stall_s") return g.stall_s;
        if (m == "stall_pct") return 100 * g.stall_s / r.duration;
        if (m == "refault_gib") return g.refault_bytes / kGib;
        if (m == "oom_kills") return static_cast<double>(g.oom_kills);
        if (m == "self_deflates") return static_cast<double>(g.self_deflates);
        if (m == "max_thrash_s") return g.max_thrash_s;
        if (m == "final_actual_mib") return g.final_actual / kMib;
        if (m == "final_target_mib") return g.final_target / kMib;
        if (m == "final_gap_mib") return std::fabs(g.final_target - g.final_actual) / kMib;
        if (m == "unsafe_shrink_asks") return static_cast<double>(g.unsafe_shrink_asks);
        if (m == "below_min_asks") return static_cast<double>(g.below_min_asks);
        if (m == "wide_reversals") return static_cast<double>(g.wide_reversals);
        if (m == "safe_reclaimed_gib_s") return g.safe_reclaimed_byte_s / kGib;
        if (m == "min_actual_mib") return g.min_actual / kMib;
        if (m == "mean_actual_mib") return g.mean_actual / kMib;
        if (m == "reclaimed_gib_s") return g.reclaimed_byte_s / kGib;
        if (m == "host_returned_gib_s") return g.host_returned_byte_s / kGib;
        if (m == "safe_returned_gib_s") return g.safe_returned_byte_s / kGib;
        if (m == "agent_reclaimed_mib") return g.agent_reclaimed_bytes / kMib;
        if (m == "traffic_mib") return g.traffic_bytes / kMib;
        if (m == "disk_read_mib") return g.disk_read_bytes / kMib;
        if (m == "disk_read_requests") return g.disk_read_requests;
        if (absl::StartsWith(m, "state_seen.")) {
          return g.first_state_s.count(std::string(m.substr(11))) > 0 ? 1.0 : 0.0;
        }
        if (absl::StartsWith(m, "state_first_s.")) {
          auto it = g.first_state_s.find(std::string(m.substr(14)));
          return it == g.first_state_s.end() ? -1.0 : it->second;
        }
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("unknown metric \"", metric, "\""));
}

}  // namespace plimsoll::sim
