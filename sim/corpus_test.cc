#include "sim/corpus.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/corpus_report.h"
#include "sim/runner.h"
#include "sim/scenario_generator.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

using ::testing::HasSubstr;

// A strict little JSON reader: enough to read the corpus's output back as any script would.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double number = 0;
  std::string str;
  std::vector<Json> array;
  std::map<std::string, Json> object;
  std::vector<std::string> keys;  // in order

  const Json& at(const std::string& key) const {
    static const Json missing;
    auto it = object.find(key);
    return it == object.end() ? missing : it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  bool Read(Json* out) {
    if (!Value(out)) return false;
    Space();
    return i_ == s_.size();
  }

 private:
  void Space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' || static_cast<unsigned char>(s_[i_]) < 0x20) return false;  // not used
      out->push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  bool Value(Json* out) {
    Space();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      out->kind = Json::kObject;
      ++i_;
      Space();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        Space();
        std::string key;
        if (!String(&key) || out->object.count(key)) return false;
        Space();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        Json v;
        if (!Value(&v)) return false;
        out->keys.push_back(key);
        out->object[key] = std::move(v);
        Space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        return i_ < s_.size() && s_[i_++] == '}';
      }
    }
    if (c == '[') {
      out->kind = Json::kArray;
      ++i_;
      Space();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      while (true) {
        Json v;
        if (!Value(&v)) return false;
        out->array.push_back(std::move(v));
        Space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        return i_ < s_.size() && s_[i_++] == ']';
      }
    }
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->str);
    }
    if (Literal("true")) return out->kind = Json::kBool, out->b = true, true;
    if (Literal("false")) return out->kind = Json::kBool, out->b = false, true;
    if (Literal("null")) return out->kind = Json::kNull, true;
    // A JSON number: -?digits[.digits][e[+-]digits]
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    out->kind = Json::kNumber;
    out->number = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
};

const std::vector<std::string> kPolicies = {"pagecache", "mom", "proxmox"};

// One small corpus for the tests that read it: five cases of seed 1.
const CorpusRun& Five() {
  static const CorpusRun* run = [] {
    absl::StatusOr<CorpusRun> r = RunCorpus(1, 5, kPolicies);
    EXPECT_TRUE(r.ok()) << r.status();
    return new CorpusRun(*r);
  }();
  return *run;
}

