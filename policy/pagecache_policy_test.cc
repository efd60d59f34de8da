#include "policy/pagecache_policy.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/time/time.h"
#include "policy/history_deriver.h"
#include "policy/pagecache_law.h"
#include "policy/reclaim_pool.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int64_t kMib = int64_t{1} << 20;

GuestView Guest(const std::string& name, int64_t actual_mib) {
  GuestView g;
  g.name = name;
  g.uuid = "uuid-" + name;
  g.max_bytes = 1024 * kMib;
  g.min_bytes = 256 * kMib;
  g.actual_bytes = actual_mib * kMib;
  g.target_bytes = g.actual_bytes;
  g.has_stats = true;
  g.stats_fresh = true;
  g.unused_bytes = 20 * kMib;
  g.disk_caches_bytes = 700 * kMib;
  g.anon_bytes = 150 * kMib;
  g.unreclaimable_bytes = 50 * kMib;
  g.active_file_bytes = 100 * kMib;
  g.inactive_file_bytes = 600 * kMib;
  g.refaults_per_second = 0;
  g.agent_age_seconds = 0;
  g.oom_kill = 0;
  return g;
}

// The collect step's memory of each guest's history, by uuid, from one snapshot to the next.
using Histories = std::map<std::string, HistoryMemory>;

// A snapshot at `t` of `guests`, their histories derived as the collect step does: from
// `histories` (the snapshots before), or from none.
Snapshot Snap(std::vector<GuestView> guests, int64_t budget_mib, double t = 1e9,
              Histories* histories = nullptr) {
  Histories none;
  if (histories == nullptr) histories = &none;
  for (GuestView& g : guests) g.history = DeriveHistory(g, t, &(*histories)[g.uuid]);
  Snapshot s;
  s.now = absl::FromUnixSeconds(static_cast<int64_t>(t));
  s.host.mem_total_bytes = 64 * 1024 * kMib;
  s.host.mem_available_bytes = 32 * 1024 * kMib;
  s.host.guest_budget_bytes = budget_mib * kMib;
  s.guests = std::move(guests);
  return s;
}

// A guest whose cache is all in use (Active(file)): its W is its size, and with the agent the
// law's takes stop at W, so it proposes to keep all of it.
GuestView Hot(const std::string& name) {
  GuestView g = Guest(name, 1024);
  g.active_file_bytes = 700 * kMib;
  g.inactive_file_bytes = 0;
  return g;
}

TEST(PagecachePolicyTest, TheBudgetIsTakenByShares) {
  const PagecachePolicy policy;
  // Proposals 1024 MiB each (held at W), 3072 in all: 672 MiB over a 2400 MiB budget.
  const Decisions d = policy.Decide(Snap({Hot("a"), Hot("b"), Hot("c")}, 2400), PolicyState());
  ASSERT_EQ(d.guests.size(), 3u);
  int64_t sum = 0;
  for (const GuestDecision& g : d.guests) {
    sum += g.target_bytes;
    EXPECT_THAT(g.reason, StartsWith("pagecache: hold"));
    EXPECT_THAT(g.reason, HasSubstr("taken=224MiB"));
    EXPECT_NEAR(static_cast<double>(g.target_bytes) / kMib, 800, 0.01);
  }
  EXPECT_NEAR(static_cast<double>(sum) / kMib, 2400, 0.01);
  EXPECT_THAT(d.summary, HasSubstr("overcommit=672MiB"));
  EXPECT_THAT(d.summary, HasSubstr("unmet=0"));
}

TEST(PagecachePolicyTest, TheBudgetIsTakenAtMostAStepPerDecision) {
  const PagecachePolicy policy;
  // 1024 MiB over 2048; at most 25% of 1024 MiB from each guest per decision.
  const Decisions d = policy.Decide(Snap({Hot("a"), Hot("b"), Hot("c")}, 2048), PolicyState());
  for (const GuestDecision& g : d.guests) {
    EXPECT_NEAR(static_cast<double>(g.target_bytes) / kMib, 1024 - 256, 0.01);
  }
  EXPECT_THAT(d.summary, HasSubstr("unmet=256MiB"));
}

// Under the host's limit a take is at least a step (2% of M), whoever asks for it: the law's own
// 6 MiB take towards W is not made. Over the limit every take is made, the budget round's small
// shares included.
TEST(PagecachePolicyTest, ATakeUnderAStepIsNotMadeUnderTheLimit) {
  const PagecachePolicy policy;
  GuestView above = Hot("a");
  above.max_bytes = above.actual_bytes = above.target_bytes = 1034 * kMib;
  const Decisions own = policy.Decide(Snap({above}, 4096), PolicyState());
  EXPECT_EQ(own.guests[0].target_bytes, 1034 * kMib) << own.guests[0].reason;
  EXPECT_THAT(own.guests[0].reason, HasSubstr("take_under_step=6MiB<20.7MiB"));

  const Decisions over = policy.Decide(Snap({Hot("a"), Hot("b"), Hot("c")}, 3072 - 60), PolicyState());
  for (const GuestDecision& g : over.guests) {
    EXPECT_EQ(g.target_bytes, 1004 * kMib) << g.reason;
    EXPECT_THAT(g.reason, HasSubstr("taken=20MiB -> 1004MiB"));
    EXPECT_THAT(g.reason, Not(HasSubstr("take_under_step")));
  }
  // Within a landing tolerance (16 MiB) of the limit is at it: 12 MiB over, the 4 MiB shares wait.
  const Decisions at = policy.Decide(Snap({Hot("a"), Hot("b"), Hot("c")}, 3072 - 12), PolicyState());
  for (const GuestDecision& g : at.guests) {
    EXPECT_EQ(g.target_bytes, 1024 * kMib) << g.reason;
    EXPECT_THAT(g.reason, HasSubstr("take_under_step=4MiB"));
  }
  // Growth is never held back, however small.
  GuestView below = Hot("a");
  below.target_bytes = 1020 * kMib;
  const Decisions grow = policy.Decide(Snap({below}, 4096), PolicyState());
  EXPECT_EQ(grow.guests[0].target_bytes, 1024 * kMib) << grow.guests[0].reason;
}

