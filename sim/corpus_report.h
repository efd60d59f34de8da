// What a corpus run (corpus.h) prints: per policy the median and the worst decile of each
// measure, over all cases and over the cache-heavy ones, and the JSON anyone can score a run
// from:
//
//   {"seed": N, "count": K, "scenarios": [{"name": ..., "cache_heavy": true|false,
//     "agent": true|false, "agent_guests": n, "duration_s": x, "infeasible_s": x,
//     "results": {POLICY: {"reclaimed_gib_s": x, "stall_s": x,
//     "refault_gib": x, "oom_kills": n, "traffic_gib": x, "reversals_per_guest_hour": x,
//     "fit_s": x or null, "oracle_share": x or null, "reversals_any_per_guest_hour": x,
//     "safe_reclaimed_gib_s": x, "safe_reclaim_share": x or null, "policy_kills": n,
//     "budget_kills": n, "over_budget_s": x, "budget_over_budget_s": x, "excess_stall_s": x,
//     "traffic_per_safe_gib_s": x or null, "host_returned_gib_s": x,
//     "host_returned_share": x or null, "safe_returned_gib_s": x,
//     "safe_returned_share": x or null, "over_budget_rss_s": x,
//     "kill_causes": {CAUSE: n, ...}}, ...}}, ...]}
//
// The worst decile is the 90th percentile in the bad direction: the 10th percentile of
// reclaimed_gib_s and the shares (less is worse), the 90th of the others
// (more is worse). Percentiles interpolate linearly between order statistics (numpy.percentile's default). A
// case that never fit counts as an infinite fit_s ("never"); a case without oracle_share (or
// safe_reclaim_share, traffic_per_safe_gib_s) is left out of that measure.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_CORPUS_REPORT_H_
#define PLIMSOLL_SIM_CORPUS_REPORT_H_

#include <string>
#include <vector>

#include "sim/corpus.h"

namespace plimsoll::sim {

// The q-th percentile (0..100) of `values` (not empty), linear between order statistics; an
// interpolation that touches +infinity is +infinity.
double Percentile(std::vector<double> values, double q);

struct MeasureSummary {
  double median = 0;
  double worst = 0;  // the worst decile, as above
  int count = 0;     // cases with a value
};

// The summaries of one policy over the cases `keep` selects, measure by measure in the order
// of CorpusMeasureNames().
std::vector<MeasureSummary> SummarizePolicy(const CorpusRun& run, const std::string& policy,
                                            bool cache_heavy_only);

// "reclaimed_gib_s", "oracle_share", "stall_s", "refault_gib", "oom_kills", "traffic_gib",
// "reversals_per_guest_hour", "fit_s".
const std::vector<std::string>& CorpusMeasureNames();

// The instruments (docs/instruments.md): "safe_reclaim_share", "policy_kills", "over_budget_s",
// "excess_stall_s", "traffic_per_safe_gib_s", "reversals_per_guest_hour", "host_returned_share",
// "safe_returned_share", "over_budget_rss_s".
const std::vector<std::string>& InstrumentMeasureNames();

// SummarizePolicy over the measures named (any of the two lists above).
std::vector<MeasureSummary> SummarizeMeasures(const CorpusRun& run, const std::string& policy,
                                              bool cache_heavy_only,
                                              const std::vector<std::string>& measures);

// The header (what the cells mean), and one Markdown table for all cases and one for the
// cache-heavy ones: a row per policy, "median / worst decile" per measure; then the
// instruments' table over all cases, with the budget's kills, its over-budget seconds and the
// kill causes summed per policy.
std::string FormatCorpusTables(const CorpusRun& run);

// The JSON above, one line per case.
std::string CorpusJson(const CorpusRun& run);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_CORPUS_REPORT_H_