TEST(CorpusTest, PlaysEveryPolicyAndTheOracleOnEveryCase) {
  const CorpusRun& run = Five();
  EXPECT_EQ(run.seed, 1u);
  EXPECT_EQ(run.count, 5);
  EXPECT_EQ(run.policies,
            (std::vector<std::string>{"pagecache", "mom", "proxmox", "oracle", "limit"}));
  ASSERT_EQ(run.cases.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const CorpusCase& c = run.cases[i];
    const Scenario s = GenerateScenario(1, i);
    EXPECT_EQ(c.name, s.name);
    EXPECT_EQ(c.guests, s.guests.size());
    EXPECT_EQ(c.cache_heavy, c.cache_share >= 0.5);
    EXPECT_GT(c.cache_share, 0);
    EXPECT_LT(c.cache_share, 1);
    bool all_agent = true;
    for (const GuestSpec& g : s.guests) all_agent &= g.agent;
    EXPECT_EQ(c.agent, all_agent);
    size_t agents = 0;
    for (const GuestSpec& g : s.guests) agents += g.agent ? 1 : 0;
    EXPECT_EQ(c.agent_guests, agents);
    ASSERT_EQ(c.results.size(), 5u);
    EXPECT_EQ(c.duration_s, s.duration);
    EXPECT_GE(c.infeasible_s, 0);
    EXPECT_LE(c.infeasible_s, c.duration_s);
    const CorpusMeasures& oracle = c.results.at("oracle");
    EXPECT_GT(oracle.reclaimed_gib_s, 0);
    ASSERT_TRUE(oracle.oracle_share.has_value());
    EXPECT_DOUBLE_EQ(*oracle.oracle_share, 1);
    const CorpusMeasures& limit = c.results.at("limit");
    EXPECT_GT(limit.safe_reclaimed_gib_s, 0);
    ASSERT_TRUE(limit.safe_reclaim_share.has_value());
    EXPECT_DOUBLE_EQ(*limit.safe_reclaim_share, 1);
    EXPECT_EQ(limit.excess_stall_s, 0);
    for (const std::string& p : run.policies) {
      const CorpusMeasures& m = c.results.at(p);
      ASSERT_TRUE(m.oracle_share.has_value());
      EXPECT_DOUBLE_EQ(*m.oracle_share, m.reclaimed_gib_s / oracle.reclaimed_gib_s);
      ASSERT_TRUE(m.safe_reclaim_share.has_value());
      EXPECT_DOUBLE_EQ(*m.safe_reclaim_share, m.safe_reclaimed_gib_s / limit.safe_reclaimed_gib_s);
      // Memory taken from a working set earns nothing: safe reclaim is part of the reclaim.
      EXPECT_LE(m.safe_reclaimed_gib_s, m.reclaimed_gib_s + 1e-9) << p;
      EXPECT_GE(m.excess_stall_s, 0);
      // Every kill is the policy's or the budget's, and has a cause.
      EXPECT_EQ(m.policy_kills + m.budget_kills, m.oom_kills) << p;
      int64_t named = 0;
      for (const auto& [cause, k] : m.kill_causes) named += k;
      EXPECT_EQ(named, m.oom_kills) << p;
      if (c.infeasible_s == 0) {
        EXPECT_EQ(m.budget_kills, 0) << p;
        EXPECT_EQ(m.budget_over_budget_s, 0) << p;
      }
      EXPECT_LE(m.over_budget_s + m.budget_over_budget_s, c.duration_s) << p;
      ASSERT_TRUE(m.traffic_per_safe_gib_s.has_value()) << p;
      EXPECT_DOUBLE_EQ(*m.traffic_per_safe_gib_s, m.traffic_gib / m.safe_reclaimed_gib_s);
      EXPECT_LE(m.reversals_per_guest_hour, m.reversals_any_per_guest_hour + 1e-9) << p;
      // Without in-guest reclaim a guest costs the host its balloon size.
      EXPECT_EQ(m.host_returned_gib_s, m.reclaimed_gib_s) << p;
      ASSERT_TRUE(m.host_returned_share.has_value()) << p;
      EXPECT_DOUBLE_EQ(*m.host_returned_share, *m.oracle_share) << p;
      EXPECT_EQ(m.over_budget_rss_s, m.over_budget_s) << p;
      EXPECT_EQ(m.safe_returned_gib_s, m.safe_reclaimed_gib_s) << p;
      ASSERT_TRUE(m.safe_returned_share.has_value()) << p;
      EXPECT_DOUBLE_EQ(*m.safe_returned_share, *m.safe_reclaim_share) << p;
    }
  }
  // Not every case is alike: the five hold cache-heavy and other cases, with and without agents.
  int heavy = 0, agent = 0;
  for (const CorpusCase& c : run.cases) {
    heavy += c.cache_heavy;
    agent += c.agent;
  }
  EXPECT_GT(heavy, 0);
  EXPECT_LT(heavy, 5);
  EXPECT_GT(agent, 0);
  EXPECT_LT(agent, 5);
}