// With many guests the budget round's shares are each under a step, and together they are what
// takes the host back within its limit: all are made but what fits a landing tolerance.
TEST(PagecachePolicyTest, SmallTakesTogetherMeetTheBudget) {
  const PagecachePolicy policy;
  std::vector<GuestView> guests;
  for (int i = 0; i < 100; ++i) guests.push_back(Hot("g" + std::to_string(i)));
  // 1500 MiB over the budget: 15 MiB from each guest, under a step (20.48 MiB).
  const Decisions d = policy.Decide(Snap(guests, 100 * 1024 - 1500), PolicyState());
  double sum = 0;
  int kept = 0;
  for (const GuestDecision& g : d.guests) {
    sum += static_cast<double>(g.target_bytes) / kMib;
    if (g.target_bytes == 1024 * kMib) ++kept;
  }
  EXPECT_EQ(kept, 1);  // 15 MiB within the landing tolerance (16 MiB) of the limit
  EXPECT_LE(sum, 100 * 1024 - 1500 + 16);
}

TEST(PagecachePolicyTest, StaleStatsAreHeldAndNeverShrunkForTheBudget) {
  GuestView stale = Guest("s", 1024);
  stale.stats_fresh = false;
  stale.stats_age_seconds = 40;
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(Snap({stale, Guest("b", 1024)}, 1536), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 1024 * kMib);
  EXPECT_THAT(d.guests[0].reason, HasSubstr("stats_fresh=false"));
  // b's take (to 726 MiB) and 214 MiB more for the budget.
  EXPECT_NEAR(static_cast<double>(d.guests[1].target_bytes) / kMib, 512, 0.01);
}

// A guest unseen for blind_after_s gets its ceiling back out of free memory, and no more: the
// neighbour, whose budget share is what free memory is, gives nothing for it.
TEST(PagecachePolicyTest, ABlindGuestGetsItsCeilingBackOutOfFreeMemoryOnly) {
  GuestView blind = Guest("s", 400);
  blind.stats_fresh = false;
  blind.stats_age_seconds = blind.stats_still_seconds = 61;
  const PagecachePolicy policy;
  // Budget 2048: b holds 1024 (hot), so 624 MiB are free and s may grow to 1024.
  Decisions d = policy.Decide(Snap({blind, Hot("b")}, 2048), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 1024 * kMib);
  EXPECT_THAT(d.guests[0].reason, StartsWith("pagecache: blind stats_fresh=false"));
  EXPECT_THAT(d.guests[0].reason, HasSubstr("blind_after_s=60 granted=624MiB -> 1024MiB"));
  EXPECT_EQ(d.guests[1].target_bytes, 1024 * kMib);
  // With less free memory, only what is free: b is not taken for it.
  d = policy.Decide(Snap({blind, Hot("b")}, 1624), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 600 * kMib);
  EXPECT_EQ(d.guests[1].target_bytes, 1024 * kMib);
  // Stale for less than blind_after_s, or the rule off: held where it is.
  blind.stats_age_seconds = blind.stats_still_seconds = 59;
  d = policy.Decide(Snap({blind, Hot("b")}, 2048), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 400 * kMib);
  EXPECT_THAT(d.guests[0].reason, StartsWith("pagecache: hold"));
  blind.stats_age_seconds = blind.stats_still_seconds = 61;
  const PagecachePolicy off(*ParsePagecacheParams("blind_after_s=0"));
  d = off.Decide(Snap({blind, Hot("b")}, 2048), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 400 * kMib);
  // Stale for long, but the host has watched them stand still for less (a paused or busy
  // domain, libvirt lost): held.
  blind.stats_still_seconds = 5;
  d = policy.Decide(Snap({blind, Hot("b")}, 2048), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 400 * kMib);
  blind.stats_still_seconds = 61;
  // Fresh but implausible stats (a guest that lies) are held, not given anything.
  GuestView liar = Guest("l", 400);
  liar.unused_bytes = 3000 * kMib;
  liar.stats_age_seconds = liar.stats_still_seconds = 61;
  d = policy.Decide(Snap({liar, Hot("b")}, 2048), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 400 * kMib);
}

// Given its ceiling while blind, a guest is kept as a guest never seen is: when its stats come
// back the law starts from its size then, and does not cut it to its old allowance in one step.
TEST(PagecachePolicyTest, ABlindGuestsOldAllowanceIsForgotten) {
  const PagecachePolicy policy;
  Histories histories;
  GuestView g = Guest("s", 400);
  Decisions d = policy.Decide(Snap({g, Hot("b")}, 2048, 1e9, &histories), PolicyState());
  ASSERT_LE(d.guests[0].target_bytes, 400 * kMib);
  g.stats_fresh = false;
  g.stats_age_seconds = g.stats_still_seconds = 61;
  d = policy.Decide(Snap({g, Hot("b")}, 2048, 1e9 + 61, &histories), d.next_state);
  ASSERT_EQ(d.guests[0].target_bytes, 1024 * kMib) << d.guests[0].reason;
  g.actual_bytes = g.target_bytes = 1024 * kMib;
  g.stats_fresh = true;
  g.stats_age_seconds = g.stats_still_seconds = 0;
  d = policy.Decide(Snap({g, Hot("b")}, 2048, 1e9 + 70, &histories), d.next_state);
  EXPECT_GT(d.guests[0].target_bytes, 700 * kMib) << "at most half of what lies above W: " << d.guests[0].reason;
}

TEST(PagecachePolicyTest, RemembersTypedStatePerGuest) {
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(Snap({Guest("a", 1024)}, 4096), PolicyState());
  const LawMemory* m = FindGuestState<LawMemory>(d.next_state, "uuid-a");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->allowance_bytes.has_value());
  // Its first report measured it (at its target): a take, 1024 - (1024 - 428) / 2.
  EXPECT_EQ(*m->allowance_bytes, 726.0 * kMib);
}

