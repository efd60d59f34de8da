// Text tables of simulation results, for the simulate tool, test logs and docs/policy.md.
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_REPORT_H_
#define PLIMSOLL_SIM_REPORT_H_

#include <string>
#include <vector>

#include "sim/runner.h"

namespace plimsoll::sim {

// One Markdown table row per run: scenario, policy and the headline measures.
std::string FormatRunsTable(const std::vector<const RunResult*>& runs);

// Per-guest measures of one run, Markdown.
std::string FormatGuestsTable(const RunResult& run);

// The runs' headline and per-guest measures as one JSON object, for scripts that set a run
// beside something else (bench/calibrate.py sets each guest beside its real twin):
//   {"runs": [{"scenario": S, "policy": P, "duration_s": x, "reclaimed_gib_s": x, "stall_s": x,
//     "refault_gib": x, "oom_kills": n, "traffic_gib": x, "reversals": n,
//     "guests": {NAME: {"stall_s": x, "refault_mib": x, "oom_kills": n, "traffic_mib": x,
//       "disk_read_mib": x, "disk_read_requests": x, "reclaimed_gib_s": x,
//       "final_actual_mib": x}}}]}
std::string RunsJson(const std::vector<const RunResult*>& runs);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_REPORT_H_
