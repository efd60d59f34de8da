#include "sim/oracle_policy.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

policy::GuestView Guest(const std::string& name, double max, double min, double actual) {
  policy::GuestView g;
  g.name = name;
  g.uuid = "uuid-" + name;
  g.max_bytes = static_cast<int64_t>(max);
  g.min_bytes = static_cast<int64_t>(min);
  g.actual_bytes = static_cast<int64_t>(actual);
  g.target_bytes = g.actual_bytes;
  g.has_stats = true;
  g.stats_fresh = true;
  return g;
}

// Three 4 GiB guests at their max on a 64 GiB host with nothing else on it.
policy::Snapshot Host(double budget) {
  policy::Snapshot s;
  s.host.mem_total_bytes = static_cast<int64_t>(64 * kGib);
  s.host.host_reserve_bytes = static_cast<int64_t>(1 * kGib);
  s.host.guest_budget_bytes = static_cast<int64_t>(budget);
  for (const char* name : {"a", "b", "c"})
    s.guests.push_back(Guest(name, 4 * kGib, 512 * kMib, 4 * kGib));
  return s;
}

// Working sets with a hard part only.
OracleTruth Needs(std::vector<double> needs) {
  OracleTruth t;
  for (double n : needs) t.guests.push_back(OracleGuestTruth{n, 0, true});
  return t;
}

double Sum(const policy::Decisions& d) {
  double sum = 0;
  for (const policy::GuestDecision& g : d.guests) sum += static_cast<double>(g.target_bytes);
  return sum;
}

TEST(OraclePolicyTest, HeadroomIsThePagecachePolicys) {
  EXPECT_EQ(OracleHeadroom(static_cast<int64_t>(1 * kGib)), 128 * kMib);  // the minimum
  EXPECT_EQ(OracleHeadroom(static_cast<int64_t>(64 * kGib)), 0.05 * 64 * kGib);
}

// With room in the budget every guest gets exactly its need and headroom, within [min, max].
TEST(OraclePolicyTest, NeedPlusHeadroomWhenTheBudgetAllows) {
  const policy::Decisions d =
      OracleDecide(Host(10 * kGib), Needs({1 * kGib, 100 * kMib, 6 * kGib}));
  ASSERT_EQ(d.guests.size(), 3u);
  EXPECT_EQ(d.guests[0].uuid, "uuid-a");
  EXPECT_EQ(d.guests[0].target_bytes, static_cast<int64_t>(1 * kGib + 204.8 * kMib));
  EXPECT_EQ(d.guests[1].target_bytes, static_cast<int64_t>(512 * kMib));  // its min
  EXPECT_EQ(d.guests[2].target_bytes, static_cast<int64_t>(4 * kGib));    // its max
  EXPECT_LE(Sum(d), 10 * kGib);
  EXPECT_NE(d.summary.find("mode=fit"), std::string::npos);
}

// Short of the headroom: every guest keeps its whole need and the same share of its headroom.
TEST(OraclePolicyTest, AShortBudgetCutsTheHeadroomFirst) {
  // a and b need 2 GiB each, c its min; 200 MiB of a and b's 409.6 MiB of headroom fit.
  const double budget = 2 * kGib + 2 * kGib + 512 * kMib + 200 * kMib;
  const policy::Decisions d = OracleDecide(Host(budget), Needs({2 * kGib, 2 * kGib, 100 * kMib}));
  EXPECT_GE(d.guests[0].target_bytes, static_cast<int64_t>(2 * kGib));
  EXPECT_GE(d.guests[1].target_bytes, static_cast<int64_t>(2 * kGib));
  EXPECT_NEAR(d.guests[0].target_bytes, 2 * kGib + 100 * kMib, 1);
  EXPECT_EQ(d.guests[0].target_bytes, d.guests[1].target_bytes);
  EXPECT_EQ(d.guests[2].target_bytes, static_cast<int64_t>(512 * kMib));
  EXPECT_LE(Sum(d), budget);
  EXPECT_GT(Sum(d), budget - 16);
  EXPECT_NE(d.summary.find("mode=headroom_cut"), std::string::npos);
}

// Short of the working sets: the hot cache goes, each guest keeping the same share of its own,
// before any allocation is refused.
TEST(OraclePolicyTest, ThenTheCachePartOfTheWorkingSets) {
  OracleTruth t;
  t.guests = {{1 * kGib, 2 * kGib, true}, {1 * kGib, 1 * kGib, true}, {1 * kGib, 0, true}};
  const double budget = 3 * kGib + 1.5 * kGib;  // the hard parts and half of the caches
  const policy::Decisions d = OracleDecide(Host(budget), t);
  EXPECT_NEAR(d.guests[0].target_bytes, 1 * kGib + 1 * kGib, 1);
  EXPECT_NEAR(d.guests[1].target_bytes, 1 * kGib + 0.5 * kGib, 1);
  EXPECT_NEAR(d.guests[2].target_bytes, 1 * kGib, 1);
  EXPECT_LE(Sum(d), budget);
  EXPECT_NE(d.summary.find("mode=cache_cut"), std::string::npos);
  EXPECT_NE(d.guests[0].reason.find("cache=2GiB"), std::string::npos);
}

