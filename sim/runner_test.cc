#include "sim/runner.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/expectations.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include "sim/scenario_generator.h"
#include "sim/svg_plot.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kSmall[] = R"(
scenario name=small duration=5m tick=5s
host total=8GiB reserve=512MiB budget=3GiB
guest name=a max=2GiB min=256MiB
phase guest=a at=0 anon=300MiB stream_rate=10MiB/s
guest name=b max=2GiB min=256MiB
phase guest=b at=0 anon=300MiB hot=400MiB hot_rate=20MiB/s
expect pagecache oom_kills == 0
expect pagecache reclaimed_gib_s > 1.5 * mom
expect pagecache converge_s < 1
expect pagecache guest.b.stall_s < mom:guest.b.stall_s
expect static nonsense_metric > 0
expect nobody oom_kills == 0
)";

Scenario Small() {
  absl::StatusOr<Scenario> s = ParseScenario(kSmall);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(RunnerTest, UnknownPolicy) {
  EXPECT_EQ(RunScenario(Small(), "magic").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunnerTest, StaticHoldsEverything) {
  absl::StatusOr<RunResult> r = RunScenario(Small(), "static");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reclaimed_byte_s, 0);
  EXPECT_EQ(r->converge_s, -1);  // 4 GiB over a 3 GiB budget to the end
  EXPECT_EQ(r->decisions, 61);   // t=0 and every 5 s
  EXPECT_EQ(*MetricValue(*r, "guest.a.final_actual_mib"), 2048);
  EXPECT_EQ(*MetricValue(*r, "over_budget_gib_s"), 300);
}

TEST(RunnerTest, PagecacheReclaimsAndRecordsEverything) {
  RunOptions options;
  options.trace_guest = "b";
  absl::StatusOr<RunResult> r = RunScenario(Small(), "pagecache", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->reclaimed_byte_s, 0);
  EXPECT_GE(r->converge_s, 0);
  EXPECT_EQ(r->oom_kills, 0);
  EXPECT_EQ(r->series.t.size(), 61u);  // every 5 s
  ASSERT_EQ(r->series.actual.size(), 2u);
  EXPECT_EQ(r->series.actual[0].size(), r->series.t.size());
  EXPECT_EQ(*MetricValue(*r, "guest.a.state_seen.ok"), 1);
  EXPECT_EQ(*MetricValue(*r, "guest.a.state_seen.stuck"), 0);
  EXPECT_EQ(*MetricValue(*r, "guest.a.state_first_s.stuck"), -1);
  EXPECT_EQ(r->trace.size(), static_cast<size_t>(r->decisions));
  EXPECT_THAT(r->trace.back(), HasSubstr("| pagecache: "));
  EXPECT_THAT(r->trace.back(), HasSubstr(" | src=agent actual="));
  EXPECT_THAT(r->last_summary, StartsWith("pagecache: limit="));
  EXPECT_EQ(MetricValue(*r, "guest.zz.stall_s").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MetricValue(*r, "speed").status().code(), absl::StatusCode::kNotFound);
  for (const char* m : {"reclaimed_gib_s", "mean_reclaimed_gib", "stall_s", "refault_gib",
                        "oom_kills", "self_deflates", "churn_gib", "reversals", "converge_s",
                        "over_budget_gib_s", "host_short_s", "decisions", "early_decisions",
                        "guest.b.stall_pct", "guest.b.refault_gib", "guest.b.oom_kills",
                        "guest.b.self_deflates", "guest.b.max_thrash_s", "guest.b.final_target_mib",
                        "guest.b.final_gap_mib", "guest.b.min_actual_mib", "guest.b.mean_actual_mib",
                        "guest.b.reclaimed_gib_s", "guest.b.unsafe_shrink_asks"}) {
    EXPECT_TRUE(MetricValue(*r, m).ok()) << m;
  }
}

TEST(RunnerTest, ExpectationsPassFailAndExplain) {
  const Scenario s = Small();
  EXPECT_THAT(PoliciesNamed(s), ::testing::ElementsAre("mom", "nobody", "pagecache", "static"));
  std::map<std::string, RunResult> runs;
  for (const char* p : {"pagecache", "mom", "static"}) runs[p] = *RunScenario(s, p);
  const std::vector<ExpectationOutcome> out = CheckExpectations(s, runs);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_TRUE(out[0].ok) << out[0].message;
  EXPECT_TRUE(out[1].ok) << out[1].message;
  EXPECT_THAT(out[1].message, HasSubstr("(mom reclaimed_gib_s)"));
  EXPECT_FALSE(out[2].ok);  // it takes some seconds to get under the budget
  EXPECT_THAT(out[2].message, HasSubstr("FAILED"));
  EXPECT_THAT(out[3].message, HasSubstr("(mom guest.b.stall_s)"));
  EXPECT_FALSE(out[4].ok);
  EXPECT_THAT(out[4].message, HasSubstr("unknown metric \"nonsense_metric\""));
  EXPECT_FALSE(out[5].ok);
  EXPECT_THAT(out[5].message, HasSubstr("no run of policy nobody"));
}

TEST(RunnerTest, TablesAndPlot) {
  const Scenario s = Small();
  const RunResult r = *RunScenario(s, "pagecache");
  const std::string table = FormatRunsTable({&r});
  EXPECT_THAT(table, HasSubstr("| small | pagecache |"));
  EXPECT_THAT(FormatGuestsTable(r), HasSubstr("| a |"));
  const std::string svg = RenderSvg(s, r);
  EXPECT_THAT(svg, StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("guest a (max 2GiB, normal)"));
  EXPECT_THAT(svg, HasSubstr("<polyline"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_EQ(XmlEscape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

// The oracle knows each guest's working set: it takes all the cold cache and stalls nobody.
TEST(RunnerTest, TheOracleTakesTheColdCacheWithoutStalling) {
  absl::StatusOr<RunResult> oracle = RunScenario(Small(), "oracle");
  absl::StatusOr<RunResult> pagecache = RunScenario(Small(), "pagecache");
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  EXPECT_EQ(oracle->policy, "oracle");
  EXPECT_EQ(oracle->oom_kills, 0);
  EXPECT_EQ(oracle->refault_bytes, 0);
  EXPECT_LT(oracle->stall_s, 0.5);
  // pagecache keeps a little less than the oracle's headroom (b at 965 MiB against the oracle's
  // 997 MiB here) and stalls no more: it may reclaim a little more than the oracle, never much
  // more.
  EXPECT_GT(oracle->reclaimed_byte_s, 0.9 * pagecache->reclaimed_byte_s);
  EXPECT_LT(oracle->reclaimed_byte_s, pagecache->reclaimed_byte_s);
  EXPECT_LT(pagecache->stall_s, 0.5);
  // b keeps its 400 MiB hot set, its anon and kernel, and a headroom of 128 MiB, no less.
  const double b_floor = 300 * kMib + 400 * kMib + 64 * kMib + 48 * kMib + 0.02 * 2 * kGib;
  EXPECT_GE(oracle->guests[1].min_actual, b_floor + 128 * kMib);
  EXPECT_LT(oracle->guests[1].min_actual, b_floor + 128 * kMib + 32 * kMib);
  EXPECT_GT(oracle->converge_s, 0);  // over the budget at the start...
  EXPECT_LE(oracle->converge_s, 10);  // ...under it once the balloons travelled
}

// The limit keeps no headroom: b at its working set (hot set, anon, kernel, unreclaimable, the
// min-free watermark) and no more, with no stall; it takes more than the oracle, and its
// reclaim is all safe (above the working sets).
TEST(RunnerTest, TheLimitTakesEverythingAboveTheWorkingSets) {
  const RunResult limit = *RunScenario(Small(), "limit");
  const RunResult oracle = *RunScenario(Small(), "oracle");
  const RunResult pagecache = *RunScenario(Small(), "pagecache");
  EXPECT_EQ(limit.policy, "limit");
  EXPECT_EQ(limit.oom_kills, 0);
  EXPECT_LT(limit.stall_s, 0.5);
  const double b_ws = 300 * kMib + 400 * kMib + 64 * kMib + 48 * kMib + 0.02 * 2 * kGib + 16 * kMib;
  EXPECT_GE(limit.guests[1].min_actual, b_ws - 1);
  EXPECT_LT(limit.guests[1].min_actual, b_ws + 8 * kMib);
  EXPECT_GT(limit.safe_reclaimed_byte_s, oracle.safe_reclaimed_byte_s);
  EXPECT_GT(limit.safe_reclaimed_byte_s, pagecache.safe_reclaimed_byte_s);
  EXPECT_NEAR(limit.safe_reclaimed_byte_s, limit.reclaimed_byte_s, 0.001 * limit.reclaimed_byte_s);
  // Neither oracle goes under a working set: all they reclaim is safe.
  EXPECT_NEAR(oracle.safe_reclaimed_byte_s, oracle.reclaimed_byte_s, 1);
  EXPECT_EQ(limit.infeasible_s, 0);
  EXPECT_EQ(*MetricValue(limit, "safe_reclaimed_gib_s"), limit.safe_reclaimed_byte_s / kGib);
  EXPECT_TRUE(MetricValue(limit, "guest.b.safe_reclaimed_gib_s").ok());
  EXPECT_TRUE(MetricValue(limit, "wide_reversals").ok());
  EXPECT_TRUE(MetricValue(limit, "guest.b.wide_reversals").ok());
  EXPECT_TRUE(MetricValue(limit, "guest.b.below_min_asks").ok());
}

// From 60 s an outside process leaves the guests 1.5 GiB: their hard demand (2 x ~1.2 GiB) no
// longer fits. Those seconds are infeasible; the kills and the time over the budget then are
// the budget's, not the policy's. Memory taken from a working set is not safe reclaim.
constexpr char kSqueeze[] = R"(
scenario name=squeeze duration=3m tick=5s
host total=8GiB reserve=512MiB budget=6GiB
host_event at=60s other=6GiB
guest name=a max=2GiB min=256MiB cache=0
phase guest=a at=0 anon=1GiB
phase guest=a at=90s anon=1536MiB
guest name=b max=2GiB min=256MiB cache=0
phase guest=b at=0 anon=1GiB
)";

TEST(RunnerTest, KillsAndTimeOverBudgetWhileInfeasibleAreTheBudgets) {
  absl::StatusOr<Scenario> s = ParseScenario(kSqueeze);
  ASSERT_TRUE(s.ok()) << s.status();
  const RunResult limit = *RunScenario(*s, "limit");
  EXPECT_EQ(limit.infeasible_s, 121);  // 60 s to the end, both included
  // It cuts the hard parts to the budget: the balloons stop short of anon, and a's allocation
  // at 90 s finds no memory.
  EXPECT_GT(limit.oom_kills, 0);
  EXPECT_EQ(limit.budget_kills, limit.oom_kills);
  EXPECT_EQ(limit.policy_kills, 0);
  EXPECT_EQ(*MetricValue(limit, "kills.budget"), static_cast<double>(limit.oom_kills));
  EXPECT_LT(limit.safe_reclaimed_byte_s, 0.9 * limit.reclaimed_byte_s);
  const RunResult hold = *RunScenario(*s, "static");
  EXPECT_EQ(hold.budget_over_budget_s, 121);
  EXPECT_EQ(hold.over_budget_s, 0);  // 4 GiB within 6 GiB before the squeeze
  EXPECT_EQ(hold.oom_kills, 0);
  EXPECT_EQ(hold.safe_reclaimed_byte_s, 0);
}

// Four guests held at 1 GiB by `static` (it never grows anyone), each allocating 3 GiB from
// 33 s: each kill's cause names why the guest was still short. unseen (no agent, a report every
// 10 s from 1 s, 1 GiB/s) is killed before any report shows its allocation; seen (the agent,
// every 2 s, 64 MiB/s) is killed after decisions saw it; the stuck balloon and the guest whose
// stats stopped at 1 s (stale from 31 s) are named as such.
constexpr char kKills[] = R"(
scenario name=kills duration=100s tick=5s
host total=64GiB reserve=1GiB budget=32GiB
guest name=unseen max=4GiB min=256MiB start=1GiB cache=0 agent=false stats_period=10s alloc_rate=1GiB/s
phase guest=unseen at=0 anon=200MiB
phase guest=unseen at=33s anon=3GiB
guest name=seen max=4GiB min=256MiB start=1GiB cache=0 stats_period=2s alloc_rate=64MiB/s
phase guest=seen at=0 anon=200MiB
phase guest=seen at=33s anon=3GiB
guest name=stuck max=4GiB min=256MiB start=1GiB cache=0 behaviour=stuck behaviour_at=10s
phase guest=stuck at=0 anon=200MiB
phase guest=stuck at=33s anon=3GiB
guest name=blind max=4GiB min=256MiB start=1GiB cache=0 behaviour=stale behaviour_at=2s
phase guest=blind at=0 anon=200MiB
phase guest=blind at=33s anon=3GiB
)";

TEST(RunnerTest, EachKillHasACause) {
  absl::StatusOr<Scenario> s = ParseScenario(kKills);
  ASSERT_TRUE(s.ok()) << s.status();
  const RunResult r = *RunScenario(*s, "static");
  EXPECT_EQ(r.infeasible_s, 0);
  EXPECT_EQ(r.policy_kills, r.oom_kills);
  EXPECT_EQ(r.budget_kills, 0);
  int64_t named = 0;
  for (const auto& [cause, n] : r.kill_causes) named += n;
  EXPECT_EQ(named, r.oom_kills);
  EXPECT_GT(*MetricValue(r, "guest.unseen.oom_kills"), 0);
  EXPECT_EQ(*MetricValue(r, "kills.faster_than_stats_no_agent"),
            *MetricValue(r, "guest.unseen.oom_kills"));
  EXPECT_GT(*MetricValue(r, "guest.seen.oom_kills"), 0);
  EXPECT_EQ(*MetricValue(r, "kills.held_low"), *MetricValue(r, "guest.seen.oom_kills"));
  EXPECT_GT(*MetricValue(r, "kills.stuck_balloon"), 0);
  EXPECT_EQ(*MetricValue(r, "kills.stuck_balloon"), *MetricValue(r, "guest.stuck.oom_kills"));
  EXPECT_GT(*MetricValue(r, "kills.blind"), 0);
  EXPECT_EQ(*MetricValue(r, "kills.blind"), *MetricValue(r, "guest.blind.oom_kills"));
  EXPECT_EQ(*MetricValue(r, "kills.ceiling"), 0);
  EXPECT_EQ(*MetricValue(r, "kills.faster_than_stats"), 0);  // unseen has no agent
  EXPECT_EQ(*MetricValue(r, "kills.held_low_no_agent"), 0);   // seen has one
}

// RunOptions::balloon_pressure overrides every guest's balloon_pressure, and empty plays each
// as its scenario says. Generated case 13 of seed 3 (agentless): the law reads the balloon
// driver's OOM kills and direct scans and kills less with them (12 policy kills without, 4 with).
TEST(RunnerTest, BalloonPressureOverride) {
  Scenario s = GenerateScenario(3, 13);
  for (const GuestSpec& g : s.guests) ASSERT_FALSE(g.agent);
  RunOptions on, off, as_said;
  on.balloon_pressure = true;
  off.balloon_pressure = false;
  auto with_on = RunScenario(s, "pagecache", on);
  auto with_off = RunScenario(s, "pagecache", off);
  ASSERT_TRUE(with_on.ok() && with_off.ok());
  EXPECT_LT(with_on->policy_kills, with_off->policy_kills);
  for (bool said : {false, true}) {
    for (GuestSpec& g : s.guests) g.balloon_pressure = said;
    auto run = RunScenario(s, "pagecache", as_said);
    ASSERT_TRUE(run.ok());
    EXPECT_EQ(run->policy_kills, (said ? with_on : with_off)->policy_kills) << said;
    EXPECT_EQ(run->reclaimed_byte_s, (said ? with_on : with_off)->reclaimed_byte_s) << said;
  }
}

// RunOptions::stats_period overrides every guest's stats_period: the run is the one whose
// scenario says so.
TEST(RunnerTest, StatsPeriodOverride) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
scenario name=slow_stats duration=3m tick=1s
host total=8GiB reserve=512MiB
guest name=a max=1GiB min=128MiB agent=false start=400MiB
phase guest=a at=0 anon=150MiB
phase guest=a at=60s anon=200MiB
)");
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions slow;
  slow.stats_period = 20;
  absl::StatusOr<RunResult> r = RunScenario(*s, "pagecache", slow);
  ASSERT_TRUE(r.ok()) << r.status();
  s->guests[0].stats_period = 20;
  absl::StatusOr<RunResult> said = RunScenario(*s, "pagecache");
  ASSERT_TRUE(said.ok()) << said.status();
  EXPECT_EQ(said->churn_bytes, r->churn_bytes);
  EXPECT_EQ(said->reclaimed_byte_s, r->reclaimed_byte_s);
  EXPECT_EQ(said->decisions, r->decisions);
}

// The same agentless guest, reporting every 20 s under a 1 s tick, with a 50 MiB allocation its
// only demand: the law's own growth between reports must not read as demand (pagecache_law.h).
// Read so, the balloon ran to the ceiling and back: 1 GiB of traffic, where the allocation and
// the takes move 131 MiB.
TEST(RunnerTest, TheAgentlessFloorBetweenSlowReports) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
scenario name=slow_stats duration=3m tick=1s
host total=8GiB reserve=512MiB
guest name=a max=1GiB min=128MiB agent=false start=400MiB stats_period=20s
phase guest=a at=0 anon=150MiB
phase guest=a at=60s anon=200MiB
)");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<RunResult> r = RunScenario(*s, "pagecache");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*MetricValue(*r, "oom_kills"), 0);
  EXPECT_LT(*MetricValue(*r, "guest.a.traffic_mib"), 256);
}

