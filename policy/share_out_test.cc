#include "policy/share_out.h"

#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kMib = 1 << 20;

HostView Host(double budget_mib, double available_mib = 1e6) {
  HostView h;
  h.guest_budget_bytes = static_cast<int64_t>(budget_mib * kMib);
  h.mem_available_bytes = static_cast<int64_t>(available_mib * kMib);
  h.host_reserve_bytes = 0;
  return h;
}

ShareOutGuest G(double actual_mib, double proposal_mib, double floor_mib = 256) {
  ShareOutGuest g;
  g.actual = actual_mib * kMib;
  g.target = g.actual;
  g.proposal = proposal_mib * kMib;
  g.floor = floor_mib * kMib;
  g.ceiling = 4096 * kMib;
  g.active = g.floor;
  return g;
}

std::vector<double> Mib(const std::vector<double>& v) {
  std::vector<double> out;
  for (double b : v) out.push_back(b / kMib);
  return out;
}

TEST(ShareOutTest, ShrinksAsProposedAndGrowsFromFreeMemory) {
  const ShareOutResult r = ShareOut({G(1000, 800), G(1000, 1100)}, Host(4000), {});
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{800, 1100}));
  EXPECT_EQ(r.free / kMib, 2000);
  EXPECT_EQ(r.granted[1] / kMib, 100);
  EXPECT_EQ(r.overcommit, 0);
}

// Squeezed's rule: memory another guest is about to give back is not free yet.
TEST(ShareOutTest, FreeBeforeGrow) {
  const ShareOutResult r = ShareOut({G(1500, 1000), G(500, 900)}, Host(2100), {});
  EXPECT_EQ(r.free / kMib, 100);
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1000, 600}));
}

TEST(ShareOutTest, HardDemandIsGrantedBeforePressure) {
  std::vector<ShareOutGuest> g = {G(1000, 1300), G(1000, 1300, 1300)};
  g[0].grow = GrowClass::kPressure;
  g[1].grow = GrowClass::kHardDemand;
  const ShareOutResult r = ShareOut(g, Host(2400), {});
  EXPECT_EQ(Mib(r.granted), (std::vector<double>{100, 300}));
}

// Only the part of a hard-demand guest's proposal up to its floor is hard: the rest waits for
// free memory like anyone's, and is not paid for by the others.
TEST(ShareOutTest, OnlyTheFloorIsHard) {
  std::vector<ShareOutGuest> g = {G(1000, 3000, 1200), G(1000, 1000, 300)};
  g[0].grow = GrowClass::kHardDemand;
  ShareOutResult r = ShareOut(g, Host(2000), {});
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1200, 800}));
  // With 500 MiB free, the floor is granted first and the rest out of what is left.
  r = ShareOut(g, Host(2500), {});
  EXPECT_EQ(Mib(r.granted), (std::vector<double>{500, 0}));
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1500, 1000}));
}

// An allocation is not refused while another guest holds memory above its floor.
TEST(ShareOutTest, HardDemandTakesFromOthersWhenNothingIsFree) {
  std::vector<ShareOutGuest> g = {G(1000, 1400, 1400), G(1000, 1000, 300)};
  g[0].grow = GrowClass::kHardDemand;
  const ShareOutResult r = ShareOut(g, Host(2000), {});
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1400, 600}));
  EXPECT_NEAR(r.unmet, 0, 1);
}

TEST(ShareOutTest, HardDemandIsCutToWhatOthersCanGive) {
  std::vector<ShareOutGuest> g = {G(1000, 1400, 1400), G(1000, 1000, 900)};
  g[0].grow = GrowClass::kHardDemand;
  const ShareOutResult r = ShareOut(g, Host(2000), {});
  EXPECT_NEAR(r.targets[0] / kMib, 1100, 0.01);
  EXPECT_NEAR(r.targets[1] / kMib, 900, 0.01);
  EXPECT_NEAR(r.unmet, 0, 1);
}

// A deflating balloon's raised target is already promised.
TEST(ShareOutTest, ARaisedTargetIsCommitted) {
  std::vector<ShareOutGuest> g = {G(1000, 1500), G(1000, 1200)};
  g[0].target = 1500 * kMib;
  const ShareOutResult r = ShareOut(g, Host(2700), {});
  EXPECT_EQ(r.free / kMib, 200);
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1500, 1200}));
}

TEST(ShareOutTest, TheBudgetIsAHardLimitTakenByShares) {
  // 3 x 1024 MiB in a 2048 MiB budget: 1024 MiB over. A step is 25% of 4096 = 1024 MiB, so
  // one decision may take it all; equal guests give equally.
  const ShareOutResult r = ShareOut({G(1024, 1024), G(1024, 1024), G(1024, 1024)}, Host(2048), {});
  EXPECT_NEAR(r.overcommit / kMib, 1024, 1e-6);
  for (double t : Mib(r.targets)) EXPECT_NEAR(t, 2048.0 / 3, 0.01);
  EXPECT_NEAR(r.unmet / kMib, 0, 0.01);
}

TEST(ShareOutTest, OvercommitNeverBelowAFloorNorFasterThanAStep) {
  ShareOutParams p;
  p.step_fraction = 0.05;  // 204.8 MiB per decision
  const ShareOutResult r = ShareOut({G(1024, 1024, 1000), G(1024, 1024)}, Host(1024), p);
  EXPECT_NEAR(r.targets[0] / kMib, 1000, 0.01);
  EXPECT_NEAR(r.targets[1] / kMib, 1024 - 204.8, 0.01);
  EXPECT_NEAR(r.unmet / kMib, 1024 - 24 - 204.8, 0.01);
}