// The state moved in (as the daemon passes it) decides as a copy does, keeps the memory of the
// snapshot's guests, and drops that of a guest no longer in it, with or without a budget.
TEST(PagecachePolicyTest, AMovedInStateDecidesAsACopyAndForgetsGoneGuests) {
  const PagecachePolicy policy;
  Histories copied_h, moved_h;
  PolicyState copied, moved;
  GuestView a = Guest("a", 1024), b = Guest("b", 1024);
  for (int i = 0; i < 4; ++i) {
    const double t = 1e9 + 5 * i;
    const Decisions dc = policy.Decide(Snap({a, b}, 4096, t, &copied_h), copied);
    const Decisions dm = policy.Decide(Snap({a, b}, 4096, t, &moved_h), std::move(moved));
    ASSERT_EQ(dc.guests.size(), dm.guests.size());
    for (size_t j = 0; j < dc.guests.size(); ++j) {
      EXPECT_EQ(dc.guests[j].target_bytes, dm.guests[j].target_bytes) << i << " " << j;
      EXPECT_EQ(dc.guests[j].reason, dm.guests[j].reason) << i << " " << j;
    }
    copied = dc.next_state;
    moved = dm.next_state;
    a.target_bytes = a.actual_bytes = dm.guests[0].target_bytes;
    b.target_bytes = b.actual_bytes = dm.guests[1].target_bytes;
  }
  const LawMemory* kept = FindGuestState<LawMemory>(moved, "uuid-a");
  ASSERT_NE(kept, nullptr);
  const LawMemory before = *kept;

  // b is gone: its memory goes, a's carries on.
  Decisions d = policy.Decide(Snap({a}, 4096, 1e9 + 20, &moved_h), std::move(moved));
  EXPECT_EQ(d.next_state.guests.size(), 1u);
  EXPECT_EQ(FindGuestState<LawMemory>(d.next_state, "uuid-b"), nullptr);
  ASSERT_NE(FindGuestState<LawMemory>(d.next_state, "uuid-a"), nullptr);
  EXPECT_EQ(FindGuestState<LawMemory>(d.next_state, "uuid-a")->asked_bytes.has_value(),
            before.asked_bytes.has_value());

  // No budget: every guest held, the memory of those still there kept as it was.
  PolicyState two = d.next_state;
  two.guests["uuid-gone"].Set(LawMemory());
  d = policy.Decide(Snap({a}, 0, 1e9 + 25, &moved_h), std::move(two));
  EXPECT_EQ(d.next_state.guests.size(), 1u);
  EXPECT_NE(FindGuestState<LawMemory>(d.next_state, "uuid-a"), nullptr);
}

// A measured calm report takes half of the memory above the working set; the next report sees
// the balloon landed, the one after measures and takes again.
TEST(PagecachePolicyTest, TakesColdCacheStepByStep) {
  const PagecachePolicy policy;
  PolicyState state;
  Histories histories;
  GuestView g = Guest("a", 1024);
  std::vector<int64_t> targets;
  for (int i = 0; i < 6; ++i) {
    const Decisions d = policy.Decide(Snap({g}, 4096, 1e9 + 5 * i, &histories), state);
    state = d.next_state;
    g.target_bytes = g.actual_bytes = d.guests[0].target_bytes;
    targets.push_back(g.target_bytes / kMib);
  }
  // F = 200 + 128 = 328 MiB, W = 428 MiB: 1024 -> 726 -> 577 -> 502.5.
  EXPECT_EQ(targets, (std::vector<int64_t>{726, 726, 577, 577, 502, 502}));
}

// A take the envelope or a busy domain kept from being made leaves the target where it was: the
// policy reads that in the history and asks for the same step again, not for the next one.
TEST(PagecachePolicyTest, ATakeNotMadeIsAskedForAgain) {
  const PagecachePolicy policy;
  PolicyState state;
  Histories histories;
  const GuestView g = Guest("a", 1024);
  std::vector<int64_t> asked;
  for (int i = 0; i < 3; ++i) {
    const Decisions d = policy.Decide(Snap({g}, 4096, 1e9 + 5 * i, &histories), state);
    state = d.next_state;
    asked.push_back(d.guests[0].target_bytes / kMib);
  }
  EXPECT_EQ(asked, (std::vector<int64_t>{726, 726, 726}));
}

TEST(PagecachePolicyTest, ParamsInTheTablesUnits) {
  absl::StatusOr<PagecacheParams> p =
      ParsePagecacheParams("headroom_min_mib=64:cooldown_max_s=300:profile_ratio=0");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->law.headroom_min_bytes, 64.0 * kMib);
  EXPECT_EQ(p->law.cooldown_max_seconds, 300);
  EXPECT_EQ(p->law.profile.ratio, 0);
  EXPECT_EQ(p->law.probe_fraction, PagecacheParams().law.probe_fraction);
  // Every name in the list can be set.
  for (const std::string& name : PagecacheParamNames()) {
    PagecacheParams q;
    EXPECT_TRUE(SetPagecacheParam(name, 0.5, &q).ok()) << name;
  }
}

TEST(PagecachePolicyTest, NoBudgetHoldsEveryGuest) {
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(Snap({Guest("a", 1024)}, 0), PolicyState());
  EXPECT_EQ(d.guests[0].target_bytes, 1024 * kMib);
  EXPECT_THAT(d.summary, HasSubstr("hold guest_budget_bytes=0"));
}

// The daemon ends an operator's reclaim hold on a guest in distress: the decision says so.
TEST(PagecachePolicyTest, DistressIsSaid) {
  const PagecachePolicy policy;
  GuestView calm = Guest("calm", 1024);
  GuestView pressured = Guest("pressured", 600);
  pressured.refaults_per_second = 3.0 * kMib / 4096;  // x = 3
  GuestView oom = Guest("oom", 600);
  Histories histories;
  Decisions first = policy.Decide(Snap({calm, pressured, oom}, 4096, 1e9, &histories), PolicyState());
  oom.oom_kill = 1;
  const Decisions d =
      policy.Decide(Snap({calm, pressured, oom}, 4096, 1e9 + 2, &histories), first.next_state);
  EXPECT_EQ(d.guests[0].distress, "");
  EXPECT_EQ(d.guests[1].distress, "pressure x=3.00");
  EXPECT_EQ(d.guests[2].distress, "oom_kill");
}

// A kill counted while the guest is held (libvirt's stats stale, the agent's report new) is the
// law's to see when it may act again: the report that counted it is not new by then.
TEST(PagecachePolicyTest, AnOomKillCountedWhileHeldIsSeenWhenTheLawActsAgain) {
  const PagecachePolicy policy;
  GuestView oom = Guest("oom", 600);
  Histories histories;
  Decisions d = policy.Decide(Snap({oom}, 4096, 1e9, &histories), PolicyState());
  oom.stats_fresh = false;
  oom.oom_kill = 1;
  d = policy.Decide(Snap({oom}, 4096, 1e9 + 2, &histories), d.next_state);
  EXPECT_THAT(d.guests[0].reason, StartsWith("pagecache: hold stats_fresh=false"));
  oom.stats_fresh = true;
  d = policy.Decide(Snap({oom}, 4096, 1e9 + 4, &histories), d.next_state);
  EXPECT_EQ(d.guests[0].distress, "oom_kill") << d.guests[0].reason;
  d = policy.Decide(Snap({oom}, 4096, 1e9 + 6, &histories), d.next_state);
  EXPECT_EQ(d.guests[0].distress, "") << "counted once: " << d.guests[0].reason;
  // The same while every guest is held for want of a budget.
  oom.oom_kill = 2;
  d = policy.Decide(Snap({oom}, 0, 1e9 + 8, &histories), d.next_state);
  d = policy.Decide(Snap({oom}, 4096, 1e9 + 10, &histories), d.next_state);
  EXPECT_EQ(d.guests[0].distress, "oom_kill") << d.guests[0].reason;
}