// Two runs the same, field by field.
void ExpectSameRun(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.reclaimed_byte_s, b.reclaimed_byte_s);
  EXPECT_EQ(a.stall_s, b.stall_s);
  EXPECT_EQ(a.refault_bytes, b.refault_bytes);
  EXPECT_EQ(a.oom_kills, b.oom_kills);
  EXPECT_EQ(a.self_deflates, b.self_deflates);
  EXPECT_EQ(a.churn_bytes, b.churn_bytes);
  EXPECT_EQ(a.reversals, b.reversals);
  EXPECT_EQ(a.converge_s, b.converge_s);
  EXPECT_EQ(a.over_budget_byte_s, b.over_budget_byte_s);
  EXPECT_EQ(a.host_short_s, b.host_short_s);
  EXPECT_EQ(a.decisions, b.decisions);
  EXPECT_EQ(a.early_decisions, b.early_decisions);
  EXPECT_EQ(a.safe_reclaimed_byte_s, b.safe_reclaimed_byte_s);
  EXPECT_EQ(a.infeasible_s, b.infeasible_s);
  EXPECT_EQ(a.policy_kills, b.policy_kills);
  EXPECT_EQ(a.budget_kills, b.budget_kills);
  EXPECT_EQ(a.over_budget_s, b.over_budget_s);
  EXPECT_EQ(a.budget_over_budget_s, b.budget_over_budget_s);
  EXPECT_EQ(a.wide_reversals, b.wide_reversals);
  EXPECT_EQ(a.host_returned_byte_s, b.host_returned_byte_s);
  EXPECT_EQ(a.safe_returned_byte_s, b.safe_returned_byte_s);
  EXPECT_EQ(a.over_budget_rss_s, b.over_budget_rss_s);
  EXPECT_EQ(a.agent_reclaimed_bytes, b.agent_reclaimed_bytes);
  EXPECT_EQ(a.kill_causes, b.kill_causes);
  EXPECT_EQ(a.last_summary, b.last_summary);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.series.sum_actual, b.series.sum_actual);
  EXPECT_EQ(a.series.host_available, b.series.host_available);
  ASSERT_EQ(a.guests.size(), b.guests.size());
  for (size_t i = 0; i < a.guests.size(); ++i) {
    const GuestResult& x = a.guests[i];
    const GuestResult& y = b.guests[i];
    EXPECT_EQ(x.stall_s, y.stall_s) << x.name;
    EXPECT_EQ(x.refault_bytes, y.refault_bytes) << x.name;
    EXPECT_EQ(x.traffic_bytes, y.traffic_bytes) << x.name;
    EXPECT_EQ(x.disk_read_bytes, y.disk_read_bytes) << x.name;
    EXPECT_EQ(x.final_actual, y.final_actual) << x.name;
    EXPECT_EQ(x.final_target, y.final_target) << x.name;
    EXPECT_EQ(x.min_actual, y.min_actual) << x.name;
    EXPECT_EQ(x.mean_actual, y.mean_actual) << x.name;
    EXPECT_EQ(x.reclaimed_byte_s, y.reclaimed_byte_s) << x.name;
    EXPECT_EQ(x.safe_reclaimed_byte_s, y.safe_reclaimed_byte_s) << x.name;
    EXPECT_EQ(x.host_returned_byte_s, y.host_returned_byte_s) << x.name;
    EXPECT_EQ(x.safe_returned_byte_s, y.safe_returned_byte_s) << x.name;
    EXPECT_EQ(x.first_state_s, y.first_state_s) << x.name;
  }
}