TEST(ShareOutTest, AHeldGuestIsNeverShrunk) {
  std::vector<ShareOutGuest> g = {G(1024, 1024), G(1024, 1024)};
  g[0].may_shrink = false;
  const ShareOutResult r = ShareOut(g, Host(1536), {});
  EXPECT_EQ(r.targets[0] / kMib, 1024);
  EXPECT_NEAR(r.targets[1] / kMib, 512, 0.01);
}

TEST(ShareOutTest, MoreSharesGiveLess) {
  std::vector<ShareOutGuest> g = {G(1024, 1024), G(1024, 1024)};
  g[0].shares = 3000;
  const ShareOutResult r = ShareOut(g, Host(1536), {});
  EXPECT_GT(r.targets[0], r.targets[1]);
  EXPECT_NEAR((r.targets[0] + r.targets[1]) / kMib, 1536, 0.01);
}

TEST(ShareOutTest, TheHostsAvailableMemoryLimitsToo) {
  // Budget 8 GiB, but the host has only 100 MiB available beyond what the guests hold.
  const ShareOutResult r = ShareOut({G(1000, 1500)}, Host(8192, 100), {});
  EXPECT_EQ(r.limit / kMib, 1100);
  EXPECT_EQ(r.targets[0] / kMib, 1100);
}

// A guest capped at its RSS (in-guest reclaim) costs min(size, RSS): the budget counts that, less
// the pool's reserve, so its neighbours keep what the balloon sizes alone would have cut.
TEST(ShareOutTest, CappedGuestCostsItsRss) {
  // 2 x 1000 MiB on a 1800 MiB budget: 200 over in balloon sizes.
  const ShareOutResult plain = ShareOut({G(1000, 1000), G(1000, 1000)}, Host(1800), {});
  EXPECT_EQ(plain.overcommit / kMib, 200);
  std::vector<ShareOutGuest> g = {G(1000, 1000), G(1000, 1000)};
  g[0].cost_cap = 600 * kMib;  // gave 400 back
  const ShareOutResult r = ShareOut(g, Host(1800), {}, 100 * kMib);
  // Cost 600 + 1000 against 1800 - 100: within.
  EXPECT_EQ(r.overcommit, 0);
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1000, 1000}));
  EXPECT_EQ(r.limit / kMib, 1700);
  EXPECT_EQ(r.free / kMib, 100);
}

// Over the budget even in cost: a take from a capped guest is in cost, so its balloon goes below
// its RSS (a take above it would relieve nothing), within the floor and the step.
TEST(ShareOutTest, TakeFromCappedGuestIsInCost) {
  std::vector<ShareOutGuest> g = {G(1000, 1000, 256)};
  g[0].cost_cap = 600 * kMib;
  g[0].active = 300 * kMib;
  const ShareOutResult r = ShareOut(g, Host(500), {});
  EXPECT_EQ(r.overcommit / kMib, 100);
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{500}));
  EXPECT_EQ(r.taken[0] / kMib, 500);  // the balloon moves 500, the cost 100
  EXPECT_EQ(r.unmet, 0);
}

// The reserve is kept whichever term binds, the host's own room too.
TEST(ShareOutTest, TheReserveIsKeptWhenTheHostsRoomBinds) {
  std::vector<ShareOutGuest> g = {G(1000, 1000)};
  g[0].cost_cap = 600 * kMib;
  const ShareOutResult r = ShareOut(g, Host(4000, 500), {}, 100 * kMib);
  // Room: 500 available + 600 it costs at its actual size, less the reserve.
  EXPECT_EQ(r.limit / kMib, 1000);
  EXPECT_EQ(r.free / kMib, 400);
}

// A take from a capped guest whose target is above its commitment (growth granted this
// decision) is made in size down to the commitment: the lent memory stays lent. g0 (hard class,
// no hard part: its growth comes from free memory) is granted 200, then g1's hard demand leaves
// 150 over: 1200 -> 1050, cost 800 -> 650.
TEST(ShareOutTest, ATakeAboveTheCommitmentIsMadeInSize) {
  std::vector<ShareOutGuest> g = {G(1000, 1200, 256), G(1000, 1500, 1500)};
  g[0].cost_cap = 400 * kMib;
  g[0].grow = GrowClass::kHardDemand;
  g[0].hard_cap = 900 * kMib;
  g[0].active = 1000 * kMib;
  g[1].grow = GrowClass::kHardDemand;
  const ShareOutResult r = ShareOut(g, Host(1950), {});
  EXPECT_EQ(r.overcommit / kMib, 150);
  EXPECT_EQ(r.granted[0] / kMib, 200);
  EXPECT_EQ(r.targets[0] / kMib, 1050) << "taken=" << r.taken[0] / kMib;
  // The cost: the size above the commitment less the lent; the cap between; the size below.
  EXPECT_EQ(ShareOutCost(g[0], 1100 * kMib) / kMib, 500);
  EXPECT_EQ(ShareOutCost(g[0], 700 * kMib) / kMib, 400);
  EXPECT_EQ(ShareOutCost(g[0], 300 * kMib) / kMib, 300);
}

// Growth over the commitment costs in full, cap or not.
TEST(ShareOutTest, CappedGuestGrowthCostsInFull) {
  std::vector<ShareOutGuest> g = {G(1000, 1300, 1300), G(1000, 1000)};
  g[0].cost_cap = 400 * kMib;
  g[0].grow = GrowClass::kHardDemand;
  // Cost before: 400 + 1000 = 1400 of 1600: 200 free, 300 wanted: the other pays 100.
  const ShareOutResult r = ShareOut(g, Host(1600), {});
  EXPECT_EQ(r.free / kMib, 200);
  EXPECT_EQ(r.granted[0] / kMib, 300);
  EXPECT_EQ(Mib(r.targets), (std::vector<double>{1300, 900}));
}

}  // namespace
}  // namespace plimsoll::policy