// Hard-demand growth is paid for by the neighbours, so an agent's AnonPages
// alone do not buy it: libvirt's MemAvailable must show the shortage too.
TEST(PagecachePolicyTest, HardDemandOnTheAgentsWordAloneComesFromFreeMemoryOnly) {
  const PagecachePolicy policy;
  auto run = [&](int64_t libvirt_usable_mib) {
    GuestView claimant = Guest("claimant", 600);
    claimant.anon_bytes = 900 * kMib;  // floor min(900 + 50 + 128, 1024) MiB: over its 600 MiB
    // Plausible (within max): the claim passes guest_safety's implausibility check.
    claimant.disk_caches_bytes = 50 * kMib;
    claimant.active_file_bytes = 50 * kMib;
    claimant.inactive_file_bytes = 0;
    claimant.usable_bytes = libvirt_usable_mib * kMib;
    GuestView neighbour = Hot("neighbour");
    neighbour.usable_bytes = 50 * kMib;
    // Budget: exactly the two sizes; nothing is free.
    return policy.Decide(Snap({claimant, neighbour}, 600 + 1024), PolicyState());
  };
  // libvirt says the claimant has 500 MiB it could use: its agent's claim is not confirmed.
  const Decisions liar = run(500);
  ASSERT_EQ(liar.guests.size(), 2u);
  EXPECT_EQ(liar.guests[0].target_bytes, 600 * kMib) << liar.guests[0].reason;
  EXPECT_THAT(liar.guests[0].reason, HasSubstr("hard_demand_unconfirmed usable=500MiB"));
  EXPECT_GE(liar.guests[1].target_bytes, 1003 * kMib) << liar.guests[1].reason;  // its own probe only
  // libvirt agrees (20 MiB usable, less than the 128 MiB headroom): the neighbour pays.
  const Decisions honest = run(20);
  EXPECT_GT(honest.guests[0].target_bytes, 600 * kMib) << honest.guests[0].reason;
  EXPECT_THAT(honest.guests[0].reason, Not(HasSubstr("unconfirmed")));
  EXPECT_LT(honest.guests[1].target_bytes, 1003 * kMib) << honest.guests[1].reason;
  // ... but only for what libvirt sees: its hard demand (600 - 20 MiB) plus the headroom
  // (128 MiB), not the agent's 1024 MiB floor.
  EXPECT_LE(honest.guests[0].target_bytes, (600 - 20 + 128) * kMib) << honest.guests[0].reason;
  EXPECT_THAT(honest.guests[0].reason, HasSubstr("hard_demand_seen_to=708MiB usable=20MiB"));
  // A liar squeezed to where libvirt's MemAvailable is just under the headroom (100 MiB) is
  // paid 28 MiB, not its claim (seen on real guests before the cap: 288 MiB in one tick).
  const Decisions squeezed = run(100);
  EXPECT_LE(squeezed.guests[0].target_bytes, (600 + 28) * kMib) << squeezed.guests[0].reason;
  EXPECT_GE(squeezed.guests[1].target_bytes, (1024 - 28) * kMib - 1) << squeezed.guests[1].reason;
}

// The same claim with an OOM kill the agent counted: the kill makes the growth hard, but the
// neighbours still pay only for what libvirt sees (here nothing: 500 MiB usable).
TEST(PagecachePolicyTest, AnOomKillOnTheAgentsWordDoesNotMakeTheNeighboursPay) {
  const PagecachePolicy policy;
  GuestView claimant = Guest("claimant", 600);
  claimant.anon_bytes = 900 * kMib;
  claimant.disk_caches_bytes = 50 * kMib;
  claimant.active_file_bytes = 50 * kMib;
  claimant.inactive_file_bytes = 0;
  claimant.usable_bytes = 500 * kMib;
  claimant.oom_kill = 0;
  GuestView neighbour = Hot("neighbour");
  neighbour.usable_bytes = 50 * kMib;
  Histories histories;
  const Decisions first =
      policy.Decide(Snap({claimant, neighbour}, 600 + 1024, 1e9, &histories), PolicyState());
  claimant.oom_kill = 5;
  const Decisions d =
      policy.Decide(Snap({claimant, neighbour}, 600 + 1024, 1e9 + 2, &histories), first.next_state);
  ASSERT_EQ(d.guests.size(), 2u);
  EXPECT_EQ(d.guests[0].distress, "oom_kill");
  EXPECT_LE(d.guests[0].target_bytes, 600 * kMib) << d.guests[0].reason;
  EXPECT_GE(d.guests[1].target_bytes, 1003 * kMib) << d.guests[1].reason;
}

// A guest whose agent gives its cold cache back in the guest (free page reporting on, its
// reclaimer able): 400 MiB resident of its 1024.
GuestView Reclaiming(const std::string& name, int64_t rss_mib) {
  GuestView g = Guest(name, 1024);
  g.free_page_reporting = true;
  g.host_rss_bytes = rss_mib * kMib;
  g.agent_reclaims = true;
  return g;
}

Snapshot ReclaimSnap(std::vector<GuestView> guests, int64_t budget_mib, bool in_guest_reclaim,
                     double t = 1e9) {
  Snapshot s = Snap(std::move(guests), budget_mib, t);
  s.host.in_guest_reclaim = in_guest_reclaim;
  return s;
}

// In a covering pool the budget counts the guest's RSS, and the balloon neither probes it nor
// squeezes its neighbour: 1024 + 1024 MiB of balloons on 1800 MiB, 400 + 1024 of cost.
TEST(PagecachePolicyTest, APooledGuestCostsItsRssAndIsNotProbed) {
  const PagecachePolicy policy;
  const Decisions on =
      policy.Decide(ReclaimSnap({Reclaiming("cold", 400), Hot("hot")}, 1800, true), PolicyState());
  ASSERT_EQ(on.guests.size(), 2u);
  EXPECT_EQ(on.guests[0].target_bytes, 1024 * kMib) << on.guests[0].reason;
  EXPECT_THAT(on.guests[0].reason, HasSubstr("pooled rss=400MiB"));
  EXPECT_THAT(on.guests[0].reason, HasSubstr("hold x=0.00 agent_reclaims"));
  EXPECT_EQ(on.guests[1].target_bytes, 1024 * kMib) << on.guests[1].reason;
  EXPECT_THAT(on.summary, HasSubstr("overcommit=0MiB"));
  // Never seen to burst: the reserve is its headroom (at least 128 MiB), kept off the budget.
  EXPECT_THAT(on.summary, HasSubstr("limit=1672MiB free=248MiB"));
  EXPECT_THAT(on.summary, HasSubstr("pool members=1 lent=624MiB reserve=128MiB covers=1"));
  EXPECT_EQ(on.pool_reserve_bytes, 128 * kMib);
  EXPECT_EQ(on.pool_members, 1);
  EXPECT_EQ(on.pool_lent_bytes, 624 * kMib);
  EXPECT_TRUE(on.pool_covers);

  // The same guests when the host sends no bounds: the balloon takes the cold cache.
  const Decisions off =
      policy.Decide(ReclaimSnap({Reclaiming("cold", 400), Hot("hot")}, 1800, false), PolicyState());
  EXPECT_LT(off.guests[0].target_bytes, 1024 * kMib) << off.guests[0].reason;
  EXPECT_THAT(off.guests[0].reason, Not(HasSubstr("pooled")));
  EXPECT_THAT(off.summary, Not(HasSubstr("pool")));
  EXPECT_EQ(off.pool_members, 0);
  EXPECT_FALSE(off.pool_covers);
}