// The corpus's measures are the runner's, case by case: what a printed case replays to.
TEST(CorpusTest, MeasuresAreTheRunnersOnThePrintedCase) {
  const CorpusCase& c = Five().cases[2];
  const Scenario s = GenerateScenario(1, 2);
  absl::StatusOr<Scenario> printed = ParseScenario(FormatScenario(s));
  ASSERT_TRUE(printed.ok());
  absl::StatusOr<RunResult> r = RunScenario(*printed, "mom");
  ASSERT_TRUE(r.ok());
  const CorpusMeasures& m = c.results.at("mom");
  EXPECT_DOUBLE_EQ(m.reclaimed_gib_s, r->reclaimed_byte_s / kGib);
  EXPECT_DOUBLE_EQ(m.stall_s, r->stall_s);
  EXPECT_DOUBLE_EQ(m.refault_gib, r->refault_bytes / kGib);
  EXPECT_EQ(m.oom_kills, r->oom_kills);
  EXPECT_DOUBLE_EQ(m.traffic_gib, r->churn_bytes / kGib);
  EXPECT_DOUBLE_EQ(m.reversals_any_per_guest_hour,
                   r->reversals / (s.guests.size() * s.duration / 3600));
  EXPECT_DOUBLE_EQ(m.reversals_per_guest_hour,
                   r->wide_reversals / (s.guests.size() * s.duration / 3600));
  EXPECT_DOUBLE_EQ(m.safe_reclaimed_gib_s, r->safe_reclaimed_byte_s / kGib);
  EXPECT_EQ(m.policy_kills, r->policy_kills);
  EXPECT_EQ(m.over_budget_s, r->over_budget_s);
  EXPECT_EQ(m.kill_causes, r->kill_causes);
  // Excess stall: guest by guest, what mom stalled beyond the limit.
  absl::StatusOr<RunResult> limit = RunScenario(*printed, "limit");
  ASSERT_TRUE(limit.ok());
  double excess = 0;
  for (size_t i = 0; i < r->guests.size(); ++i) {
    excess += std::max(0.0, r->guests[i].stall_s - limit->guests[i].stall_s);
  }
  EXPECT_DOUBLE_EQ(m.excess_stall_s, excess);
  EXPECT_GE(excess, r->stall_s - limit->stall_s);  // never less than the totals' difference
}

TEST(CorpusTest, MeasuresOfARun) {
  RunResult r;
  r.duration = 1800;
  r.reclaimed_byte_s = 10 * kGib;
  r.churn_bytes = 3 * kGib;
  r.reversals = 6;
  r.wide_reversals = 2;
  r.converge_s = 40;
  r.safe_reclaimed_byte_s = 6 * kGib;
  r.policy_kills = 2;
  r.budget_kills = 1;
  r.oom_kills = 3;
  CorpusMeasures m = MeasuresOf(r, 4);
  EXPECT_EQ(m.reclaimed_gib_s, 10);
  EXPECT_EQ(m.traffic_gib, 3);
  EXPECT_EQ(m.reversals_any_per_guest_hour, 3);  // 6 over 4 guests * 0.5 h
  EXPECT_EQ(m.reversals_per_guest_hour, 1);      // the wide ones: 2 over 2 guest-hours
  EXPECT_EQ(m.safe_reclaimed_gib_s, 6);
  EXPECT_EQ(*m.traffic_per_safe_gib_s, 0.5);
  EXPECT_EQ(m.policy_kills, 2);
  EXPECT_EQ(m.budget_kills, 1);
  EXPECT_EQ(*m.fit_s, 40);
  r.converge_s = -1;  // still over the budget at the end
  EXPECT_FALSE(MeasuresOf(r, 4).fit_s.has_value());
  r.converge_s = 0;  // never over it
  EXPECT_EQ(*MeasuresOf(r, 4).fit_s, 0);
}

