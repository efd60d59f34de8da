// Plays one policy (by name: "oracle" or "limit" (sim/oracle_policy.h, told the model's truth
// before each decision), else through policy::MakePolicy) against one scenario, one simulated
// second at a time, and measures the outcome. The policy decides every `tick` seconds, and also
// at once (at most once a second) when an agent reports a pressure spike, as plimsolld wakes
// its loop on such a report.
//
// Measures (names as MetricValue and scenario `expect` lines use them):
//   reclaimed_gib_s    sum over guests and seconds of (max - actual): memory the host held back
//   mean_reclaimed_gib reclaimed_gib_s / duration
//   stall_s            seconds some task in some guest stalled on memory (PSI some, summed)
//   refault_gib        evicted file data read back, all guests
//   oom_kills          OOM kills in the guests
//   self_deflates      times a guest deflated its balloon on OOM (autodeflate)
//   churn_gib          balloon traffic: inflated + deflated bytes, all guests
//   reversals          times a guest's target changed direction (grow after shrink or back)
//   converge_s         when the guests' total fell under the budget for good (0: never over;
//                      -1: still over at the end)
//   over_budget_gib_s  sum over seconds of how far the guests' total was over the budget
//   host_short_s       seconds the host's MemAvailable was under its reserve
//   safe_reclaimed_gib_s  sum over guests and seconds of max - max(actual, true working set):
//                      reclaim above the working set (GuestModel::WorkingSetAt, within max);
//                      memory taken from a working set earns nothing
//   infeasible_s       seconds the guests' hard demand (WorkingSetAt's hard part, each within
//                      [min, max]) did not fit the host budget, min(budget, total - outside
//                      memory - reserve): no policy could hold every guest's hard demand then
//   policy_kills       OOM kills while feasible (and within the guest's max)
//   budget_kills       the other kills: infeasible, or the guest's hard demand over its max
//   over_budget_s      feasible seconds the guests' total was over the host budget above
//                      (by more than 16 MiB)
//   budget_over_budget_s  the same, infeasible seconds
//   wide_reversals     balloon target direction changes of at least 2% of the guest's max (a
//                      zigzag filter: smaller wiggles neither count nor turn)
//   kills.<cause>      OOM kills by cause, the first that applies: ceiling (hard demand over
//                      max), budget (infeasible), stuck_balloon (the balloon does not move),
//                      blind (no fresh stats at the last decision), faster_than_stats (no
//                      decision saw a report taken after the allocation began), held_low (a
//                      decision saw the allocation and the guest was still left short); the
//                      last two with the suffix _no_agent for a guest without the agent
//   decisions, early_decisions   Decide calls, and those a spike triggered
//   host_returned_gib_s  sum over guests and seconds of (max - what the guest costs the host,
//                      GuestModel::HostRss): reclaimed_gib_s without in-guest reclaim; with it,
//                      the free pages the balloons report back count too
//   agent_reclaimed_gib  page cache the agents reclaimed in their guests (in-guest reclaim)
//   safe_returned_gib_s  as safe_reclaimed_gib_s with what the guest costs the host (HostRss) for
//                      actual: sum over guests and seconds of max - max(RSS, true working set);
//                      safe_reclaimed_gib_s without in-guest reclaim
//   over_budget_rss_s  as over_budget_s, with the guests' total counted in what they cost the
//                      host (HostRss) rather than in balloon sizes: over_budget_s without
//                      in-guest reclaim; with it, memory the balloons hold and the guests have
//                      handed back as free pages is not over the budget
// and per guest, as guest.<name>.<metric>: stall_s, stall_pct (of the run), refault_gib,
// oom_kills, self_deflates, max_thrash_s (longest run of failed allocations), traffic_mib
// (balloon inflation + deflation), disk_read_mib and disk_read_requests (as the host counts
// them), final_actual_mib,
// final_target_mib, final_gap_mib (|target - actual| at the end), min_actual_mib,
// mean_actual_mib, reclaimed_gib_s, unsafe_shrink_asks (decisions that asked to shrink a guest
// without fresh stats: the daemon refuses them, but a policy should not ask), below_min_asks
// (decisions that asked for less than the guest's min), wide_reversals, safe_reclaimed_gib_s,
// host_returned_gib_s, safe_returned_gib_s, agent_reclaimed_mib,
// state_seen.<state>
// (1 if a decision ever gave the guest that state: ok, stuck, churning, self_deflated) and
// state_first_s.<state> (when it first did; -1 never).
#ifndef PLIMSOLL_SIM_RUNNER_H_
#define PLIMSOLL_SIM_RUNNER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

