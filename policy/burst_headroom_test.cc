#include "policy/burst_headroom.h"

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

TEST(BurstHeadroomTest, FirstReportHasNoBurst) {
  BurstMemory m;
  EXPECT_EQ(UpdateBurst(1000, 0, BurstParams(), &m), 0);
}

TEST(BurstHeadroomTest, TheLargestRiseIsKeptForTheWindow) {
  BurstParams p;
  p.window_seconds = 600;
  BurstMemory m;
  UpdateBurst(1000, 0, p, &m);
  EXPECT_EQ(UpdateBurst(3000, 10, p, &m), 2000);  // an allocation under way: it leads by its rise
  EXPECT_EQ(UpdateBurst(1000, 20, p, &m), 2000);  // freed: the room stays
  EXPECT_EQ(UpdateBurst(1500, 30, p, &m), 2000);  // a smaller rise does not replace it
  EXPECT_EQ(UpdateBurst(1500, 610, p, &m), 2000);
  EXPECT_EQ(UpdateBurst(1500, 611, p, &m), 0);    // the window passed: the newest rise (none)
}

TEST(BurstHeadroomTest, Off) {
  BurstParams p;
  p.window_seconds = 0;
  BurstMemory m;
  UpdateBurst(1000, 0, p, &m);
  EXPECT_EQ(UpdateBurst(3000, 10, p, &m), 0);
}

}  // namespace
}  // namespace plimsoll::policy
