#include "sim/scenario_generator.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

using ::testing::HasSubstr;

std::vector<Scenario> Many() {
  std::vector<Scenario> all;
  for (uint64_t seed : {1, 2, 3}) {
    for (int i = 0; i < 100; ++i) all.push_back(GenerateScenario(seed, i));
  }
  return all;
}

TEST(ScenarioGeneratorTest, SameSeedAndIndexSameCaseWhateverWasGeneratedBefore) {
  const std::string first = FormatScenario(GenerateScenario(7, 12));
  for (int i = 0; i < 30; ++i) GenerateScenario(7, i);
  EXPECT_EQ(FormatScenario(GenerateScenario(7, 12)), first);
  EXPECT_NE(FormatScenario(GenerateScenario(7, 13)), first);
  EXPECT_NE(FormatScenario(GenerateScenario(8, 12)), first);
  EXPECT_EQ(GenerateScenario(7, 12).name, "seed7_012");
}

// Seed 1's first case, as printed: a change of generator shows here first (the corpus baseline
// in docs/benchmarks.md holds for this generator only).
TEST(ScenarioGeneratorTest, SeedOneCaseZeroIsPinned) {
  const Scenario s = GenerateScenario(1, 0);
  EXPECT_THAT(FormatScenario(s), HasSubstr("scenario name=seed1_000 "));
  EXPECT_EQ(s.guests.size(), 12u);
  EXPECT_EQ(s.duration, 1200);
  EXPECT_EQ(s.guests[0].name, "g00_stream");
  EXPECT_TRUE(s.HasTag("anon_heavy"));
  EXPECT_EQ(s.guests[0].max, 8 * kGib);
  EXPECT_EQ(s.guests[0].phases[1].stream_rate, 80 * kMib);
  ASSERT_EQ(s.host.events.size(), 1u);
  EXPECT_EQ(s.host.events[0].at, 580);
}

// One guest in four maps its files (drawn apart from the rest: case 0 above is as pinned before
// the model had the access mode).
TEST(ScenarioGeneratorTest, AboutOneGuestInFourMapsItsFiles) {
  int guests = 0, mapped = 0;
  for (const Scenario& s : Many()) {
    for (const GuestSpec& g : s.guests) {
      ++guests;
      if (g.access != FileAccess::kMmap) continue;
      ++mapped;
      EXPECT_THAT(s.description, HasSubstr(g.name)) << s.name;
    }
  }
  EXPECT_NEAR(static_cast<double>(mapped) / guests, 0.25, 0.03) << mapped << " of " << guests;
}

// Per case, from a stream of its own: every guest of a host or none.
TEST(ScenarioGeneratorTest, OneHostInTwoSendsTheBalloonPressureCounters) {
  int cases = 0, sending = 0;
  for (const Scenario& s : Many()) {
    ++cases;
    const bool first = s.guests.front().balloon_pressure;
    for (const GuestSpec& g : s.guests) EXPECT_EQ(g.balloon_pressure, first) << s.name;
    sending += first ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(sending) / cases, 0.5, 0.1) << sending << " of " << cases;
}

