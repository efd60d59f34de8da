#include "policy/futile_pressure.h"

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kMib = 1 << 20;

// A 1024 MiB guest whose probe step is 20 MiB, landed at `mib` at time `landed`.
// Its working set stays at `ws_mib`.
FutileSize At(double mib, double landed, double ws_mib = 300) {
  return FutileSize{mib * kMib, ws_mib * kMib, 1024 * kMib, 20 * kMib, 4 * kMib, landed};
}

constexpr double kKeep = 600;

// The trio lab's stream guest: pressure 60 at 600 MiB, grown to 880 MiB, still 50 there.
TEST(FutilePressureTest, PressureThatGrowthDidNotLowerIsFutile) {
  FutileMemory m;
  FutileParams p;
  EXPECT_EQ(FilterFutile(60, true, At(600, 0), 100, kKeep, p, &m), 60);  // the episode begins
  // Grown; readings within the settle time do not count.
  EXPECT_EQ(FilterFutile(70, true, At(880, 100), 105, kKeep, p, &m), 70);
  EXPECT_EQ(FilterFutile(50, true, At(880, 100), 112, kKeep, p, &m), 50);  // one settled reading
  EXPECT_EQ(FilterFutile(50, true, At(880, 100), 114, kKeep, p, &m), 0);   // two: the verdict
  ASSERT_TRUE(m.level.has_value());
  EXPECT_EQ(*m.level, 60);
  // Held anywhere, as long as pressure stays within ratio * level; beyond it, it counts.
  EXPECT_EQ(FilterFutile(85, false, At(400, 200), 201, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(95, true, At(400, 200), 220, kKeep, p, &m), 0);   // one swing: no
  EXPECT_EQ(FilterFutile(40, true, At(400, 200), 222, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(95, true, At(400, 200), 224, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(99, true, At(400, 200), 226, kKeep, p, &m), 99);  // two in a row
  // Futile pressure goes on: so does the verdict.
  EXPECT_EQ(FilterFutile(60, true, At(400, 200), 300, kKeep, p, &m), 0);
  EXPECT_EQ(m.verdict_s, 300);
  // Calm readings do not extend it: keep_seconds after the last futile pressure the guest is
  // measured again.
  EXPECT_EQ(FilterFutile(0.5, true, At(400, 200), 500, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(60, true, At(400, 200), 300 + kKeep + 1, kKeep, p, &m), 60);
  EXPECT_FALSE(m.level.has_value());
}

// A hot set squeezed: growth lowers the pressure by more than a third; no verdict.
TEST(FutilePressureTest, PressureThatGrowthLoweredIsNot) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(60, true, At(600, 0), 100, kKeep, p, &m);
  EXPECT_EQ(FilterFutile(30, true, At(880, 100), 111, kKeep, p, &m), 30);
  EXPECT_EQ(FilterFutile(20, true, At(880, 100), 113, kKeep, p, &m), 20);
  EXPECT_EQ(FilterFutile(25, true, At(880, 100), 115, kKeep, p, &m), 25);
  EXPECT_FALSE(m.level.has_value());
}

// Readings at the size the episode began at prove nothing: the guest must have been grown.
// A guest backed off twice: the readings at both grown sizes count, from the first landing.
TEST(FutilePressureTest, ReadingsAtEveryGrownSizeCount) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(60, true, At(580, 0), 100, kKeep, p, &m);
  EXPECT_EQ(FilterFutile(70, true, At(820, 102), 104, kKeep, p, &m), 70);  // settling
  EXPECT_EQ(FilterFutile(65, true, At(920, 108), 112, kKeep, p, &m), 65);  // one
  EXPECT_EQ(FilterFutile(55, true, At(970, 113), 114, kKeep, p, &m), 0);   // two: the verdict
  // Back below A0 + one step: the evidence starts again.
  FutileMemory again;
  FilterFutile(60, true, At(580, 0), 100, kKeep, p, &again);
  FilterFutile(60, true, At(820, 102), 113, kKeep, p, &again);
  FilterFutile(60, true, At(590, 114), 126, kKeep, p, &again);
  EXPECT_EQ(again.count, 0);
  EXPECT_FALSE(again.level.has_value());
}

// A squeezed cache refilling after the growth: its pressure lasts, but the memory given becomes
// working set (here 20 MiB/s of it, 220 MiB by the first settled reading). Not futile.
TEST(FutilePressureTest, ACacheRefillingIsNotFutile) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(60, true, At(600, 0, 500), 100, kKeep, p, &m);
  for (double t = 111; t < 150; t += 2) {
    EXPECT_EQ(FilterFutile(60, true, At(880, 100, 500 + (t - 100) * 20), t, kKeep, p, &m), 60) << t;
  }
  EXPECT_FALSE(m.level.has_value());
}

// A guest whose working set fills it: pressure near the target that a small grant did not move
// is no proof of futility.
TEST(FutilePressureTest, NoVerdictWhenTheWorkingSetFillsTheGuest) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(1.3, true, At(1000, 0, 1000), 100, kKeep, p, &m);
  EXPECT_EQ(FilterFutile(1.3, true, At(1022, 100, 1010), 111, kKeep, p, &m), 1.3);
  EXPECT_EQ(FilterFutile(1.3, true, At(1022, 100, 1010), 113, kKeep, p, &m), 1.3);
  EXPECT_FALSE(m.level.has_value());
}