// A pool whose lent memory is less than its reserve changes nothing: the guest is sized as
// without in-guest reclaim. The reserve here is the guest's RSS rising 600 MiB in one decision;
// its agent does not reclaim, so it has no grace and no wait for its agent.
TEST(PagecachePolicyTest, APoolThatDoesNotCoverChangesNothing) {
  const PagecachePolicy policy;
  GuestView quiet = Reclaiming("cold", 400);
  quiet.agent_reclaims = false;
  const Decisions first = policy.Decide(ReclaimSnap({quiet, Hot("hot")}, 1800, true, 1e9), PolicyState());
  GuestView rose = quiet;
  rose.host_rss_bytes = 1000 * kMib;
  const Decisions short_on = policy.Decide(ReclaimSnap({rose, Hot("hot")}, 1800, true, 1e9 + 5), first.next_state);
  const Decisions plain = policy.Decide(ReclaimSnap({rose, Hot("hot")}, 1800, false, 1e9 + 5), first.next_state);
  EXPECT_THAT(short_on.summary, HasSubstr("pool members=1 lent=24MiB reserve=600MiB covers=0"));
  ASSERT_EQ(short_on.guests.size(), plain.guests.size());
  for (size_t i = 0; i < plain.guests.size(); ++i) {
    EXPECT_EQ(short_on.guests[i].target_bytes, plain.guests[i].target_bytes);
    EXPECT_EQ(short_on.guests[i].reason, plain.guests[i].reason);
  }
}

// The reclaiming guest beside a hot one on `budget_mib`, pooled at 1e9 with 400 MiB resident,
// then 5 s later with `rss_mib` resident (an allocation), stats fresh unless said.
std::pair<Decisions, Decisions> PooledThen(const PagecachePolicy& policy, int64_t budget_mib, int64_t rss_mib,
                                           bool stats_fresh = true) {
  Decisions first =
      policy.Decide(ReclaimSnap({Reclaiming("cold", 400), Hot("hot")}, budget_mib, true, 1e9), PolicyState());
  EXPECT_THAT(first.guests[0].reason, HasSubstr("pooled rss=400MiB"));
  GuestView then = Reclaiming("cold", rss_mib);
  then.stats_fresh = stats_fresh;
  Decisions second =
      policy.Decide(ReclaimSnap({then, Hot("hot")}, budget_mib, true, 1e9 + 5), first.next_state);
  return {std::move(first), std::move(second)};
}

// A pooled guest that allocates spends what it lent: its RSS rises 600 MiB in one decision, so
// the pool stops covering and it lends 24 MiB. For the grace it keeps its privileges: the
// balloon neither probes it nor gives it burst room while it faults its memory back in. After
// the grace its agent has kAgentWaitSeconds to lend again before the balloon takes; when its
// agent stops reclaiming, it is sized as without the pool at once. (The budget does not bind:
// under a binding budget the share-out takes from it as from any guest.)
TEST(PagecachePolicyTest, AGuestSpendingWhatItLentKeepsItsPrivilegesForTheGrace) {
  const PagecachePolicy policy;
  const Decisions spending = PooledThen(policy, 4096, 1000).second;
  EXPECT_THAT(spending.summary, HasSubstr("covers=0"));
  EXPECT_THAT(spending.guests[0].reason, HasSubstr("agent_reclaims"));
  EXPECT_THAT(spending.guests[0].reason, HasSubstr("pooled rss=1000MiB grace_left=25s"));
  EXPECT_THAT(spending.guests[0].reason, HasSubstr("burst=0MiB"));
  EXPECT_EQ(spending.guests[0].target_bytes, 1024 * kMib) << spending.guests[0].reason;
  // Its burst room is not in its floor: the line commits it (its RSS rose 600 MiB in a decision).
  EXPECT_EQ(spending.pool_reserve_bytes, 600 * kMib);

  // Its agent stops reclaiming: no grace.
  GuestView quiet = Reclaiming("cold", 1000);
  quiet.agent_reclaims = false;
  const Decisions stopped =
      policy.Decide(ReclaimSnap({quiet, Hot("hot")}, 4096, true, 1e9 + 6), spending.next_state);
  EXPECT_THAT(stopped.guests[0].reason, Not(HasSubstr("pooled"))) << stopped.guests[0].reason;

  // Still lending nothing after the grace: its agent's wait (kAgentWaitSeconds), then sized as
  // without in-guest reclaim.
  Decisions later = spending;
  for (double t = 1e9 + 10; t <= 1e9 + 70; t += 5) {
    later = policy.Decide(ReclaimSnap({Reclaiming("cold", 1000), Hot("hot")}, 4096, true, t), later.next_state);
    if (t <= 1e9 + 30) {
      EXPECT_THAT(later.guests[0].reason, HasSubstr("grace_left=")) << t;
    } else if (t < 1e9 + 35 + kAgentWaitSeconds) {
      EXPECT_THAT(later.guests[0].reason, HasSubstr("awaiting_agent")) << t;
      EXPECT_EQ(later.guests[0].target_bytes, 1024 * kMib) << later.guests[0].reason;
      EXPECT_EQ(later.pool_reserve_bytes, 0);  // its burst room is back in its floor
    }
  }
  EXPECT_THAT(later.guests[0].reason, Not(HasSubstr("pooled"))) << later.guests[0].reason;
  EXPECT_THAT(later.guests[0].reason, Not(HasSubstr("awaiting_agent"))) << later.guests[0].reason;
  EXPECT_LT(later.guests[0].target_bytes, 1024 * kMib) << later.guests[0].reason;  // probed
}

