#include "policy/pressure_edge.h"

#include <cmath>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kMib = 1 << 20;
constexpr double kStep = 80 * kMib;
constexpr double kLawBackoff = 3000 * kMib;  // what the law's own backoff would give

TEST(PressureEdgeTest, AProbeThatHurtIsGivenBackWithAStepMore) {
  EdgeMemory m;
  RecordCalm(2000 * kMib, 100, &m);  // calm at 2000 MiB, then probed to 1920 MiB
  const double a = EdgeBackoff(1920 * kMib, kLawBackoff, kStep, true, 110, EdgeParams(), &m);
  EXPECT_EQ(a, 2080 * kMib);
  // No take or probe below it for the window (600 s).
  EXPECT_EQ(EdgeLimit(200, m), 2080 * kMib);
  EXPECT_EQ(EdgeLimit(709, m), 2080 * kMib);
  EXPECT_EQ(EdgeLimit(710, m), -HUGE_VAL);
}

TEST(PressureEdgeTest, PressureThatPersistsGetsTheLawsBackoff) {
  EdgeMemory m;
  RecordCalm(2000 * kMib, 100, &m);
  EdgeBackoff(1920 * kMib, kLawBackoff, kStep, true, 110, EdgeParams(), &m);
  // Still pressured at 2080 MiB within the episode: the law's own backoff, the edge above A.
  const double a = EdgeBackoff(2080 * kMib, kLawBackoff, kStep, false, 130, EdgeParams(), &m);
  EXPECT_EQ(a, kLawBackoff);
  EXPECT_EQ(EdgeLimit(131, m), 2160 * kMib);
}

TEST(PressureEdgeTest, PressureWithoutAShrinkSinceTheCalmGetsTheLawsBackoff) {
  EdgeMemory m;
  RecordCalm(2000 * kMib, 100, &m);
  // Pressure at the size it was calm at: the workload changed, not our step.
  EXPECT_EQ(EdgeBackoff(2000 * kMib, kLawBackoff, kStep, true, 110, EdgeParams(), &m), kLawBackoff);
  EXPECT_EQ(EdgeLimit(111, m), 2080 * kMib);
}

TEST(PressureEdgeTest, AnOldCalmIsNotTrusted) {
  EdgeMemory m;
  RecordCalm(2000 * kMib, 100, &m);
  EXPECT_EQ(EdgeBackoff(1920 * kMib, kLawBackoff, kStep, true, 701, EdgeParams(), &m), kLawBackoff);
}

TEST(PressureEdgeTest, NoCalmSeenGetsTheLawsBackoff) {
  EdgeMemory m;
  EXPECT_EQ(EdgeBackoff(1920 * kMib, kLawBackoff, kStep, true, 110, EdgeParams(), &m), kLawBackoff);
}

TEST(PressureEdgeTest, OffChangesNothing) {
  EdgeParams p;
  p.window_seconds = 0;
  EdgeMemory m;
  RecordCalm(2000 * kMib, 100, &m);
  EXPECT_EQ(EdgeBackoff(1920 * kMib, kLawBackoff, kStep, true, 110, p, &m), kLawBackoff);
  EXPECT_EQ(EdgeLimit(111, m), -HUGE_VAL);
}

}  // namespace
}  // namespace plimsoll::policy