TEST(FutilePressureTest, NoVerdictWithoutGrowth) {
  FutileMemory m;
  FutileParams p;
  for (double t = 100; t < 160; t += 2) {
    EXPECT_EQ(FilterFutile(60, true, At(600, 0), t, kKeep, p, &m), 60) << t;
  }
  EXPECT_FALSE(m.level.has_value());
}

// At the ceiling nothing larger exists: pressure there is futile once measured settled twice.
TEST(FutilePressureTest, PressureAtTheCeilingIsFutile) {
  FutileMemory m;
  FutileParams p;
  EXPECT_EQ(FilterFutile(40, true, At(1022, -1e9), 100, kKeep, p, &m), 40);
  EXPECT_EQ(FilterFutile(40, true, At(1022, -1e9), 102, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 40);
}

// A verdict reached as a reader ramped up (the trio lab's stream guest: 92, then 300 for the rest
// of the run): not taken below the verdict's size, a measured reading beyond the level raises it;
// after a take such pressure still counts.
TEST(FutilePressureTest, UntilItIsTakenTheLevelRisesWithTheLoop) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(2, true, At(1022, -1e9), 100, kKeep, p, &m);
  ASSERT_EQ(FilterFutile(92, true, At(1022, -1e9), 101, kKeep, p, &m), 0);
  ASSERT_EQ(*m.level, 92);
  EXPECT_EQ(FilterFutile(300, true, At(1022, -1e9), 102, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 300);
  EXPECT_EQ(m.verdict_s, 102);
  EXPECT_EQ(FilterFutile(330, true, At(1022, -1e9), 103, kKeep, p, &m), 0);  // within 1.5 x 300
  // Unmeasured (the balloon on its way) it does not rise.
  EXPECT_EQ(FilterFutile(600, false, At(1022, -1e9), 104, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 300);
  EXPECT_EQ(FilterFutile(330, true, At(1022, -1e9), 105, kKeep, p, &m), 0);
  // Taken below the ceiling, pressure beyond 1.5 x 300 twice in a row counts again.
  EXPECT_EQ(FilterFutile(500, true, At(700, 106), 120, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(500, true, At(700, 106), 122, kKeep, p, &m), 500);
  EXPECT_EQ(*m.level, 300);
}

// Every guest backed off at once under a full budget: none is grown, so no grown size can be
// measured. A size the budget will not grow counts as the ceiling does for a guest holding memory
// beyond its working set (the trio lab's stream guest at 711 MiB, W = 256 MiB); not for one whose
// working set fills it (a hot set squeezed), nor without the denial.
TEST(FutilePressureTest, ASizeTheBudgetWillNotGrowIsEvidenceToo) {
  FutileParams p;
  auto denied = [](double ws_mib) {
    FutileSize z = At(711, 100, ws_mib);
    z.growth_denied = true;
    return z;
  };
  FutileMemory m;
  EXPECT_EQ(FilterFutile(99, true, denied(256), 105, kKeep, p, &m), 99);   // within the settle time
  EXPECT_EQ(FilterFutile(300, true, denied(256), 111, kKeep, p, &m), 300);
  EXPECT_EQ(FilterFutile(330, true, denied(256), 113, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 330);
  FutileMemory hot;
  for (double t = 105; t < 140; t += 2) EXPECT_EQ(FilterFutile(300, true, denied(700), t, kKeep, p, &hot), 300) << t;
  EXPECT_FALSE(hot.level.has_value());
  FutileMemory granted;
  for (double t = 105; t < 140; t += 2) {
    EXPECT_EQ(FilterFutile(300, true, At(711, 100, 256), t, kKeep, p, &granted), 300) << t;
  }
  EXPECT_FALSE(granted.level.has_value());
  // The verdict at 711 MiB, then the loop's own pressure higher, still there: the level rises.
  EXPECT_EQ(FilterFutile(600, true, denied(256), 115, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 600);
  // Taken below it, where the budget will not grow it back either: it rises too.
  FutileSize taken = denied(256);
  taken.actual_bytes = 600 * kMib;
  EXPECT_EQ(FilterFutile(1000, true, taken, 117, kKeep, p, &m), 0);
  EXPECT_EQ(*m.level, 1000);
  // Taken below it with growth granted: the take hurt, and two such readings count.
  taken.growth_denied = false;
  EXPECT_EQ(FilterFutile(1600, true, taken, 119, kKeep, p, &m), 0);
  EXPECT_EQ(FilterFutile(1600, true, taken, 121, kKeep, p, &m), 1600);
}

// Calm ends an episode without a verdict; unmeasured reports neither start nor decide one.
TEST(FutilePressureTest, CalmEndsTheEpisodeAndUnmeasuredReportsCountForNothing) {
  FutileMemory m;
  FutileParams p;
  FilterFutile(60, true, At(600, 0), 100, kKeep, p, &m);
  FilterFutile(0.2, true, At(880, 100), 111, kKeep, p, &m);
  EXPECT_FALSE(m.start_bytes.has_value());
  for (double t = 120; t < 140; t += 2) FilterFutile(60, false, At(880, 100), t, kKeep, p, &m);
  EXPECT_FALSE(m.start_bytes.has_value());
  EXPECT_FALSE(m.level.has_value());
}

TEST(FutilePressureTest, OffPassesPressureThrough) {
  FutileMemory m;
  FutileParams p;
  p.ratio = 0;
  FilterFutile(40, true, At(1022, -1e9), 100, kKeep, p, &m);
  EXPECT_EQ(FilterFutile(40, true, At(1022, -1e9), 102, kKeep, p, &m), 40);
  EXPECT_FALSE(m.level.has_value());
}

}  // namespace
}  // namespace plimsoll::policy
