// Checks a scenario's `expect` lines against the runs of the policies they name.
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_EXPECTATIONS_H_
#define PLIMSOLL_SIM_EXPECTATIONS_H_

#include <map>
#include <string>
#include <vector>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

struct ExpectationOutcome {
  Expectation expectation;
  bool ok = false;
  // "line 12: pagecache reclaimed_gib_s > 1.5 * mom: 812.4 > 1.5 * 301.0 = 451.5: ok"
  std::string message;
};

// Every policy an expectation names (on either side), sorted, without duplicates.
std::vector<std::string> PoliciesNamed(const Scenario& scenario);

// One outcome per expectation, in file order. A policy with no run or a metric that does not
// exist makes that expectation fail with a message that says so.
std::vector<ExpectationOutcome> CheckExpectations(const Scenario& scenario,
                                                  const std::map<std::string, RunResult>& runs);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_EXPECTATIONS_H_
