#include "policy/balloon_progress.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMib = int64_t{1} << 20;

GuestView At(double actual_mib, double target_mib) {
  GuestView g;
  g.max_bytes = 4096 * kMib;
  g.actual_bytes = static_cast<int64_t>(actual_mib * kMib);
  g.target_bytes = static_cast<int64_t>(target_mib * kMib);
  return g;
}

// As At, with the agent's balloon counters at zero.
GuestView WithCounters(double actual_mib, double target_mib) {
  GuestView g = At(actual_mib, target_mib);
  g.balloon_inflate_pages = 0;
  g.balloon_deflate_pages = 0;
  return g;
}

TEST(BalloonProgressTest, FirstCallOnlyRecords) {
  ProgressMemory m;
  ProgressVerdict v = CheckProgress(At(4096, 1024), 0, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kNone);
  EXPECT_EQ(m.window_direction, -1);
  EXPECT_EQ(v.tolerance_bytes, 16.0 * kMib);  // 1% of 1 GiB is less than the minimum
}

TEST(BalloonProgressTest, AHealthyBalloonArrives) {
  ProgressMemory m;
  CheckProgress(At(4096, 3072), 0, ProgressParams(), &m);
  ProgressVerdict v = CheckProgress(At(3500, 3072), 5, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kNone);
  EXPECT_FALSE(v.arrived);
  v = CheckProgress(At(3080, 3072), 10, ProgressParams(), &m);
  EXPECT_TRUE(v.arrived);
  v = CheckProgress(At(3072, 3072), 15, ProgressParams(), &m);
  EXPECT_FALSE(v.arrived);  // arriving is reported once
}

TEST(BalloonProgressTest, APageEveryFewSecondsIsStuck) {
  ProgressMemory m;
  double actual = 4096;
  CheckProgress(At(actual, 2048), 0, ProgressParams(), &m);
  ProgressVerdict v;
  for (int t = 3; t <= 30; t += 3) {
    actual -= 4.0 / 1024;  // one 4 KiB page
    v = CheckProgress(At(actual, 2048), t, ProgressParams(), &m);
    if (t < 30) {
      EXPECT_EQ(v.event, ProgressEvent::kNone) << t;
    }
  }
  EXPECT_EQ(v.event, ProgressEvent::kStuck);
  EXPECT_THAT(v.detail, HasSubstr("need=30MiB"));
}

TEST(BalloonProgressTest, SlowButSteadyIsNotStuck) {
  ProgressMemory m;
  double actual = 4096;
  CheckProgress(At(actual, 1024), 0, ProgressParams(), &m);
  for (int t = 5; t <= 120; t += 5) {
    actual -= 4 * 5;  // 4 MiB/s
    EXPECT_EQ(CheckProgress(At(actual, 1024), t, ProgressParams(), &m).event, ProgressEvent::kNone)
        << t;
  }
}

TEST(BalloonProgressTest, ATargetMovingTheSameWayDoesNotRestartTheClock) {
  // A probe lowers the target every 5 s while the balloon does not move at all.
  ProgressMemory m;
  CheckProgress(At(4096, 4000), 0, ProgressParams(), &m);
  ProgressVerdict v;
  for (int t = 5; t <= 30; t += 5) v = CheckProgress(At(4096, 4000 - 20 * t), t, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kStuck);
}

TEST(BalloonProgressTest, DeflateOnOomIsSelfDeflation) {
  ProgressMemory m;
  CheckProgress(At(2048, 2048), 0, ProgressParams(), &m);
  ProgressVerdict v = CheckProgress(At(2600, 2048), 5, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kSelfDeflated);
  EXPECT_THAT(v.detail, HasSubstr("actual=2600MiB rose_from=2048MiB"));
  // A deflate we asked for is not.
  ProgressMemory m2;
  CheckProgress(At(2048, 2048), 0, ProgressParams(), &m2);
  EXPECT_EQ(CheckProgress(At(2600, 3072), 5, ProgressParams(), &m2).event, ProgressEvent::kNone);
}

