// The safety rules every policy must keep, checked for every policy policy::MakePolicy knows on
// every bundled scenario: a policy never asks to shrink a guest without fresh stats (the daemon
// would refuse, but it must not ask: sim/runner.h unsafe_shrink_asks), and never asks for less
// than a guest's min (its configured floor: below_min_asks). A policy added to the registry is
// checked here without a line changed. The simulator's two oracles read the model's truth, not
// the stats, so only the second rule is theirs (the simulator refuses their blind shrinks as
// plimsolld would).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "policy/policy.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace plimsoll::sim {
namespace {

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator("sim/scenarios")) {
    if (entry.path().extension() == ".scenario") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool IsOracle(const std::string& name) { return name == "oracle" || name == "limit"; }

std::vector<std::string> EveryPolicy() {
  std::vector<std::string> names = policy::PolicyNames();
  names.push_back("oracle");
  names.push_back("limit");
  return names;
}

class SafetyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SafetyTest, NoShrinkOnBadStatsAndNeverBelowMin) {
  for (const std::string& file : ScenarioFiles()) {
    absl::StatusOr<Scenario> scenario = LoadScenarioFile(file);
    ASSERT_TRUE(scenario.ok()) << scenario.status();
    absl::StatusOr<RunResult> run = RunScenario(*scenario, GetParam());
    ASSERT_TRUE(run.ok()) << run.status();
    for (const GuestResult& g : run->guests) {
      if (!IsOracle(GetParam())) {
        EXPECT_EQ(g.unsafe_shrink_asks, 0) << scenario->name << " " << g.name;
      }
      EXPECT_EQ(g.below_min_asks, 0) << scenario->name << " " << g.name;
    }
  }
}

// Every registered policy is here, and the two oracles.
TEST(SafetyTest, EveryRegisteredPolicyIsChecked) {
  EXPECT_EQ(EveryPolicy(),
            (std::vector<std::string>{"mom", "static", "pagecache", "proxmox", "oracle", "limit"}));
}

// The check catches a policy that shrinks on what it cannot see: the oracle, which ignores the
// stats, asks to shrink bad_stats' silent guest (no stats ever) at every decision.
TEST(SafetyTest, TheCheckCatchesABlindShrink) {
  absl::StatusOr<Scenario> s = LoadScenarioFile("sim/scenarios/bad_stats.scenario");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<RunResult> run = RunScenario(*s, "oracle");
  ASSERT_TRUE(run.ok()) << run.status();
  int64_t asks = 0;
  for (const GuestResult& g : run->guests) asks += g.unsafe_shrink_asks;
  EXPECT_GT(asks, 100);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, SafetyTest, ::testing::ValuesIn(EveryPolicy()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The checks can fail: bad_stats has guests without stats, with stale and with impossible
// stats, so a policy that shrank blindly would be caught there.
TEST(SafetyTest, TheBundledScenariosHaveGuestsWithBadStats) {
  absl::StatusOr<Scenario> s = LoadScenarioFile("sim/scenarios/bad_stats.scenario");
  ASSERT_TRUE(s.ok()) << s.status();
  int bad = 0;
  for (const GuestSpec& g : s->guests) {
    bad += g.behaviour == Behaviour::kNoStats || g.behaviour == Behaviour::kStale ||
           g.behaviour == Behaviour::kNonsense;
  }
  EXPECT_GE(bad, 3);
}

}  // namespace
}  // namespace plimsoll::sim