// Under a binding budget the share-out takes from a guest on its grace as from any guest, but not
// below its burst room (its law's floor holds none while it is pooled): 1024 + 1024 MiB of
// balloons on 1800 MiB, the pool not covering; its floor 328 MiB plus its 600 MiB burst.
TEST(PagecachePolicyTest, AGuestOnItsGraceKeepsItsBurstRoomUnderABindingBudget) {
  const PagecachePolicy policy;
  const Decisions d = PooledThen(policy, 1800, 1000).second;
  ASSERT_THAT(d.guests[0].reason, HasSubstr("grace_left="));
  ASSERT_THAT(d.guests[0].reason, HasSubstr("floor=328MiB"));
  EXPECT_GE(d.guests[0].target_bytes, (328 + 600) * kMib) << d.guests[0].reason;
  EXPECT_LT(d.guests[0].target_bytes, 1024 * kMib) << d.guests[0].reason;  // the budget binds
  EXPECT_EQ(d.pool_reserve_bytes, 600 * kMib);
}

// A guest that lends again qualifies again: its grace starts afresh from then.
TEST(PagecachePolicyTest, LendingAgainRefreshesTheGrace) {
  const PagecachePolicy policy;
  const Decisions spending = PooledThen(policy, 4096, 1000).second;
  ASSERT_THAT(spending.guests[0].reason, HasSubstr("grace_left=25s"));
  // 15 s later its agent has given 600 MiB back: lent 624 MiB covers the reserve (its 600 MiB rise).
  const Decisions lending =
      policy.Decide(ReclaimSnap({Reclaiming("cold", 400), Hot("hot")}, 4096, true, 1e9 + 20), spending.next_state);
  EXPECT_THAT(lending.summary, HasSubstr("covers=1"));
  EXPECT_THAT(lending.guests[0].reason, HasSubstr("pooled rss=400MiB"));
  EXPECT_THAT(lending.guests[0].reason, Not(HasSubstr("grace_left="))) << lending.guests[0].reason;
  const Decisions again =
      policy.Decide(ReclaimSnap({Reclaiming("cold", 1000), Hot("hot")}, 4096, true, 1e9 + 25), lending.next_state);
  EXPECT_THAT(again.guests[0].reason, HasSubstr("grace_left=25s")) << again.guests[0].reason;
}

// In a covering pool a guest that lends less than a step is costed by RSS but not pooled.
TEST(PagecachePolicyTest, AGuestLendingLessThanAStepBesideACoveringPoolIsNotPooled) {
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(
      ReclaimSnap({Reclaiming("cold", 400), Reclaiming("full", 1010)}, 4096, true), PolicyState());
  EXPECT_THAT(d.summary, HasSubstr("pool members=2"));
  EXPECT_THAT(d.summary, HasSubstr("covers=1"));
  EXPECT_THAT(d.guests[0].reason, HasSubstr("pooled"));
  EXPECT_THAT(d.guests[1].reason, Not(HasSubstr("pooled"))) << d.guests[1].reason;
}

// Stats that are not safe to act on end the grace at once: the guest is held, and when its stats
// come back lending nothing, it is sized as without the pool.
TEST(PagecachePolicyTest, StaleStatsEndTheGrace) {
  const PagecachePolicy policy;
  const Decisions held = PooledThen(policy, 4096, 1000, /*stats_fresh=*/false).second;
  EXPECT_THAT(held.guests[0].reason, Not(HasSubstr("pooled"))) << held.guests[0].reason;
  EXPECT_EQ(held.pool_reserve_bytes, 0);
  const Decisions back = policy.Decide(
      ReclaimSnap({Reclaiming("cold", 1000), Hot("hot")}, 4096, true, 1e9 + 6), held.next_state);
  EXPECT_THAT(back.guests[0].reason, Not(HasSubstr("pooled"))) << back.guests[0].reason;
}

// What the agent says changes its own guest only: a guest whose agent stops claiming a
// reclaimer is probed again, but still costs its RSS, so its neighbour keeps its memory.
TEST(PagecachePolicyTest, TheAgentsClaimChangesNoNeighbour) {
  const PagecachePolicy policy;
  GuestView quiet = Reclaiming("cold", 400);
  quiet.agent_reclaims = false;
  const Decisions d = policy.Decide(ReclaimSnap({quiet, Hot("hot")}, 1800, true), PolicyState());
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("pooled"))) << d.guests[0].reason;
  EXPECT_EQ(d.guests[1].target_bytes, 1024 * kMib) << d.guests[1].reason;
  EXPECT_THAT(d.summary, HasSubstr("pool members=1 lent=624MiB"));
}

// A reclaimer that lends nothing (RSS at its balloon) is not pooled: its agent has
// kAgentWaitSeconds to give the cold cache back, and after that it buys no exemption from the
// balloon's takes: it is sized as without in-guest reclaim.
TEST(PagecachePolicyTest, AClaimThatLendsNothingIsNotPooled) {
  const PagecachePolicy policy;
  const Decisions on = policy.Decide(ReclaimSnap({Reclaiming("cold", 1024)}, 4096, true), PolicyState());
  const Decisions off = policy.Decide(ReclaimSnap({Reclaiming("cold", 1024)}, 4096, false), PolicyState());
  EXPECT_THAT(on.guests[0].reason, Not(HasSubstr("pooled")));
  EXPECT_THAT(on.guests[0].reason, HasSubstr("awaiting_agent left=30s"));
  EXPECT_EQ(on.guests[0].target_bytes, 1024 * kMib) << on.guests[0].reason;
  ASSERT_LT(off.guests[0].target_bytes, 1024 * kMib) << off.guests[0].reason;  // the balloon takes
  const Decisions after = policy.Decide(ReclaimSnap({Reclaiming("cold", 1024)}, 4096, true, 1e9 + kAgentWaitSeconds),
                                        on.next_state);
  EXPECT_THAT(after.guests[0].reason, Not(HasSubstr("awaiting_agent"))) << after.guests[0].reason;
  EXPECT_EQ(after.guests[0].target_bytes, off.guests[0].target_bytes) << after.guests[0].reason;
}