// Case i is the same whatever the count and the threads: the first two cases of a two-thread
// run of two are those of the one-thread run of five.
TEST(CorpusTest, TheSameWhateverTheCountAndThreads) {
  absl::StatusOr<CorpusRun> two = RunCorpus(1, 2, kPolicies, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  for (int i = 0; i < 2; ++i) {
    for (const std::string& p : two->policies) {
      const CorpusMeasures& a = two->cases[i].results.at(p);
      const CorpusMeasures& b = Five().cases[i].results.at(p);
      EXPECT_EQ(a.reclaimed_gib_s, b.reclaimed_gib_s) << i << " " << p;
      EXPECT_EQ(a.stall_s, b.stall_s);
      EXPECT_EQ(a.traffic_gib, b.traffic_gib);
      EXPECT_EQ(a.fit_s, b.fit_s);
    }
  }
}

// With in-guest reclaim the policies play with it and the references without: the oracle's and
// the limit's measures are those of the run without it, and the host gets back more than the
// balloons hold (the free pages they report).
TEST(CorpusTest, InGuestReclaimLeavesTheReferencesAlone) {
  RunOptions options;
  options.in_guest_reclaim = true;
  absl::StatusOr<CorpusRun> on = RunCorpus(1, 2, {"pagecache"}, 2, nullptr, options);
  ASSERT_TRUE(on.ok()) << on.status();
  for (int i = 0; i < 2; ++i) {
    for (const char* p : {"oracle", "limit"}) {
      const CorpusMeasures& a = on->cases[i].results.at(p);
      const CorpusMeasures& b = Five().cases[i].results.at(p);
      EXPECT_EQ(a.reclaimed_gib_s, b.reclaimed_gib_s) << i << " " << p;
      EXPECT_EQ(a.safe_reclaimed_gib_s, b.safe_reclaimed_gib_s) << i << " " << p;
      EXPECT_EQ(a.stall_s, b.stall_s) << i << " " << p;
      EXPECT_EQ(a.host_returned_gib_s, b.host_returned_gib_s) << i << " " << p;
    }
    const CorpusMeasures& m = on->cases[i].results.at("pagecache");
    EXPECT_GT(m.host_returned_gib_s, m.reclaimed_gib_s) << i;
    // A guest costs at most its balloon size.
    EXPECT_LE(m.over_budget_rss_s, m.over_budget_s) << i;
    // Returned above the working sets: at least what the balloons hold there, at most all returned.
    EXPECT_GE(m.safe_returned_gib_s, m.safe_reclaimed_gib_s) << i;
    EXPECT_LE(m.safe_returned_gib_s, m.host_returned_gib_s) << i;
    ASSERT_TRUE(m.host_returned_share.has_value());
    EXPECT_DOUBLE_EQ(*m.host_returned_share,
                     m.host_returned_gib_s / on->cases[i].results.at("oracle").host_returned_gib_s);
  }
}

TEST(CorpusTest, BadArguments) {
  EXPECT_EQ(RunCorpus(1, 0, kPolicies).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunCorpus(1, 1, {"magic"}).status().code(), absl::StatusCode::kInvalidArgument);
}

// numpy.percentile's default (linear) gives the same.
TEST(CorpusReportTest, PercentilesInterpolateLinearly) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90), 9.1);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 10), 1.9);
  EXPECT_DOUBLE_EQ(Percentile({7}, 90), 7);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(Percentile({1, 2, inf}, 90)));  // a case that never fit
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, inf}, 50), 2.5);
}

// Worst means low for reclaim and oracle share, high for the harms.
TEST(CorpusReportTest, TheWorstDecileIsInTheBadDirection) {
  CorpusRun run;
  run.policies = {"p"};
  for (int i = 1; i <= 10; ++i) {
    CorpusCase c;
    c.cache_heavy = i <= 5;
    CorpusMeasures m;
    m.reclaimed_gib_s = i;
    m.oracle_share = i / 10.0;
    m.stall_s = i;
    m.fit_s = i == 10 ? std::nullopt : std::optional<double>(i);
    c.results["p"] = m;
    run.cases.push_back(c);
  }
  const std::vector<std::string>& names = CorpusMeasureNames();
  ASSERT_EQ(names[0], "reclaimed_gib_s");
  ASSERT_EQ(names[1], "oracle_share");
  ASSERT_EQ(names[2], "stall_s");
  ASSERT_EQ(names[7], "fit_s");
  const std::vector<MeasureSummary> all = SummarizePolicy(run, "p", false);
  EXPECT_DOUBLE_EQ(all[0].median, 5.5);
  EXPECT_DOUBLE_EQ(all[0].worst, 1.9);
  EXPECT_DOUBLE_EQ(all[1].worst, 0.19);
  EXPECT_DOUBLE_EQ(all[2].worst, 9.1);
  EXPECT_TRUE(std::isinf(all[7].worst));
  EXPECT_EQ(all[7].count, 10);
  const std::vector<MeasureSummary> heavy = SummarizePolicy(run, "p", true);
  EXPECT_EQ(heavy[0].count, 5);
  EXPECT_DOUBLE_EQ(heavy[0].median, 3);
  const std::string tables = FormatCorpusTables(run);
  EXPECT_THAT(tables, HasSubstr("median / worst decile"));
  EXPECT_THAT(tables, HasSubstr("the 10th percentile of reclaimed GiB·s"));
  EXPECT_THAT(tables, HasSubstr("| p | 6 / 2 | 0.550 / 0.190 | 5.50 / 9.10 |"));
  EXPECT_THAT(tables, HasSubstr("| 6 / never | 1 |"));  // fit s, and one case never fit
  EXPECT_THAT(tables, HasSubstr("Cache-heavy cases (5):"));
}

