#include "sim/corpus_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Less is worse for these; more is worse for the rest.
bool LowIsWorse(const std::string& measure) {
  return measure == "reclaimed_gib_s" || measure == "oracle_share" ||
         measure == "safe_reclaim_share" || measure == "host_returned_share" ||
         measure == "safe_returned_share";
}

// A measure's value for one case; absent for a missing oracle_share. A case that never fit is
// +infinity.
std::optional<double> Value(const CorpusMeasures& m, const std::string& measure) {
  if (measure == "reclaimed_gib_s") return m.reclaimed_gib_s;
  if (measure == "oracle_share") return m.oracle_share;
  if (measure == "stall_s") return m.stall_s;
  if (measure == "refault_gib") return m.refault_gib;
  if (measure == "oom_kills") return static_cast<double>(m.oom_kills);
  if (measure == "traffic_gib") return m.traffic_gib;
  if (measure == "reversals_per_guest_hour") return m.reversals_per_guest_hour;
  if (measure == "fit_s") return m.fit_s.value_or(kInf);
  if (measure == "safe_reclaim_share") return m.safe_reclaim_share;
  if (measure == "policy_kills") return static_cast<double>(m.policy_kills);
  if (measure == "over_budget_s") return m.over_budget_s;
  if (measure == "excess_stall_s") return m.excess_stall_s;
  if (measure == "traffic_per_safe_gib_s") return m.traffic_per_safe_gib_s;
  if (measure == "host_returned_share") return m.host_returned_share;
  if (measure == "safe_returned_share") return m.safe_returned_share;
  if (measure == "over_budget_rss_s") return m.over_budget_rss_s;
  return std::nullopt;
}

std::string Cell(double v, const std::string& measure) {
  if (std::isinf(v)) return "never";
  if (measure == "oracle_share" || measure == "safe_reclaim_share" ||
      measure == "host_returned_share" || measure == "safe_returned_share") {
    return absl::StrFormat("%.3f", v);
  }
  if (measure == "traffic_per_safe_gib_s") return absl::StrFormat("%.5f", v);
  if (measure == "reclaimed_gib_s" || measure == "fit_s") return absl::StrFormat("%.0f", v);
  if (measure == "oom_kills" || measure == "policy_kills") return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.2f", v);
}

std::string Table(const CorpusRun& run, bool cache_heavy_only) {
  static const char* kHeads[] = {"reclaimed GiB·s",   "oracle share", "stall s",
                                 "refaults GiB",      "OOM kills",    "traffic GiB",
                                 "reversals/guest·h", "fit s"};
  std::string out = "| policy |";
  for (const char* h : kHeads) absl::StrAppend(&out, " ", h, " |");
  absl::StrAppend(&out, " never fit |\n|---|");
  for (size_t i = 0; i <= CorpusMeasureNames().size(); ++i) absl::StrAppend(&out, "---:|");
  absl::StrAppend(&out, "\n");
  for (const std::string& policy : run.policies) {
    const std::vector<MeasureSummary> sums = SummarizePolicy(run, policy, cache_heavy_only);
    absl::StrAppend(&out, "| ", policy, " |");
    int never = 0;
    for (size_t i = 0; i < sums.size(); ++i) {
      const std::string& measure = CorpusMeasureNames()[i];
      if (sums[i].count == 0) {
        absl::StrAppend(&out, " - |");
        continue;
      }
      absl::StrAppend(&out, " ", Cell(sums[i].median, measure), " / ", Cell(sums[i].worst, measure),
                      " |");
    }
    for (const CorpusCase& c : run.cases) {
      if (cache_heavy_only && !c.cache_heavy) continue;
      auto it = c.results.find(policy);
      if (it != c.results.end() && !it->second.fit_s.has_value()) ++never;
    }
    absl::StrAppend(&out, " ", never, " |\n");
  }
  return out;
}