struct GuestResult {
  std::string name;
  double stall_s = 0;
  double refault_bytes = 0;
  int64_t oom_kills = 0;
  int64_t self_deflates = 0;
  double max_thrash_s = 0;
  double final_actual = 0;
  double final_target = 0;
  double min_actual = 0;
  double mean_actual = 0;
  double reclaimed_byte_s = 0;
  double traffic_bytes = 0;       // balloon inflation + deflation
  double disk_read_bytes = 0;     // as the host sees them (libvirt's block stats)
  double disk_read_requests = 0;
  int64_t unsafe_shrink_asks = 0;
  int64_t below_min_asks = 0;
  int64_t wide_reversals = 0;
  double safe_reclaimed_byte_s = 0;
  double host_returned_byte_s = 0;   // sum over seconds of max - HostRss
  double safe_returned_byte_s = 0;   // sum over seconds of max - max(HostRss, working set)
  double agent_reclaimed_bytes = 0;  // page cache its agent reclaimed
  std::map<std::string, double> first_state_s;  // state -> first time a decision gave it
};

// Samples for the plot, one per `record_every` seconds.
struct Series {
  std::vector<double> t;
  std::vector<std::vector<double>> actual;  // [guest][sample]
  std::vector<std::vector<double>> target;
  std::vector<double> sum_actual;
  std::vector<double> budget;
  std::vector<double> host_available;
};

struct RunResult {
  std::string scenario;
  std::string policy;
  double duration = 0;
  double reclaimed_byte_s = 0;
  double stall_s = 0;
  double refault_bytes = 0;
  int64_t oom_kills = 0;
  int64_t self_deflates = 0;
  double churn_bytes = 0;
  int64_t reversals = 0;
  double converge_s = 0;
  double over_budget_byte_s = 0;
  double host_short_s = 0;
  int64_t decisions = 0;
  int64_t early_decisions = 0;
  double safe_reclaimed_byte_s = 0;
  double infeasible_s = 0;
  int64_t policy_kills = 0;
  int64_t budget_kills = 0;
  double over_budget_s = 0;
  double budget_over_budget_s = 0;
  int64_t wide_reversals = 0;
  double host_returned_byte_s = 0;
  double safe_returned_byte_s = 0;
  double agent_reclaimed_bytes = 0;
  double over_budget_rss_s = 0;
  std::map<std::string, int64_t> kill_causes;
  std::vector<GuestResult> guests;
  Series series;
  std::string last_summary;  // the policy's summary at its last decision
  std::vector<std::string> trace;
};

struct RunOptions {
  double record_every = 5;  // seconds between plot samples
  // When set, RunResult::trace gets one line per decision for this guest: time, actual, the
  // guest's stall and refaults, and the policy's reason.
  std::string trace_guest;
  // Snapshots without PSI's cumulative total (avg10 only).
  bool omit_psi_total = false;
  // The guests' disk reads are read at most this often (seconds), as plimsolld's
  // block_stats_interval does (its default); 0: at every decision.
  double block_stats_interval = 5;
  // > 0: decide every this many seconds instead of the scenario's own tick (the generated
  // corpus ticks every 5 s, plimsolld's default; an operator may set a shorter one).
  double tick_seconds = 0;
  // > 0: every guest reports its stats every this many seconds instead of its own stats_period
  // (the generated corpus draws 2, 5 or 10 s against a 5 s tick; plimsolld's lab guests are set
  // to 2 s, and a guest left at QEMU's or libvirt's other settings may report far more slowly
  // than the daemon ticks: --tick=1 --stats_period=20).
  double stats_period = 0;
  // Set: every guest's kernel sends the balloon driver's pressure counters (true) or none does
  // (false), whatever the scenario says (GuestSpec::balloon_pressure); empty: as it says.
  std::optional<bool> balloon_pressure;
  // The guests' readers keep a steady pace (GuestSpec::read_drift = 0), whatever the scenario
  // says: the figures as before the model had the drift.
  bool steady_reads = false;
  // In-guest reclaim (docs/instruments.md "In-guest reclaim in the model"): plimsolld sends the
  // agents reclaim bounds (HostView::in_guest_reclaim), every guest's balloon reports free pages,
  // and the agents reclaim page cache down to the keep each decision names
  // (server/agent/guest_reclaim_bounds.h: max(working set, floor) of a decision made on the
  // agent's figures that names a working set). Off: the run as before the model had it.
  bool in_guest_reclaim = false;
};

// INVALID_ARGUMENT for an unknown policy name ("oracle", "limit" or one policy::MakePolicy
// knows).
absl::StatusOr<RunResult> RunScenario(const Scenario& scenario, absl::string_view policy,
                                      const RunOptions& options = RunOptions());

// A measure by name (see the file comment); NOT_FOUND names an unknown one.
absl::StatusOr<double> MetricValue(const RunResult& result, absl::string_view metric);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_RUNNER_H_