// The instruments: the worst decile of the safe share is its 10th percentile, of the harms their
// 90th; the table sums the budget's kills and every kill cause per policy.
TEST(CorpusReportTest, TheInstrumentsTable) {
  CorpusRun run;
  run.policies = {"p"};
  for (int i = 1; i <= 10; ++i) {
    CorpusCase c;
    c.duration_s = 600;
    c.infeasible_s = i == 10 ? 60 : 0;
    CorpusMeasures m;
    m.safe_reclaim_share = i / 10.0;
    m.policy_kills = i;
    m.excess_stall_s = i;
    m.budget_kills = i == 10 ? 4 : 0;
    m.host_returned_share = 2 - i / 10.0;
    m.kill_causes = {{"held_low", i}};
    if (i == 10) m.kill_causes["budget"] = 4;
    c.results["p"] = m;
    run.cases.push_back(c);
  }
  const std::vector<std::string>& names = InstrumentMeasureNames();
  ASSERT_EQ(names[0], "safe_reclaim_share");
  ASSERT_EQ(names[1], "policy_kills");
  ASSERT_EQ(names[3], "excess_stall_s");
  ASSERT_EQ(names[6], "host_returned_share");
  ASSERT_EQ(names[7], "safe_returned_share");
  ASSERT_EQ(names[8], "over_budget_rss_s");
  const std::vector<MeasureSummary> sums = SummarizeMeasures(run, "p", false, names);
  EXPECT_DOUBLE_EQ(sums[0].median, 0.55);
  EXPECT_DOUBLE_EQ(sums[0].worst, 0.19);
  EXPECT_DOUBLE_EQ(sums[1].worst, 9.1);
  EXPECT_DOUBLE_EQ(sums[3].worst, 9.1);
  EXPECT_EQ(sums[4].count, 0);  // no traffic_per_safe_gib_s in any case
  const std::string tables = FormatCorpusTables(run);
  EXPECT_THAT(tables, HasSubstr("infeasible: 1 cases, 1.0% of the time"));
  EXPECT_THAT(tables, HasSubstr("| p | 0.550 / 0.190 | 5.5 / 9.1 |"));
  EXPECT_THAT(tables, HasSubstr("host returned share |"));
  // Less is worse: its worst decile is the 10th percentile, as the safe share's.
  EXPECT_THAT(tables,
              HasSubstr("| 1.450 / 1.090 | - | 0.00 / 0.00 | 4 | 0 | budget=4 held_low=55 |"));
}

