#include "sim/rng.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::sim {
namespace {

// The output of SplitMix64's reference implementation (Vigna, prng.di.unimi.it/splitmix64.c)
// for seed 1234567: the generator is that fixed one, not whatever the platform has.
TEST(RngTest, IsSplitMix64) {
  Rng r(1234567);
  EXPECT_EQ(r.Next(), 6457827717110365317ULL);
  EXPECT_EQ(r.Next(), 3203168211198807973ULL);
  EXPECT_EQ(r.Next(), 9817491932198370423ULL);
}

TEST(RngTest, ItemStreamsAreFixedAndIndependentOfEachOther) {
  Rng a = Rng::ForItem(7, 3);
  Rng b = Rng::ForItem(7, 3);
  Rng other_index = Rng::ForItem(7, 4);
  Rng other_seed = Rng::ForItem(8, 3);
  const uint64_t first = a.Next();
  EXPECT_EQ(first, b.Next());
  EXPECT_NE(first, other_index.Next());
  EXPECT_NE(first, other_seed.Next());
}

TEST(RngTest, DistributionsStayInTheirRanges) {
  Rng r(42);
  std::vector<int> seen(5, 0);
  double lowest = 1, highest = 0;
  for (int i = 0; i < 20000; ++i) {
    const double u = r.Uniform();
    lowest = std::min(lowest, u);
    highest = std::max(highest, u);
    ASSERT_GE(u, 0);
    ASSERT_LT(u, 1);
    const int64_t k = r.Int(2, 6);
    ASSERT_GE(k, 2);
    ASSERT_LE(k, 6);
    ++seen[k - 2];
    const double x = r.Uniform(0.5, 0.95);
    ASSERT_GE(x, 0.5);
    ASSERT_LT(x, 0.95);
  }
  EXPECT_LT(lowest, 0.001);
  EXPECT_GT(highest, 0.999);
  for (int count : seen) EXPECT_NEAR(count, 4000, 400);  // both ends are reached, evenly
  std::vector<int> weighted(3, 0);
  for (int i = 0; i < 10000; ++i) ++weighted[r.Weighted({1, 0, 3})];
  EXPECT_EQ(weighted[1], 0);
  EXPECT_NEAR(weighted[2], 7500, 300);
}

}  // namespace
}  // namespace plimsoll::sim
