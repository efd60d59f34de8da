#include "policy/idle_tax.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kGib = 1024.0 * 1024 * 1024;

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

ReclaimCandidate C(double size_gib, double active_gib, double lowest_gib = 0,
                   double shares = 1000) {
  ReclaimCandidate c;
  c.size = size_gib * kGib;
  c.active = active_gib * kGib;
  c.lowest = lowest_gib * kGib;
  c.shares = shares;
  return c;
}

TEST(IdleTaxTest, NothingToTakeTakesNothing) {
  EXPECT_EQ(Sum(DistributeReclaim({C(4, 1)}, 0, 0.75)), 0);
  EXPECT_EQ(Sum(DistributeReclaim({C(4, 1)}, -kGib, 0.75)), 0);
  EXPECT_EQ(Sum(DistributeReclaim({C(4, 1)}, std::nan(""), 0.75)), 0);
  EXPECT_TRUE(DistributeReclaim({}, kGib, 0.75).empty());
}

TEST(IdleTaxTest, EqualGuestsGiveEqually) {
  const std::vector<double> take = DistributeReclaim({C(4, 1), C(4, 1), C(4, 1)}, 1.5 * kGib, 0.75);
  ASSERT_EQ(take.size(), 3u);
  for (double t : take) EXPECT_NEAR(t, 0.5 * kGib, 1e3);
}

TEST(IdleTaxTest, IdleMemoryIsTakenFirst) {
  // Same size and shares; the first guest uses 1 GiB of 4, the second 3.5 GiB of 4.
  const std::vector<double> take = DistributeReclaim({C(4, 1), C(4, 3.5)}, 2 * kGib, 0.75);
  EXPECT_NEAR(Sum(take), 2 * kGib, 1e3);
  EXPECT_GT(take[0], 3 * take[1]);
}

TEST(IdleTaxTest, WithoutTaxOnlySharesCount) {
  // tau = 0: rho = S / P, so equal shares end at equal sizes whatever their activity.
  const std::vector<double> take = DistributeReclaim({C(4, 1), C(4, 3.5)}, 2 * kGib, 0);
  EXPECT_NEAR(take[0], kGib, 1e3);
  EXPECT_NEAR(take[1], kGib, 1e3);
}

TEST(IdleTaxTest, MoreSharesKeepMore) {
  const std::vector<double> take =
      DistributeReclaim({C(4, 4, 0, 2000), C(4, 4, 0, 1000)}, 3 * kGib, 0.75);
  // All active: sizes end proportional to shares, 8 - 3 = 5 GiB split 2:1.
  EXPECT_NEAR(4 * kGib - take[0], 2 * 5.0 / 3 * kGib, 1e4);
  EXPECT_NEAR(4 * kGib - take[1], 5.0 / 3 * kGib, 1e4);
}

TEST(IdleTaxTest, LowestIsRespectedAndRoomCapsTheTotal) {
  const std::vector<double> take = DistributeReclaim({C(4, 1, 3), C(2, 1, 1.5)}, 10 * kGib, 0.75);
  EXPECT_NEAR(take[0], kGib, 1);
  EXPECT_NEAR(take[1], 0.5 * kGib, 1);
  const std::vector<double> some = DistributeReclaim({C(4, 0, 3.5), C(4, 0, 0)}, 2 * kGib, 0.75);
  EXPECT_NEAR(some[0], 0.5 * kGib, 1e3);
  EXPECT_NEAR(some[1], 1.5 * kGib, 1e3);
}

TEST(IdleTaxTest, OddInputsAreSafe) {
  // Active above size, lowest above size, zero shares, empty guest.
  const std::vector<double> take =
      DistributeReclaim({C(2, 5, 0, 0), C(1, 0, 3), C(0, 0)}, kGib, 5);
  EXPECT_NEAR(Sum(take), kGib, 1e3);
  EXPECT_EQ(take[1], 0);
  EXPECT_EQ(take[2], 0);
}

TEST(IdleTaxTest, RatioCapStopsTakingFromDearerGuests) {
  // Two all-active guests of 4 GiB; the first pays 4x per page. A cap at the second's rho at
  // 4 GiB lets nothing be taken from the first, and from the second only what brings it to that
  // rho, which it already has: nothing.
  const std::vector<ReclaimCandidate> c = {C(4, 4, 0, 4000), C(4, 4, 0, 1000)};
  const double cheap_rho = ShareRatio(c[1], 4 * kGib, 0.75);
  EXPECT_NEAR(cheap_rho, 1000 / (4 * kGib), 1e-15);
  EXPECT_EQ(Sum(DistributeReclaim(c, kGib, 0.75, cheap_rho)), 0);
  // A cap at the dear guest's rho at 2 GiB: the cheap guest gives down to 0.5 GiB (3.5 GiB),
  // the dear one down to 2 GiB only once the deficit needs it.
  const double cap = ShareRatio(c[0], 2 * kGib, 0.75);
  const std::vector<double> take = DistributeReclaim(c, 10 * kGib, 0.75, cap);
  EXPECT_NEAR(take[0], 2 * kGib, 1e4);
  EXPECT_NEAR(take[1], 3.5 * kGib, 1e4);
  // Uncapped, the same deficit takes everything.
  EXPECT_NEAR(Sum(DistributeReclaim(c, 10 * kGib, 0.75)), 8 * kGib, 1);
}

}  // namespace
}  // namespace plimsoll::policy