// Guest a reads a file once and keeps it as cold cache; guest b re-reads a hot set beside its
// cold cache. The budget holds both at their ceilings.
constexpr char kReadOnce[] = R"(
scenario name=read_once duration=5m tick=5s
host total=8GiB reserve=512MiB budget=6GiB
guest name=a max=2GiB min=256MiB
phase guest=a at=0 anon=300MiB stream_rate=40MiB/s
phase guest=a at=30s anon=300MiB
guest name=b max=2GiB min=256MiB
phase guest=b at=0 anon=300MiB hot=400MiB hot_rate=20MiB/s
)";

// In-guest reclaim off (the default) is the run without the code path: a guest costs the host
// its balloon size, so the host gets back exactly what the balloons hold back, and nothing is
// reclaimed in a guest. On, the agents give their cold cache back with no balloon move and the
// host gets their free memory too.
TEST(RunnerTest, InGuestReclaimOnAndOff) {
  absl::StatusOr<Scenario> s = ParseScenario(kReadOnce);
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions traced;
  traced.trace_guest = "a";
  RunOptions off = traced;
  off.in_guest_reclaim = false;
  RunOptions on = traced;
  on.in_guest_reclaim = true;
  absl::StatusOr<RunResult> by_default = RunScenario(*s, "pagecache", traced);
  absl::StatusOr<RunResult> without = RunScenario(*s, "pagecache", off);
  absl::StatusOr<RunResult> with = RunScenario(*s, "pagecache", on);
  ASSERT_TRUE(by_default.ok() && without.ok() && with.ok());
  ExpectSameRun(*by_default, *without);
  EXPECT_EQ(without->host_returned_byte_s, without->reclaimed_byte_s);
  EXPECT_EQ(without->over_budget_rss_s, without->over_budget_s);
  EXPECT_EQ(without->safe_returned_byte_s, without->safe_reclaimed_byte_s);
  for (const GuestResult& g : without->guests) {
    EXPECT_EQ(g.host_returned_byte_s, g.reclaimed_byte_s) << g.name;
    EXPECT_EQ(g.agent_reclaimed_bytes, 0) << g.name;
  }
  EXPECT_THAT(without->trace.back(), Not(HasSubstr("pooled")));

  // The policy sees the mode: guest a's agent reclaims and its balloon reports free pages, so
  // once it lends a step it is pooled (policy/reclaim_pool.h).
  EXPECT_TRUE(std::any_of(with->trace.begin(), with->trace.end(), [](const std::string& line) {
    return line.find(" pooled rss=") != std::string::npos;
  }));
  EXPECT_GT(*MetricValue(*with, "guest.a.agent_reclaimed_mib"), 256);
  EXPECT_GT(*MetricValue(*with, "guest.b.agent_reclaimed_mib"), 256);
  EXPECT_GT(with->host_returned_byte_s, with->reclaimed_byte_s);
  // The agents took cold cache only: what the host got back above the working sets grew too.
  EXPECT_GT(with->safe_returned_byte_s, with->safe_reclaimed_byte_s);
  EXPECT_EQ(*MetricValue(*with, "agent_reclaimed_gib"), with->agent_reclaimed_bytes / kGib);
  EXPECT_EQ(*MetricValue(*with, "host_returned_gib_s"), with->host_returned_byte_s / kGib);
  EXPECT_EQ(with->oom_kills, 0);
}

}  // namespace
}  // namespace plimsoll::sim
