#include "sim/expectations.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll::sim {
namespace {

bool Compare(double lhs, CompareOp op, double rhs) {
  switch (op) {
    case CompareOp::kLess:
      return lhs < rhs;
    case CompareOp::kLessEqual:
      return lhs <= rhs;
    case CompareOp::kGreater:
      return lhs > rhs;
    case CompareOp::kGreaterEqual:
      return lhs >= rhs;
    case CompareOp::kEqual:
      return lhs == rhs;
  }
  return false;
}

std::string Number(double v) { return absl::StrFormat("%.6g", v); }

}  // namespace

std::vector<std::string> PoliciesNamed(const Scenario& scenario) {
  std::vector<std::string> names;
  for (const Expectation& e : scenario.expectations) {
    names.push_back(e.policy);
    if (e.other_policy.has_value()) names.push_back(*e.other_policy);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<ExpectationOutcome> CheckExpectations(const Scenario& scenario,
                                                  const std::map<std::string, RunResult>& runs) {
  std::vector<ExpectationOutcome> outcomes;
  for (const Expectation& e : scenario.expectations) {
    ExpectationOutcome o;
    o.expectation = e;
    const std::string head = absl::StrCat("line ", e.line, ": ", e.text, ": ");
    auto fail = [&](const std::string& why) {
      o.ok = false;
      o.message = absl::StrCat(head, why);
    };
    auto lhs_run = runs.find(e.policy);
    if (lhs_run == runs.end()) {
      fail(absl::StrCat("no run of policy ", e.policy));
      outcomes.push_back(o);
      continue;
    }
    absl::StatusOr<double> lhs = MetricValue(lhs_run->second, e.metric);
    if (!lhs.ok()) {
      fail(std::string(lhs.status().message()));
      outcomes.push_back(o);
      continue;
    }
    double rhs = e.value;
    std::string rhs_text = Number(rhs);
    if (e.other_policy.has_value()) {
      auto rhs_run = runs.find(*e.other_policy);
      if (rhs_run == runs.end()) {
        fail(absl::StrCat("no run of policy ", *e.other_policy));
        outcomes.push_back(o);
        continue;
      }
      const std::string other_metric = e.other_metric.value_or(e.metric);
      absl::StatusOr<double> other = MetricValue(rhs_run->second, other_metric);
      if (!other.ok()) {
        fail(std::string(other.status().message()));
        outcomes.push_back(o);
        continue;
      }
      rhs = e.factor * *other;
      rhs_text = absl::StrCat(Number(e.factor), " * ", Number(*other), " (", *e.other_policy, " ",
                              other_metric, ") = ", Number(rhs));
    }
    o.ok = Compare(*lhs, e.op, rhs);
    o.message = absl::StrCat(head, Number(*lhs), " ", CompareOpText(e.op), " ", rhs_text, ": ",
                             o.ok ? "ok" : "FAILED");
    outcomes.push_back(o);
  }
  return outcomes;
}

}  // namespace plimsoll::sim
