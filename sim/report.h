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

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_REPORT_H_