// Who waits for an agent: a guest costed by RSS whose agent reclaims or has not reported yet
// (its first stats are libvirt's). Not one whose agent cannot reclaim, nor one the host does
// not cost by RSS (no free page reporting, or the host sends no bounds).
TEST(PagecachePolicyTest, WhoWaitsForItsAgent) {
  struct Case {
    const char* name;
    std::optional<bool> agent_reclaims;
    bool reporting;
    bool in_guest_reclaim;
    bool waits;
  };
  const Case cases[] = {
      {"agent reclaims", true, true, true, true},
      {"no report yet", std::nullopt, true, true, true},
      {"agent cannot reclaim", false, true, true, false},
      {"no free page reporting", true, false, true, false},
      {"host sends no bounds", true, true, false, false},
  };
  const PagecachePolicy policy;
  for (const Case& c : cases) {
    GuestView g = Reclaiming("cold", 1024);
    g.agent_reclaims = c.agent_reclaims;
    g.free_page_reporting = c.reporting;
    const Decisions d = policy.Decide(ReclaimSnap({g}, 4096, c.in_guest_reclaim), PolicyState());
    EXPECT_EQ(d.guests[0].reason.find("awaiting_agent") != std::string::npos, c.waits)
        << c.name << ": " << d.guests[0].reason;
    EXPECT_EQ(d.guests[0].target_bytes == 1024 * kMib, c.waits) << c.name << ": " << d.guests[0].reason;
  }
}

// The wait holds the law's takes only: under a binding budget the share-out still takes from a
// waiting guest (2 x 1024 MiB of balloons on 1600 MiB).
TEST(PagecachePolicyTest, AWaitingGuestIsStillTakenFromWhenTheBudgetNeedsIt) {
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(ReclaimSnap({Reclaiming("cold", 1024), Hot("hot")}, 1600, true), PolicyState());
  EXPECT_THAT(d.guests[0].reason, HasSubstr("awaiting_agent"));
  EXPECT_LT(d.guests[0].target_bytes, 1024 * kMib) << d.guests[0].reason;
  EXPECT_THAT(d.guests[0].reason, HasSubstr("taken=")) << d.guests[0].reason;
}

// 2 x 1024 MiB of balloons on 1600 MiB: the budget takes from `cold` (its agent reclaims, its RSS
// at its size), and what it took is braked.
Decisions BrakeCold(const PagecachePolicy& policy) {
  return policy.Decide(ReclaimSnap({Reclaiming("cold", 1024), Hot("hot")}, 1600, true), PolicyState());
}

// `cold` after that take: its balloon at the braked target, its RSS `rss_mib`.
GuestView ColdAt(int64_t target_bytes, int64_t rss_mib) {
  GuestView cold = Reclaiming("cold", rss_mib);
  cold.actual_bytes = cold.target_bytes = target_bytes;
  return cold;
}

// The brake released: what the budget took by balloon from a guest whose agent reclaims is given
// back, out of free memory, once its agent has given the cache back in the guest and the takes
// have settled. Until then the law takes no more from it. 2 x 1024 MiB of balloons on 1600 MiB.
TEST(PagecachePolicyTest, WhatTheBudgetBrakedIsGivenBackOnceThereIsRoom) {
  const PagecachePolicy policy;
  const Decisions braked = BrakeCold(policy);
  const int64_t t1 = braked.guests[0].target_bytes;
  ASSERT_LT(t1, 1024 * kMib) << braked.guests[0].reason;
  EXPECT_THAT(braked.guests[0].reason, HasSubstr("braked="));
  // Its balloon followed; its agent then took the cache (RSS 300 MiB): the budget has room, but
  // the takes have not settled, and the law does not take more meanwhile.
  GuestView cold = ColdAt(t1, 300);
  const Decisions settling = policy.Decide(
      ReclaimSnap({cold, Hot("hot")}, 1600, true, 1e9 + kBrakeSettleSeconds - 2), braked.next_state);
  EXPECT_EQ(settling.guests[0].target_bytes, t1) << settling.guests[0].reason;
  EXPECT_THAT(settling.guests[0].reason, Not(HasSubstr("released=")));
  // Settled: given back out of free memory (1600 - 1024 - its RSS - the reserve), no more.
  Decisions given = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 1600, true, 1e9 + kBrakeSettleSeconds),
                                  settling.next_state);
  EXPECT_GT(given.guests[0].target_bytes, t1) << given.guests[0].reason;
  EXPECT_THAT(given.guests[0].reason, HasSubstr("released="));
  EXPECT_EQ(given.guests[1].target_bytes, 1024 * kMib) << given.guests[1].reason;
  EXPECT_THAT(given.summary, HasSubstr("unmet=0MiB"));
  EXPECT_THAT(given.summary, HasSubstr("overcommit=0MiB"));
  // Tick by tick until all of it is back, never over its ceiling.
  for (double t = 1e9 + kBrakeSettleSeconds + 2; t < 1e9 + 60; t += 2) {
    cold.actual_bytes = cold.target_bytes = given.guests[0].target_bytes;
    given = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 1600, true, t), given.next_state);
    EXPECT_LE(given.guests[0].target_bytes, 1024 * kMib);
  }
  EXPECT_EQ(given.guests[0].target_bytes, 1024 * kMib) << given.guests[0].reason;
  EXPECT_THAT(given.guests[0].reason, Not(HasSubstr("braked="))) << given.guests[0].reason;
  EXPECT_THAT(given.guests[0].reason, HasSubstr("pooled")) << given.guests[0].reason;
}

// A guest whose RSS did not fall a step since it was braked is refilling its cache as fast as its
// agent drops it (a stream): the balloon stays its cap, room or not.
TEST(PagecachePolicyTest, ABrakedGuestRefillingItsCacheIsNotGivenBack) {
  const PagecachePolicy policy;
  const Decisions braked = BrakeCold(policy);
  const int64_t t1 = braked.guests[0].target_bytes;
  ASSERT_LT(t1, 1024 * kMib) << braked.guests[0].reason;
  // The budget has room now (4096 MiB), but its RSS stays where it was braked.
  GuestView cold = ColdAt(t1, 1020);
  const Decisions refilling =
      policy.Decide(ReclaimSnap({cold, Hot("hot")}, 4096, true, 1e9 + 2 * kBrakeSettleSeconds), braked.next_state);
  EXPECT_EQ(refilling.guests[0].target_bytes, t1) << refilling.guests[0].reason;
  EXPECT_THAT(refilling.guests[0].reason, HasSubstr("braked="));
  // Its agent then gives its cache back: released.
  cold.host_rss_bytes = 400 * kMib;
  const Decisions gave = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 4096, true, 1e9 + 3 * kBrakeSettleSeconds),
                                       refilling.next_state);
  EXPECT_GT(gave.guests[0].target_bytes, t1) << gave.guests[0].reason;
  EXPECT_THAT(gave.guests[0].reason, HasSubstr("released="));
}