// The JSON reads back, has the keys the issue names, and holds the run's numbers.
TEST(CorpusReportTest, JsonHasTheShapeScriptsRead) {
  const CorpusRun& run = Five();
  const std::string text = CorpusJson(run);
  Json root;
  ASSERT_TRUE(JsonReader(text).Read(&root)) << text.substr(0, 2000);
  ASSERT_EQ(root.kind, Json::kObject);
  EXPECT_EQ(root.keys, (std::vector<std::string>{"seed", "count", "scenarios"}));
  EXPECT_EQ(root.at("seed").number, 1);
  EXPECT_EQ(root.at("count").number, 5);
  const Json& scenarios = root.at("scenarios");
  ASSERT_EQ(scenarios.kind, Json::kArray);
  ASSERT_EQ(scenarios.array.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const Json& s = scenarios.array[i];
    const CorpusCase& c = run.cases[i];
    EXPECT_EQ(s.keys, (std::vector<std::string>{"name", "cache_heavy", "agent", "agent_guests",
                                                "duration_s", "infeasible_s", "results"}));
    EXPECT_EQ(s.at("agent_guests").number, static_cast<double>(c.agent_guests));
    EXPECT_EQ(s.at("duration_s").number, c.duration_s);
    EXPECT_NEAR(s.at("infeasible_s").number, c.infeasible_s, 0.5);
    EXPECT_EQ(s.at("name").str, c.name);
    ASSERT_EQ(s.at("cache_heavy").kind, Json::kBool);
    EXPECT_EQ(s.at("cache_heavy").b, c.cache_heavy);
    EXPECT_EQ(s.at("agent").b, c.agent);
    const Json& results = s.at("results");
    EXPECT_EQ(results.keys,
              (std::vector<std::string>{"pagecache", "mom", "proxmox", "oracle", "limit"}));
    for (const std::string& p : results.keys) {
      const Json& r = results.at(p);
      const CorpusMeasures& m = c.results.at(p);
      EXPECT_EQ(r.keys,
                (std::vector<std::string>{
                    "reclaimed_gib_s", "stall_s", "refault_gib", "oom_kills", "traffic_gib",
                    "reversals_per_guest_hour", "fit_s", "oracle_share",
                    "reversals_any_per_guest_hour", "safe_reclaimed_gib_s", "safe_reclaim_share",
                    "policy_kills", "budget_kills", "over_budget_s", "budget_over_budget_s",
                    "excess_stall_s", "traffic_per_safe_gib_s", "host_returned_gib_s",
                    "host_returned_share", "safe_returned_gib_s", "safe_returned_share",
                    "over_budget_rss_s", "kill_causes"}));
      EXPECT_NEAR(r.at("safe_reclaim_share").number, *m.safe_reclaim_share, 0.0001);
      EXPECT_EQ(r.at("policy_kills").number, m.policy_kills);
      EXPECT_EQ(r.at("budget_kills").number, m.budget_kills);
      EXPECT_NEAR(r.at("excess_stall_s").number, m.excess_stall_s, 0.001);
      EXPECT_NEAR(r.at("traffic_per_safe_gib_s").number, *m.traffic_per_safe_gib_s, 1e-6);
      EXPECT_NEAR(r.at("host_returned_gib_s").number, m.host_returned_gib_s, 0.001);
      EXPECT_NEAR(r.at("host_returned_share").number, *m.host_returned_share, 0.0001);
      EXPECT_NEAR(r.at("safe_returned_share").number, *m.safe_returned_share, 0.0001);
      EXPECT_EQ(r.at("over_budget_rss_s").number, m.over_budget_rss_s);
      ASSERT_EQ(r.at("kill_causes").kind, Json::kObject);
      for (const auto& [cause, k] : m.kill_causes) {
        EXPECT_EQ(r.at("kill_causes").at(cause).number, k) << cause;
      }
      EXPECT_NEAR(r.at("reclaimed_gib_s").number, m.reclaimed_gib_s, 0.001);
      EXPECT_NEAR(r.at("stall_s").number, m.stall_s, 0.001);
      EXPECT_NEAR(r.at("refault_gib").number, m.refault_gib, 0.0001);
      EXPECT_EQ(r.at("oom_kills").number, m.oom_kills);
      EXPECT_NEAR(r.at("traffic_gib").number, m.traffic_gib, 0.001);
      EXPECT_NEAR(r.at("reversals_per_guest_hour").number, m.reversals_per_guest_hour, 0.001);
      if (m.fit_s.has_value()) {
        EXPECT_EQ(r.at("fit_s").kind, Json::kNumber);
        EXPECT_NEAR(r.at("fit_s").number, *m.fit_s, 0.5);
      } else {
        EXPECT_EQ(r.at("fit_s").kind, Json::kNull);
      }
      EXPECT_NEAR(r.at("oracle_share").number, *m.oracle_share, 0.0001);
    }
  }
  // The reader is strict: it rejects what is not JSON.
  Json bad;
  EXPECT_FALSE(JsonReader("{\"a\": 1,}").Read(&bad));
  EXPECT_FALSE(JsonReader("{\"a\": nan}").Read(&bad));
}

}  // namespace
}  // namespace plimsoll::sim
