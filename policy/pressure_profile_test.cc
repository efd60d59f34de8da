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

TEST(PressureProfileTest, DiskRateFromTheCounter) {
  ProfileMemory m;
  GuestView g;
  g.disk_read_bytes = 1000;
  EXPECT_FALSE(UpdateDiskRate(g, 10, &m).has_value());
  g.disk_read_bytes = 5000;
  EXPECT_EQ(UpdateDiskRate(g, 12, &m), 2000);
  g.disk_read_bytes = 100;  // the domain restarted
  EXPECT_FALSE(UpdateDiskRate(g, 14, &m).has_value());
  g.disk_read_bytes.reset();
  EXPECT_FALSE(UpdateDiskRate(g, 16, &m).has_value());
}

// plimsolld reads the disks every block_stats_interval: between reads a tick sees the last
// read again, older, and the rate is taken between the reads' own times.
TEST(PressureProfileTest, DiskRateOverTheReadsOwnTimes) {
  ProfileMemory m;
  GuestView g;
  g.disk_read_bytes = 1000;
  g.disk_read_age_seconds = 0;
  EXPECT_FALSE(UpdateDiskRate(g, 10, &m).has_value());  // read at 10
  g.disk_read_bytes = 11000;
  g.disk_read_age_seconds = 1;
  EXPECT_EQ(UpdateDiskRate(g, 16, &m), 2000);  // read at 15: 10000 bytes in 5 s
  g.disk_read_age_seconds = 2;
  EXPECT_EQ(UpdateDiskRate(g, 17, &m), 2000) << "the same read again keeps its rate";
  g.disk_read_age_seconds = 4.5;
  EXPECT_EQ(UpdateDiskRate(g, 19.5, &m), 2000);
  g.disk_read_bytes = 11000;
  g.disk_read_age_seconds = 0;
  EXPECT_EQ(UpdateDiskRate(g, 20, &m), 0) << "a new read without new bytes is a rate of 0";
  // Stamped with the tick's time instead, the kept count would have read 0 at 16-19.5 and the
  // next read's bytes over the last interval alone.
}

}  // namespace
}  // namespace plimsoll::policy