// Short of the hard parts: each guest loses the same share of its hard part above its min.
TEST(OraclePolicyTest, AShortfallOfNeedsIsSharedAboveTheMins) {
  const double budget = 3 * kGib;
  const policy::Decisions d = OracleDecide(Host(budget), Needs({3 * kGib, 2 * kGib, 512 * kMib}));
  EXPECT_LE(Sum(d), budget);
  EXPECT_GT(Sum(d), budget - 16);
  // (need - min) scaled by one factor: a's 2.5 GiB above min and b's 1.5 GiB; 1.5 GiB is
  // left above the three mins, so each keeps 1.5 / 4 of its share.
  EXPECT_NEAR(d.guests[0].target_bytes, 512 * kMib + 2.5 * kGib * 0.375, 2);
  EXPECT_NEAR(d.guests[1].target_bytes, 512 * kMib + 1.5 * kGib * 0.375, 2);
  EXPECT_EQ(d.guests[2].target_bytes, static_cast<int64_t>(512 * kMib));
  EXPECT_NE(d.summary.find("mode=shortfall"), std::string::npos);
  // Under the mins: everyone at min, however short the budget.
  const policy::Decisions tight =
      OracleDecide(Host(1 * kGib), Needs({3 * kGib, 2 * kGib, 1 * kGib}));
  for (const policy::GuestDecision& g : tight.guests) {
    EXPECT_EQ(g.target_bytes, static_cast<int64_t>(512 * kMib));
  }
}

// Memory outside the guests lowers the budget: the host keeps its reserve.
TEST(OraclePolicyTest, OutsidePressureLowersTheBudget) {
  OracleTruth t = Needs({1 * kGib, 1 * kGib, 1 * kGib});
  t.host_other = 64 * kGib - 1 * kGib - 3 * kGib;  // 3 GiB left for the guests
  const policy::Decisions d = OracleDecide(Host(10 * kGib), t);
  EXPECT_LE(Sum(d), 3 * kGib);
  EXPECT_GE(d.guests[0].target_bytes, static_cast<int64_t>(1 * kGib));
}

// A balloon that does not move is held where it is, and what it holds is counted.
TEST(OraclePolicyTest, ABalloonThatDoesNotMoveIsHeldAndCounted) {
  OracleTruth t = Needs({1 * kGib, 1 * kGib, 1 * kGib});
  t.guests[0].moves = false;
  const double budget = 4 * kGib + 2 * kGib;
  const policy::Decisions d = OracleDecide(Host(budget), t);
  EXPECT_EQ(d.guests[0].target_bytes, static_cast<int64_t>(4 * kGib));
  EXPECT_NE(d.guests[0].reason.find("balloon=held"), std::string::npos);
  EXPECT_LE(Sum(d), budget);
  EXPECT_GE(d.guests[1].target_bytes, static_cast<int64_t>(1 * kGib));
  EXPECT_LT(d.guests[1].target_bytes, static_cast<int64_t>(1 * kGib + 204.8 * kMib));
}

TEST(OraclePolicyTest, ThePolicyAsksItsSourceEachTime) {
  int asked = 0;
  OraclePolicy oracle([&asked]() {
    ++asked;
    return Needs({1 * kGib, 1 * kGib, 1 * kGib});
  });
  EXPECT_EQ(oracle.name(), "oracle");
  const policy::Decisions d = oracle.Decide(Host(10 * kGib), policy::PolicyState());
  oracle.Decide(Host(10 * kGib), policy::PolicyState());
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(d.guests[1].target_bytes, static_cast<int64_t>(1 * kGib + 204.8 * kMib));
  EXPECT_FALSE(policy::MakePolicy("oracle").ok());  // plimsolld cannot build it
}