// Takes before the agent's first report are braked too; a guest whose agent never says it
// reclaims (no agent at all) has them forgotten at the end of its wait, and the law takes again.
TEST(PagecachePolicyTest, BrakedBeforeTheAgentsFirstReport) {
  const PagecachePolicy policy;
  GuestView first = Reclaiming("cold", 1024);
  first.agent_reclaims = std::nullopt;  // no report yet
  Decisions d = policy.Decide(ReclaimSnap({first, Hot("hot")}, 1600, true), PolicyState());
  ASSERT_THAT(d.guests[0].reason, HasSubstr("braked=")) << d.guests[0].reason;
  // Its agent reports it reclaims, having given the cache back: released once there is room.
  GuestView reporting = ColdAt(d.guests[0].target_bytes, 300);
  const Decisions given =
      policy.Decide(ReclaimSnap({reporting, Hot("hot")}, 4096, true, 1e9 + kBrakeSettleSeconds), d.next_state);
  EXPECT_THAT(given.guests[0].reason, HasSubstr("released=")) << given.guests[0].reason;
  // No agent ever: forgotten once the wait is over.
  GuestView silent = ColdAt(d.guests[0].target_bytes, 1000);
  silent.agent_reclaims = std::nullopt;
  Decisions later = d;
  for (double t = 1e9 + 2; t <= 1e9 + kAgentWaitSeconds + 2; t += 2) {
    later = policy.Decide(ReclaimSnap({silent, Hot("hot")}, 4096, true, t), later.next_state);
  }
  EXPECT_THAT(later.guests[0].reason, Not(HasSubstr("braked="))) << later.guests[0].reason;
  EXPECT_THAT(later.guests[0].reason, Not(HasSubstr("awaiting_agent"))) << later.guests[0].reason;
}

// No room, no release: the budget still binds, and a braked guest whose agent gave its cache back
// (RSS 300 MiB) is held, not probed, however long; once its agent
// can no longer reclaim, what was braked is forgotten and the balloon's own rules apply.
TEST(PagecachePolicyTest, ABrakedGuestIsHeldWhileThereIsNoRoom) {
  const PagecachePolicy policy;
  Decisions d = BrakeCold(policy);
  GuestView cold = ColdAt(d.guests[0].target_bytes, 300);
  const GuestView hot = Hot("hot");
  // No room: hot's 1024 MiB + cold's floor (328 MiB, above its RSS) + the reserve (128 MiB).
  constexpr int64_t kFull = 1480;
  for (double t = 1e9 + 2; t <= 1e9 + 4 * kAgentWaitSeconds; t += 2) {
    cold.actual_bytes = cold.target_bytes = d.guests[0].target_bytes;
    d = policy.Decide(ReclaimSnap({cold, hot}, kFull, true, t), d.next_state);
    EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("released="))) << t;
    EXPECT_THAT(d.guests[0].reason, HasSubstr("braked=")) << t << d.guests[0].reason;
  }
  // Lending what its agent gave back, it is pooled: not probed either.
  EXPECT_THAT(d.guests[0].reason, HasSubstr("pooled")) << d.guests[0].reason;
  EXPECT_EQ(d.guests[0].target_bytes, cold.target_bytes) << d.guests[0].reason;
  cold.actual_bytes = cold.target_bytes = d.guests[0].target_bytes;
  cold.agent_reclaims = false;
  d = policy.Decide(ReclaimSnap({cold, hot}, kFull, true, 1e9 + 200), d.next_state);
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("braked="))) << d.guests[0].reason;
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("awaiting_agent"))) << d.guests[0].reason;
}

// A brake its agent does not answer: the balloon's inflation lowered RSS with the balloon (RSS
// at the braked size, a looping reader refilling its cache as fast as its agent drops it). That
// is no step given back; a wait after the take the brake is forgotten, the law takes again, and
// the budget's next take within the release interval is not braked.
TEST(PagecachePolicyTest, ABrakeTheAgentDoesNotAnswerIsForgotten) {
  const PagecachePolicy policy;
  Decisions d = BrakeCold(policy);
  const int64_t t1 = d.guests[0].target_bytes;
  GuestView cold = ColdAt(t1, t1 / kMib);
  for (double t = 1e9 + 2; t < 1e9 + kAgentWaitSeconds; t += 2) {
    d = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 4096, true, t), d.next_state);
    EXPECT_THAT(d.guests[0].reason, HasSubstr("braked=")) << t << d.guests[0].reason;
    EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("released="))) << t << d.guests[0].reason;
  }
  d = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 4096, true, 1e9 + kAgentWaitSeconds), d.next_state);
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("braked="))) << d.guests[0].reason;
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("awaiting_agent"))) << d.guests[0].reason;
  // The budget binds again: taken, not braked.
  d = policy.Decide(ReclaimSnap({cold, Hot("hot")}, 1200, true, 1e9 + kAgentWaitSeconds + 2), d.next_state);
  EXPECT_LT(d.guests[0].target_bytes, t1) << d.guests[0].reason;
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("braked="))) << d.guests[0].reason;
}

// An RSS of 0 is no reading: the guest is not costed by it.
TEST(PagecachePolicyTest, AnImplausibleRssIsNoCredit) {
  const PagecachePolicy policy;
  const Decisions d = policy.Decide(ReclaimSnap({Reclaiming("cold", 0), Hot("hot")}, 1800, true), PolicyState());
  EXPECT_THAT(d.summary, Not(HasSubstr("pool")));
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("pooled")));
}

// Beside a covering pool, a guest whose RSS is not read is sized as without in-guest reclaim.
TEST(PagecachePolicyTest, AGuestWithoutRssBesideAPoolIsSizedAsWithout) {
  const PagecachePolicy policy;
  GuestView plain = Guest("plain", 1024);  // no RSS, no reporting
  const Decisions on = policy.Decide(ReclaimSnap({Reclaiming("cold", 400), plain}, 4096, true), PolicyState());
  const Decisions off = policy.Decide(ReclaimSnap({plain}, 4096, false), PolicyState());
  EXPECT_THAT(on.summary, HasSubstr("covers=1"));
  EXPECT_THAT(on.guests[0].reason, HasSubstr("pooled"));
  EXPECT_EQ(on.guests[1].target_bytes, off.guests[0].target_bytes);
  EXPECT_THAT(on.guests[1].reason, Not(HasSubstr("pooled")));
}

// A guest whose stats are not safe to act on is held, and not pooled.
TEST(PagecachePolicyTest, AHeldGuestIsNoMember) {
  const PagecachePolicy policy;
  GuestView stale = Reclaiming("stale", 400);
  stale.stats_fresh = false;
  const Decisions d = policy.Decide(ReclaimSnap({stale, Hot("hot")}, 4096, true), PolicyState());
  EXPECT_THAT(d.guests[0].reason, StartsWith("pagecache: hold"));
  EXPECT_THAT(d.guests[0].reason, Not(HasSubstr("pooled")));
}

}  // namespace
}  // namespace plimsoll::policy