// The instruments: a row per policy, "median / worst decile" per measure, then the budget's
// kills and over-budget time and the kill causes, summed over the cases.
std::string InstrumentTable(const CorpusRun& run) {
  static const char* kHeads[] = {"safe reclaim share", "policy kills",
                                 "over budget s",      "excess stall s",
                                 "traffic / safe GiB·s", "reversals ≥2%/guest·h",
                                 "host returned share", "safe returned share",
                                 "over budget (RSS) s"};
  std::string out = "| policy |";
  for (const char* h : kHeads) absl::StrAppend(&out, " ", h, " |");
  absl::StrAppend(&out, " budget kills | budget over s | kill causes |\n|---|");
  for (size_t i = 0; i < InstrumentMeasureNames().size() + 2; ++i) absl::StrAppend(&out, "---:|");
  absl::StrAppend(&out, "---|\n");
  for (const std::string& policy : run.policies) {
    const std::vector<MeasureSummary> sums =
        SummarizeMeasures(run, policy, false, InstrumentMeasureNames());
    absl::StrAppend(&out, "| ", policy, " |");
    for (size_t i = 0; i < sums.size(); ++i) {
      const std::string& measure = InstrumentMeasureNames()[i];
      if (sums[i].count == 0) {
        absl::StrAppend(&out, " - |");
        continue;
      }
      absl::StrAppend(&out, " ", Cell(sums[i].median, measure), " / ", Cell(sums[i].worst, measure),
                      " |");
    }
    int64_t budget_kills = 0;
    double budget_over = 0;
    std::map<std::string, int64_t> causes;
    for (const CorpusCase& c : run.cases) {
      auto it = c.results.find(policy);
      if (it == c.results.end()) continue;
      budget_kills += it->second.budget_kills;
      budget_over += it->second.budget_over_budget_s;
      for (const auto& [cause, k] : it->second.kill_causes) causes[cause] += k;
    }
    std::vector<std::string> parts;
    for (const auto& [cause, k] : causes) parts.push_back(absl::StrCat(cause, "=", k));
    absl::StrAppend(&out, " ", budget_kills, " | ", absl::StrFormat("%.0f", budget_over), " | ",
                    parts.empty() ? "-" : absl::StrJoin(parts, " "), " |\n");
  }
  return out;
}

}  // namespace

double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double pos = q / 100 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0 || values[lo] == values[hi]) return values[lo];
  if (std::isinf(values[hi])) return kInf;
  return values[lo] + frac * (values[hi] - values[lo]);
}

const std::vector<std::string>& CorpusMeasureNames() {
  static const std::vector<std::string> names = {
      "reclaimed_gib_s", "oracle_share", "stall_s", "refault_gib", "oom_kills", "traffic_gib",
      "reversals_per_guest_hour", "fit_s"};
  return names;
}

const std::vector<std::string>& InstrumentMeasureNames() {
  static const std::vector<std::string> names = {
      "safe_reclaim_share", "policy_kills",           "over_budget_s",
      "excess_stall_s",     "traffic_per_safe_gib_s", "reversals_per_guest_hour",
      "host_returned_share", "safe_returned_share", "over_budget_rss_s"};
  return names;
}

std::vector<MeasureSummary> SummarizePolicy(const CorpusRun& run, const std::string& policy,
                                            bool cache_heavy_only) {
  return SummarizeMeasures(run, policy, cache_heavy_only, CorpusMeasureNames());
}

std::vector<MeasureSummary> SummarizeMeasures(const CorpusRun& run, const std::string& policy,
                                              bool cache_heavy_only,
                                              const std::vector<std::string>& measures) {
  std::vector<MeasureSummary> out;
  for (const std::string& measure : measures) {
    std::vector<double> values;
    for (const CorpusCase& c : run.cases) {
      if (cache_heavy_only && !c.cache_heavy) continue;
      auto it = c.results.find(policy);
      if (it == c.results.end()) continue;
      if (std::optional<double> v = Value(it->second, measure); v.has_value()) values.push_back(*v);
    }
    MeasureSummary s;
    s.count = static_cast<int>(values.size());
    if (!values.empty()) {
      s.median = Percentile(values, 50);
      s.worst = Percentile(values, LowIsWorse(measure) ? 10 : 90);
    }
    out.push_back(s);
  }
  return out;
}

std::string FormatCorpusTables(const CorpusRun& run) {
  int heavy = 0, agent = 0;
  for (const CorpusCase& c : run.cases) {
    heavy += c.cache_heavy ? 1 : 0;
    agent += c.agent ? 1 : 0;
  }
  std::string out = absl::StrFormat(
      "Scenario corpus: seed %d, %d cases (%d cache-heavy, %d with the agent on every guest); "
      "policies %s.\n"
      "Each cell: median / worst decile. The worst decile is the 90th percentile in the bad "
      "direction: the 10th percentile of reclaimed GiB·s and oracle share (less is worse), the "
      "90th of the others (more is worse). oracle share = reclaimed GiB·s / the oracle's on the "
      "same case. fit s: seconds until the guests' total stayed under the budget (never: still "
      "over at the end; counted as infinite).\n",
      run.seed, run.count, heavy, agent, absl::StrJoin(run.policies, ", "));
  absl::StrAppend(&out, "\nAll cases (", run.cases.size(), "):\n", Table(run, false));
  absl::StrAppend(&out, "\nCache-heavy cases (", heavy, "):\n", Table(run, true));
  double infeasible = 0, duration = 0;
  int infeasible_cases = 0;
  for (const CorpusCase& c : run.cases) {
    infeasible += c.infeasible_s;
    duration += c.duration_s;
    infeasible_cases += c.infeasible_s > 0 ? 1 : 0;
  }
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "\nInstruments (all cases; docs/instruments.md). safe reclaim share = reclaim above the "
          "guests' true working sets / the limit's; policy kills and over budget s count only "
          "the time the guests' hard demand fits the host budget (infeasible: %d cases, %.1f%% "
          "of the time; the budget's kills and over-budget seconds are summed apart); excess "
          "stall = stall beyond the limit's, guest by guest; reversals count only direction "
          "changes of at least 2%% of the guest's max; host returned share = the guests' ceilings "
          "less what they cost the host (RSS), over the run, / the oracle's (which plays without "
          "in-guest reclaim); safe returned share and over budget (RSS) s likewise count the "
          "guests at their RSS.\n",
          infeasible_cases, duration > 0 ? 100 * infeasible / duration : 0.0),
      InstrumentTable(run));
  return out;
}