// The limit keeps no headroom: every guest at exactly its working set (hard + cache).
TEST(LimitPolicyTest, WorkingSetWithoutHeadroom) {
  OracleTruth t;
  t.guests = {{1 * kGib, 512 * kMib, true}, {600 * kMib, 0, true}, {5 * kGib, 0, true}};
  const policy::Decisions d = LimitDecide(Host(10 * kGib), t, policy::PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, static_cast<int64_t>(1.5 * kGib));
  EXPECT_EQ(d.guests[1].target_bytes, static_cast<int64_t>(600 * kMib));
  EXPECT_EQ(d.guests[2].target_bytes, static_cast<int64_t>(4 * kGib));  // its max
  EXPECT_NE(d.summary.find("limit: "), std::string::npos);
  EXPECT_NE(d.summary.find("mode=fit"), std::string::npos);
  // It remembers each guest's target and where the balloon was.
  const LimitMemory* m = policy::FindGuestState<LimitMemory>(d.next_state, "uuid-a");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->target, 1.5 * kGib);
  EXPECT_EQ(m->actual, 4 * kGib);
}

// A balloon that did not move towards its last target is not asked to go lower; one that did
// is. The held guest is counted where it stands, so the others give what the budget needs.
TEST(LimitPolicyTest, ABalloonThatDoesNotFollowIsNotChased) {
  const OracleTruth first = Needs({2 * kGib, 2 * kGib, 2 * kGib});
  policy::Snapshot s = Host(10 * kGib);
  s.now = absl::FromUnixSeconds(1000);
  const policy::Decisions d1 = LimitDecide(s, first, policy::PolicyState());
  ASSERT_EQ(d1.guests[0].target_bytes, static_cast<int64_t>(2 * kGib));
  // 5 s later a has not moved (4 GiB still), b has moved 1 GiB, c arrived. Their need fell to
  // 1 GiB; the budget is now 6 GiB.
  policy::Snapshot later = Host(6 * kGib);
  later.now = absl::FromUnixSeconds(1005);
  later.guests[0].actual_bytes = static_cast<int64_t>(4 * kGib);
  later.guests[1].actual_bytes = static_cast<int64_t>(3 * kGib);
  later.guests[2].actual_bytes = static_cast<int64_t>(2 * kGib);
  for (size_t i = 0; i < 3; ++i) later.guests[i].target_bytes = d1.guests[i].target_bytes;
  const policy::Decisions d2 =
      LimitDecide(later, Needs({1 * kGib, 1 * kGib, 1 * kGib}), d1.next_state);
  EXPECT_EQ(d2.guests[0].target_bytes, static_cast<int64_t>(2 * kGib));  // not lowered
  EXPECT_NE(d2.guests[0].reason.find("balloon=not_following"), std::string::npos);
  // a counts at its 4 GiB: 2 GiB left for b and c, their 1 GiB each.
  EXPECT_EQ(d2.guests[1].target_bytes, static_cast<int64_t>(1 * kGib));
  EXPECT_EQ(d2.guests[2].target_bytes, static_cast<int64_t>(1 * kGib));
  // Still stuck 5 s on: still held, at the same target; the hold is measured from where it
  // began, so a page now and then never adds up to following.
  later.now = absl::FromUnixSeconds(1010);
  later.guests[0].actual_bytes = static_cast<int64_t>(4 * kGib - 4096);
  for (size_t i = 0; i < 3; ++i) later.guests[i].target_bytes = d2.guests[i].target_bytes;
  later.guests[1].actual_bytes = static_cast<int64_t>(1 * kGib);  // b and c arrived
  later.guests[2].actual_bytes = static_cast<int64_t>(1 * kGib);
  const policy::Decisions d3 =
      LimitDecide(later, Needs({1 * kGib, 1 * kGib, 1 * kGib}), d2.next_state);
  EXPECT_EQ(d3.guests[0].target_bytes, static_cast<int64_t>(2 * kGib));
  // A need above the held target raises it: giving is never held back.
  const policy::Decisions d4 =
      LimitDecide(later, Needs({3 * kGib, 1 * kGib, 1 * kGib}), d3.next_state);
  EXPECT_EQ(d4.guests[0].target_bytes, static_cast<int64_t>(3 * kGib));
  // The oracle chases the same balloon lower: it has no memory of it.
  EXPECT_EQ(OracleDecide(later, Needs({1 * kGib, 1 * kGib, 1 * kGib})).guests[0].target_bytes,
            static_cast<int64_t>(1 * kGib + 204.8 * kMib));
}

TEST(LimitPolicyTest, IsBuiltByTheSimulatorOnly) {
  LimitPolicy limit([]() { return Needs({1 * kGib, 1 * kGib, 1 * kGib}); });
  EXPECT_EQ(limit.name(), "limit");
  EXPECT_EQ(limit.Decide(Host(10 * kGib), policy::PolicyState()).guests[1].target_bytes,
            static_cast<int64_t>(1 * kGib));
  EXPECT_FALSE(policy::MakePolicy("limit").ok());
}

}  // namespace
}  // namespace plimsoll::sim