// The calls saw 1500 then 1300 MiB (falling, on the way to 1024): only a balloon-change event
// between them shows it reached 1024 MiB first, so 1300 MiB is a rise, once.
TEST(BalloonProgressTest, ARiseSeenOnlyByAnEventBetweenCallsIsSelfDeflation) {
  ProgressMemory m;
  CheckProgress(At(2048, 1024), 0, ProgressParams(), &m);
  CheckProgress(At(1500, 1024), 5, ProgressParams(), &m);
  ProgressMemory without = m;
  NoteBalloonSize(1024.0 * kMib, 1024.0 * kMib, &m);
  ProgressVerdict v = CheckProgress(At(1300, 1024), 10, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kSelfDeflated);
  EXPECT_THAT(v.detail, HasSubstr("actual=1300MiB rose_from=1024MiB"));
  EXPECT_EQ(CheckProgress(At(1300, 1024), 15, ProgressParams(), &m).event, ProgressEvent::kNone)
      << "said once";
  EXPECT_EQ(CheckProgress(At(1300, 1024), 10, ProgressParams(), &without).event, ProgressEvent::kNone);
}

TEST(BalloonProgressTest, DeflatingWhileWeInflateIsChurn) {
  GuestView g = WithCounters(4096, 2048);
  ProgressMemory m;
  CheckProgress(g, 0, ProgressParams(), &m);
  g.actual_bytes = 4090 * kMib;
  g.balloon_inflate_pages = 256 * 500;  // 500 MiB in
  g.balloon_deflate_pages = 256 * 494;  // 494 MiB out
  ProgressVerdict v = CheckProgress(g, 5, ProgressParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kChurning);
  EXPECT_THAT(v.detail, HasSubstr("balloon_inflated=500MiB balloon_deflated=494MiB net=6MiB"));
  // Deflate counters rising while we deflate are what we asked for.
  GuestView d = WithCounters(1024, 2048);
  ProgressMemory m2;
  CheckProgress(d, 0, ProgressParams(), &m2);
  d.actual_bytes = 1500 * kMib;
  d.balloon_deflate_pages = 256 * 476;
  EXPECT_EQ(CheckProgress(d, 5, ProgressParams(), &m2).event, ProgressEvent::kNone);
}

TEST(BalloonProgressTest, DeflationAfterARaiseOfTheTargetIsNotChurn) {
  // Inflating from 4096 towards 2048. Between two calls the target is raised to 3800 (a
  // backoff) and the report shows 600 MiB in and, after the raise, 400 MiB out: as churn-like
  // as the counters get, but the deflation is the one we asked for.
  GuestView g = WithCounters(4096, 2048);
  ProgressMemory m;
  CheckProgress(g, 0, ProgressParams(), &m);
  g.actual_bytes = 3696 * kMib;
  g.target_bytes = 3800 * kMib;
  g.balloon_inflate_pages = 256 * 600;
  g.balloon_deflate_pages = 256 * 400;
  EXPECT_EQ(CheckProgress(g, 1, ProgressParams(), &m).event, ProgressEvent::kNone);
  // Inflating again towards 2048 from 3800; within 5 s of the raise the counters still carry
  // its deflation: not churn.
  g.target_bytes = 2048 * kMib;
  g.actual_bytes = 3800 * kMib;
  CheckProgress(g, 2, ProgressParams(), &m);
  g.actual_bytes = 3700 * kMib;
  g.balloon_inflate_pages = 256 * (600 + 200);
  g.balloon_deflate_pages = 256 * (400 + 150);
  EXPECT_EQ(CheckProgress(g, 3, ProgressParams(), &m).event, ProgressEvent::kNone);
  // 5 s and more after the raise, both counters rising while inflating is churn.
  g.actual_bytes = 3690 * kMib;
  g.balloon_inflate_pages = 256 * (800 + 200);
  g.balloon_deflate_pages = 256 * (550 + 190);
  EXPECT_EQ(CheckProgress(g, 7, ProgressParams(), &m).event, ProgressEvent::kChurning);
  // Only deflation while inflating (no inflation in the interval) is not churn either.
  g.actual_bytes = 3600 * kMib;
  g.balloon_deflate_pages = 256 * (740 + 100);
  EXPECT_EQ(CheckProgress(g, 12, ProgressParams(), &m).event, ProgressEvent::kNone);
}

}  // namespace
}  // namespace plimsoll::policy