TEST(ScenarioGeneratorTest, StaysInItsRanges) {
  std::set<size_t> guest_counts;
  std::set<double> sizes, durations;
  std::set<std::string> tags;
  std::set<Behaviour> behaviours;
  bool agent = false, no_agent = false, slow = false, autodeflate = false;
  double lowest_hot = 10, highest_hot = 0, lowest_budget = 1, highest_budget = 0;
  for (const Scenario& s : Many()) {
    SCOPED_TRACE(s.name);
    ASSERT_GE(s.guests.size(), static_cast<size_t>(kGeneratedMinGuests));
    ASSERT_LE(s.guests.size(), static_cast<size_t>(kGeneratedMaxGuests));
    guest_counts.insert(s.guests.size());
    durations.insert(s.duration);
    EXPECT_GE(s.duration, 600);
    EXPECT_LE(s.duration, 1800);
    double total = 0;
    for (const GuestSpec& g : s.guests) {
      SCOPED_TRACE(g.name);
      total += g.max;
      sizes.insert(g.max);
      EXPECT_GE(g.max, kGeneratedMinGuestBytes);
      EXPECT_LE(g.max, kGeneratedMaxGuestBytes);
      EXPECT_GE(g.min, 256 * kMib);
      EXPECT_LE(g.min, g.max / 2);
      agent |= g.agent;
      no_agent |= !g.agent;
      slow |= g.speed < 512 * kMib;
      autodeflate |= g.autodeflate;
      behaviours.insert(g.behaviour);
      EXPECT_LT(g.behaviour_at, s.duration);
      ASSERT_FALSE(g.phases.empty());
      EXPECT_EQ(g.phases.front().at, 0);
      const double kernel = 48 * kMib + 0.02 * g.max;
      for (size_t i = 0; i < g.phases.size(); ++i) {
        const Phase& p = g.phases[i];
        if (i > 0) {
          EXPECT_GT(p.at, g.phases[i - 1].at);
        }
        EXPECT_LT(p.at, s.duration);
        // The workload fits the guest at its max: an OOM kill is a policy's doing.
        EXPECT_LE(p.anon + kernel + g.unreclaimable, 0.85 * g.max + kMib);
        if (p.hot > 0) {
          lowest_hot = std::min(lowest_hot, p.hot / g.max);
          highest_hot = std::max(highest_hot, p.hot / g.max);
        }
        if (p.loop > 0) {
          EXPECT_GT(p.loop, g.max);  // a loop never fits
        }
      }
    }
    const double share = *s.host.budget / total;
    lowest_budget = std::min(lowest_budget, share);
    highest_budget = std::max(highest_budget, share);
    // The host holds every guest at its max and its reserve, until something else takes memory.
    EXPECT_GE(s.host.total - s.host.reserve, total);
    EXPECT_EQ(s.GuestBudget(), *s.host.budget);
    for (const std::string& t : s.tags) tags.insert(t);
  }
  EXPECT_TRUE(guest_counts.count(2) && guest_counts.count(32));
  EXPECT_TRUE(sizes.count(kGeneratedMinGuestBytes) && sizes.count(kGeneratedMaxGuestBytes));
  EXPECT_EQ(sizes.size(), 13u);
  EXPECT_EQ(durations.size(), 5u);
  EXPECT_GE(lowest_budget, kGeneratedMinBudgetShare - 0.001);
  EXPECT_LE(highest_budget, kGeneratedMaxBudgetShare);
  EXPECT_LT(lowest_budget, 0.52);
  EXPECT_GT(highest_budget, 0.93);
  EXPECT_GE(lowest_hot, kGeneratedMinHotShare - 0.001);
  EXPECT_LE(highest_hot, kGeneratedMaxHotShare);
  EXPECT_LT(lowest_hot, 0.07);
  EXPECT_GT(highest_hot, 1.1);  // hot sets that cannot fit
  for (const char* t : {"generated", "stream", "hot", "grow", "spike", "bursty", "loop", "idle",
                        "host_pressure", "anon_heavy"}) {
    EXPECT_TRUE(tags.count(t)) << t;
  }
  EXPECT_TRUE(agent && no_agent && slow && autodeflate);
  for (Behaviour b :
       {Behaviour::kNormal, Behaviour::kStuck, Behaviour::kTrickle, Behaviour::kChurn}) {
    EXPECT_TRUE(behaviours.count(b)) << BehaviourName(b);
  }
  EXPECT_EQ(behaviours.size(), 4u);  // no guest without stats: that is not what this corpus tests
}

TEST(ScenarioGeneratorTest, EveryCasePrintsAndReadsBackToItself) {
  for (const Scenario& s : Many()) {
    const std::string printed = FormatScenario(s);
    absl::StatusOr<Scenario> back = ParseScenario(printed);
    ASSERT_TRUE(back.ok()) << s.name << ": " << back.status() << "\n" << printed;
    EXPECT_EQ(FormatScenario(*back), printed);
    EXPECT_EQ(back->guests.size(), s.guests.size());
  }
}

// A printed case replays: the same run, to the last byte, from the file as from the value.
TEST(ScenarioGeneratorTest, APrintedCaseReplaysToTheSameRun) {
  int played = 0;
  for (int i = 0; i < 40 && played < 3; ++i) {
    Scenario s = GenerateScenario(5, i);
    if (s.guests.size() > 6) continue;  // small ones: the test stays fast
    s.duration = std::min(s.duration, 600.0);
    absl::StatusOr<Scenario> back = ParseScenario(FormatScenario(s));
    ASSERT_TRUE(back.ok()) << back.status();
    for (const char* policy : {"pagecache", "mom"}) {
      absl::StatusOr<RunResult> a = RunScenario(s, policy);
      absl::StatusOr<RunResult> b = RunScenario(*back, policy);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->reclaimed_byte_s, b->reclaimed_byte_s) << s.name << " " << policy;
      EXPECT_EQ(a->stall_s, b->stall_s);
      EXPECT_EQ(a->refault_bytes, b->refault_bytes);
      EXPECT_EQ(a->churn_bytes, b->churn_bytes);
      EXPECT_EQ(a->reversals, b->reversals);
      EXPECT_EQ(a->oom_kills, b->oom_kills);
      EXPECT_EQ(a->converge_s, b->converge_s);
      EXPECT_EQ(a->series.sum_actual, b->series.sum_actual);
    }
    ++played;
  }
  EXPECT_EQ(played, 3);
}

}  // namespace
}  // namespace plimsoll::sim
