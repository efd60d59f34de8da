#include "policy/pressure_profile.h"

#include <optional>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kMib = 1 << 20;
constexpr double kCeiling = 1000 * kMib;  // buckets of 50 MiB

PressureReading Stall(double pct) { return PressureReading{pct, std::nullopt, std::nullopt}; }

// The component on, at the ratio it was measured with.
ProfileParams On() {
  ProfileParams p;
  p.ratio = 1.5;
  return p;
}

TEST(PressureProfileTest, NothingMeasuredAboveMeansTheReadingItself) {
  ProfileMemory m;
  const PressureReading e = ExcessPressure(m, 600 * kMib, kCeiling, Stall(40), 0, On());
  EXPECT_EQ(e.stall_pct, 40);
}

TEST(PressureProfileTest, AtTheCeilingNoSizeCouldRelieveIt) {
  ProfileMemory m;
  const PressureReading e = ExcessPressure(m, kCeiling, kCeiling, Stall(40), 0, On());
  EXPECT_EQ(e.stall_pct, 0);
}

TEST(PressureProfileTest, OnlyTheExcessOverALargerSizesReadingCounts) {
  ProfileMemory m;
  const ProfileParams p = On();
  RecordPressure(&m, 900 * kMib, kCeiling, Stall(40), 0, p);
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, Stall(55), 1, p).stall_pct, 0);
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, Stall(70), 1, p).stall_pct, 10);
  // The least reading above counts, not the nearest.
  RecordPressure(&m, 800 * kMib, kCeiling, Stall(4), 0, p);
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, Stall(55), 1, p).stall_pct, 49);
}

TEST(PressureProfileTest, TheReferenceIsTheLeastReadingAtALargerSize) {
  ProfileMemory m;
  const ProfileParams p = On();
  EXPECT_FALSE(ReferencePressure(m, 600 * kMib, kCeiling, 0, p).disk_bytes_per_s.has_value());
  RecordPressure(&m, 900 * kMib, kCeiling, PressureReading{3, std::nullopt, 150 * kMib}, 0, p);
  RecordPressure(&m, 800 * kMib, kCeiling, PressureReading{4, std::nullopt, 100 * kMib}, 0, p);
  RecordPressure(&m, 610 * kMib, kCeiling, PressureReading{1, std::nullopt, 10 * kMib}, 0, p);
  const PressureReading r = ReferencePressure(m, 600 * kMib, kCeiling, 1, p);
  EXPECT_EQ(r.stall_pct, 3);
  EXPECT_FALSE(r.refault_bytes_per_s.has_value());
  EXPECT_EQ(r.disk_bytes_per_s, 100 * kMib);  // not the same bucket's 10
  ProfileParams off = p;
  off.ratio = 0;
  EXPECT_FALSE(ReferencePressure(m, 600 * kMib, kCeiling, 1, off).disk_bytes_per_s.has_value());
}

TEST(PressureProfileTest, TheSameBucketIsNotALargerSize) {
  ProfileMemory m;
  const ProfileParams p = On();
  RecordPressure(&m, 610 * kMib, kCeiling, Stall(40), 0, p);
  EXPECT_EQ(ExcessPressure(m, 601 * kMib, kCeiling, Stall(40), 1, p).stall_pct, 40);
}

TEST(PressureProfileTest, OldReadingsAreForgotten) {
  ProfileMemory m;
  ProfileParams p = On();
  p.forget_seconds = 600;
  RecordPressure(&m, 900 * kMib, kCeiling, Stall(40), 0, p);
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, Stall(50), 600, p).stall_pct, 0);
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, Stall(50), 601, p).stall_pct, 50);
}

TEST(PressureProfileTest, AStreamsWanderingPaceIsNotPressureAtTheDefaultRatio) {
  // A streaming guest on the lab (896 MiB, no agent), its readings as plimsolld logged them:
  // 66.8 and then 80.2 MiB/s at 840 and 822 MiB while its neighbours started, then 126.5 MiB/s
  // at 804 MiB, its pace from then on (110-135 MiB/s). At a ratio of 1.5 the last read as
  // 6.3 MiB/s of refaults; a squeezed hot set's reads rise from next to nothing, and still count.
  constexpr double kGuest = 896 * kMib;
  const ProfileParams p;
  ProfileMemory m;
  RecordPressure(&m, 840 * kMib, kGuest, PressureReading{std::nullopt, std::nullopt, 66.8 * kMib}, 0, p);
  RecordPressure(&m, 822 * kMib, kGuest, PressureReading{std::nullopt, std::nullopt, 80.2 * kMib}, 5, p);
  const PressureReading pace{std::nullopt, std::nullopt, 126.5 * kMib};
  EXPECT_EQ(ExcessPressure(m, 804 * kMib, kGuest, pace, 10, p).disk_bytes_per_s, 0);
  ProfileParams old = p;
  old.ratio = 1.5;
  EXPECT_NEAR(*ExcessPressure(m, 804 * kMib, kGuest, pace, 10, old).disk_bytes_per_s / kMib, 6.2, 0.1);
  const PressureReading squeezed{std::nullopt, std::nullopt, 200 * kMib};
  EXPECT_NEAR(*ExcessPressure(m, 804 * kMib, kGuest, squeezed, 10, p).disk_bytes_per_s / kMib, 39.6, 0.1);
}

TEST(PressureProfileTest, DiskReadsArePressureOnlyAsARise) {
  ProfileMemory m;
  const ProfileParams p = On();
  PressureReading r{std::nullopt, std::nullopt, 20 * kMib};
  EXPECT_FALSE(ExcessPressure(m, 600 * kMib, kCeiling, r, 0, p).disk_bytes_per_s.has_value());
  RecordPressure(&m, 900 * kMib, kCeiling, r, 0, p);
  r.disk_bytes_per_s = 50 * kMib;
  EXPECT_EQ(ExcessPressure(m, 600 * kMib, kCeiling, r, 1, p).disk_bytes_per_s, 20 * kMib);
}

TEST(PressureProfileTest, OffMeansThePlainReadingsWithoutDiskReads) {
  ProfileMemory m;
  ProfileParams p;
  p.ratio = 0;
  RecordPressure(&m, 900 * kMib, kCeiling, Stall(40), 0, p);
  const PressureReading e =
      ExcessPressure(m, 600 * kMib, kCeiling, PressureReading{40, 1.0, 9.0}, 1, p);
  EXPECT_EQ(e.stall_pct, 40);
  EXPECT_EQ(e.refault_bytes_per_s, 1.0);
  EXPECT_FALSE(e.disk_bytes_per_s.has_value());
  EXPECT_TRUE(m.buckets.empty());
}

}  // namespace
}  // namespace plimsoll::policy