std::string CorpusJson(const CorpusRun& run) {
  std::string out =
      absl::StrFormat("{\"seed\": %d, \"count\": %d, \"scenarios\": [", run.seed, run.count);
  for (size_t i = 0; i < run.cases.size(); ++i) {
    const CorpusCase& c = run.cases[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "{\"name\": \"", c.name,
                    "\", \"cache_heavy\": ", c.cache_heavy ? "true" : "false",
                    ", \"agent\": ", c.agent ? "true" : "false",
                    ", \"agent_guests\": ", c.agent_guests,
                    ", \"duration_s\": ", FormatJsonNumber(c.duration_s, 0),
                    ", \"infeasible_s\": ", FormatJsonNumber(c.infeasible_s, 0), ", \"results\": {");
    bool first = true;
    for (const std::string& policy : run.policies) {
      auto it = c.results.find(policy);
      if (it == c.results.end()) continue;
      const CorpusMeasures& m = it->second;
      absl::StrAppend(
          &out, first ? "" : ", ", "\"", policy, "\": {",
          "\"reclaimed_gib_s\": ", FormatJsonNumber(m.reclaimed_gib_s, 3),
          ", \"stall_s\": ", FormatJsonNumber(m.stall_s, 3), ", \"refault_gib\": ", FormatJsonNumber(m.refault_gib, 4),
          ", \"oom_kills\": ", m.oom_kills, ", \"traffic_gib\": ", FormatJsonNumber(m.traffic_gib, 3),
          ", \"reversals_per_guest_hour\": ", FormatJsonNumber(m.reversals_per_guest_hour, 3),
          ", \"fit_s\": ", m.fit_s.has_value() ? FormatJsonNumber(*m.fit_s, 0) : "null",
          ", \"oracle_share\": ", m.oracle_share.has_value() ? FormatJsonNumber(*m.oracle_share, 4) : "null",
          ", \"reversals_any_per_guest_hour\": ", FormatJsonNumber(m.reversals_any_per_guest_hour, 3),
          ", \"safe_reclaimed_gib_s\": ", FormatJsonNumber(m.safe_reclaimed_gib_s, 3),
          ", \"safe_reclaim_share\": ",
          m.safe_reclaim_share.has_value() ? FormatJsonNumber(*m.safe_reclaim_share, 4) : "null",
          ", \"policy_kills\": ", m.policy_kills, ", \"budget_kills\": ", m.budget_kills,
          ", \"over_budget_s\": ", FormatJsonNumber(m.over_budget_s, 0),
          ", \"budget_over_budget_s\": ", FormatJsonNumber(m.budget_over_budget_s, 0),
          ", \"excess_stall_s\": ", FormatJsonNumber(m.excess_stall_s, 3),
          ", \"traffic_per_safe_gib_s\": ",
          m.traffic_per_safe_gib_s.has_value() ? FormatJsonNumber(*m.traffic_per_safe_gib_s, 6)
                                               : "null",
          ", \"host_returned_gib_s\": ", FormatJsonNumber(m.host_returned_gib_s, 3),
          ", \"host_returned_share\": ",
          m.host_returned_share.has_value() ? FormatJsonNumber(*m.host_returned_share, 4) : "null",
          ", \"safe_returned_gib_s\": ", FormatJsonNumber(m.safe_returned_gib_s, 3),
          ", \"safe_returned_share\": ",
          m.safe_returned_share.has_value() ? FormatJsonNumber(*m.safe_returned_share, 4) : "null",
          ", \"over_budget_rss_s\": ", FormatJsonNumber(m.over_budget_rss_s, 0),
          ", \"kill_causes\": {");
      bool first_cause = true;
      for (const auto& [cause, k] : m.kill_causes) {
        absl::StrAppend(&out, first_cause ? "" : ", ", "\"", cause, "\": ", k);
        first_cause = false;
      }
      absl::StrAppend(&out, "}}");
      first = false;
    }
    absl::StrAppend(&out, "}}");
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace plimsoll::sim
