#include "sim/reversal_counter.h"

#include "gtest/gtest.h"

namespace plimsoll::sim {
namespace {

// A target drifting by less than the threshold, up and down, turns nothing: the every-reversal
// count would be 5 here.
TEST(ReversalCounterTest, WigglesUnderTheThresholdDoNotCount) {
  ReversalCounter c(1000, 20);
  for (double t : {990, 1000, 985, 1005, 990, 1000}) c.Add(t);
  EXPECT_EQ(c.reversals(), 0);
}

// Down by 100, up by 50, down by 50: two reversals; the first move only sets the direction.
TEST(ReversalCounterTest, ChangesOfAtLeastTheThresholdCount) {
  ReversalCounter c(1000, 20);
  for (double t : {950, 900, 950, 900}) c.Add(t);
  EXPECT_EQ(c.reversals(), 2);
}

// The threshold is measured from the furthest point of the run, not from the last target: a
// slow climb back of 10 a step turns once it is 20 above the bottom.
TEST(ReversalCounterTest, MeasuredFromTheFurthestPoint) {
  ReversalCounter c(1000, 20);
  c.Add(900);
  c.Add(910);
  EXPECT_EQ(c.reversals(), 0);
  c.Add(920);
  EXPECT_EQ(c.reversals(), 1);
  c.Add(915);  // 5 back from the new top: nothing
  c.Add(930);
  EXPECT_EQ(c.reversals(), 1);
}

// Before a direction is known, a swing over the threshold either way sets it, measured over the
// whole range seen: up 15, then down 25 from that top.
TEST(ReversalCounterTest, TheFirstDirectionComesFromTheRangeSeen) {
  ReversalCounter c(1000, 20);
  c.Add(1015);
  c.Add(990);
  EXPECT_EQ(c.reversals(), 0);
  c.Add(1011);
  EXPECT_EQ(c.reversals(), 1);
}

}  // namespace
}  // namespace plimsoll::sim
