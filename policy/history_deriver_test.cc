#include "policy/history_deriver.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMib = int64_t{1} << 20;

// A guest of 4 GiB at `actual_mib` with target `target_mib`, its libvirt report `age` seconds old.
GuestView At(double actual_mib, double target_mib, double age = 0) {
  GuestView g;
  g.max_bytes = 4096 * kMib;
  g.actual_bytes = static_cast<int64_t>(actual_mib * kMib);
  g.target_bytes = static_cast<int64_t>(target_mib * kMib);
  g.has_stats = true;
  g.stats_fresh = true;
  g.stats_age_seconds = age;
  g.unused_bytes = 512 * kMib;
  return g;
}

TEST(LandingToleranceTest, SixteenMibOrOnePercent) {
  EXPECT_EQ(LandingToleranceBytes(1024.0 * kMib), 16.0 * kMib);
  EXPECT_EQ(LandingToleranceBytes(4096.0 * kMib), 0.01 * 4096 * kMib);
}

// Landing, one snapshot per row: the target and actual seen at time t, and what is expected.
TEST(HistoryDeriverTest, Landing) {
  struct Row {
    double t, actual_mib, target_mib;
    std::optional<double> landed_s;  // -1e300 stands for "long ago"
  };
  const std::vector<Row> rows = {
      {0, 4096, 4096, -1e300},  // first seen at its target: landed long ago
      {5, 4096, 3072, std::nullopt},  // a new target: travelling
      {10, 3500, 3072, std::nullopt},
      {15, 3080, 3072, 15},  // within the tolerance: landed now
      {20, 3072, 3072, 15},  // still the same landing
      {25, 3072, 3071.5, 25},  // a new target, even half a MiB away: landed again, now
      {30, 3072, 3071.5, 25},
  };
  HistoryMemory m;
  for (const Row& r : rows) {
    const GuestHistory h = DeriveHistory(At(r.actual_mib, r.target_mib), r.t, &m);
    SCOPED_TRACE(r.t);
    ASSERT_EQ(h.landed_s.has_value(), r.landed_s.has_value());
    if (!r.landed_s.has_value()) continue;
    if (*r.landed_s < -1e299) {
      EXPECT_TRUE(std::isinf(*h.landed_s) && *h.landed_s < 0);
    } else {
      EXPECT_EQ(*h.landed_s, *r.landed_s);
    }
  }
}

TEST(HistoryDeriverTest, FirstSeenTravellingIsNotLanded) {
  HistoryMemory m;
  EXPECT_FALSE(DeriveHistory(At(4096, 2048), 0, &m).landed_s.has_value());
  EXPECT_EQ(*DeriveHistory(At(2048, 2048), 5, &m).landed_s, 5);
}

// Whether the latest report measures the current size: newer than the landing, and new.
TEST(HistoryDeriverTest, ReportAfterLanding) {
  struct Row {
    double t, actual_mib, target_mib, age;
    bool new_report, after_landing;
  };
  const std::vector<Row> rows = {
      {0, 4096, 4096, 1, true, true},     // landed long ago: any report is after it
      {5, 4096, 3072, 0, true, false},    // travelling
      {10, 3072, 3072, 2, true, false},   // landed at 10, the report is from 8
      {11, 3072, 3072, 3, false, false},  // the same report (8) again
      {14, 3072, 3072, 0, true, true},    // a report from 14
      {15, 3072, 3072, 1, false, true},   // the same one: after the landing, but not new
  };
  HistoryMemory m;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.t);
    const GuestHistory h = DeriveHistory(At(r.actual_mib, r.target_mib, r.age), r.t, &m);
    EXPECT_EQ(h.report_s, r.t - r.age);
    EXPECT_EQ(h.new_report, r.new_report);
    EXPECT_EQ(h.report_after_landing, r.after_landing);
  }
}

// The counters' rates over the last report interval, kept while no new report comes, and started
// over when a counter goes backwards (a rebooted guest).
TEST(HistoryDeriverTest, RatesAcrossCounterResets) {
  struct Row {
    double t;
    uint64_t psi_total_us, major_fault, oom_kill;
    std::optional<double> stall_pct, refault_bytes_per_s;
    double new_oom_kills;
    bool same_report = false;
  };
  const std::vector<Row> rows = {
      {0, 1'000'000, 100, 0, std::nullopt, std::nullopt, 0},  // nothing to take a rate over
      {10, 2'000'000, 356, 1, 10.0, 256 * 4096 / 10.0, 1},    // 1 s of 10 stalled; 256 faults
      {12, 2'000'000, 356, 1, 10.0, 256 * 4096 / 10.0, 0, true},  // same report: same rates
      {20, 100, 10, 0, std::nullopt, std::nullopt, 0},         // reboot: counters went back
      {30, 500'100, 10, 2, 5.0, 0.0, 2},                       // rates again from there
  };
  HistoryMemory m;
  double report_at = 0;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.t);
    if (!r.same_report) report_at = r.t;
    GuestView g = At(4096, 4096, r.t - report_at);
    g.anon_bytes = 1024 * kMib;
    g.unreclaimable_bytes = 64 * kMib;
    g.psi_some_total_us = r.psi_total_us;
    g.major_fault = r.major_fault;
    g.oom_kill = r.oom_kill;
    g.agent_age_seconds = r.t - report_at;
    const GuestHistory h = DeriveHistory(g, r.t, &m);
    ASSERT_EQ(h.stall_pct.has_value(), r.stall_pct.has_value());
    if (r.stall_pct.has_value()) {
      EXPECT_NEAR(*h.stall_pct, *r.stall_pct, 1e-9);
    }
    ASSERT_EQ(h.refault_bytes_per_s.has_value(), r.refault_bytes_per_s.has_value());
    if (r.refault_bytes_per_s.has_value()) {
      EXPECT_NEAR(*h.refault_bytes_per_s, *r.refault_bytes_per_s, 1e-9);
    }
    ASSERT_EQ(h.new_oom_kills.has_value(), true);
    EXPECT_EQ(*h.new_oom_kills, r.new_oom_kills);
  }
}

TEST(HistoryDeriverTest, MajorFaultRateWithoutTheAgent) {
  HistoryMemory m;
  GuestView g = At(4096, 4096);
  g.major_fault = 100;
  EXPECT_FALSE(DeriveHistory(g, 0, &m).refault_bytes_per_s.has_value());
  g.major_fault = 356;
  EXPECT_NEAR(*DeriveHistory(g, 10, &m).refault_bytes_per_s, 256 * 4096 / 10.0, 1e-9);
  g.major_fault = 5;  // reset
  EXPECT_FALSE(DeriveHistory(g, 20, &m).refault_bytes_per_s.has_value());
  EXPECT_FALSE(DeriveHistory(g, 20, &m).new_oom_kills.has_value());  // no counter reported
}

TEST(HistoryDeriverTest, DiskRateFromTheCounter) {
  HistoryMemory m;
  GuestView g;
  g.disk_read_bytes = 1000;
  EXPECT_FALSE(DeriveHistory(g, 10, &m).disk_read_bytes_per_s.has_value());
  g.disk_read_bytes = 5000;
  EXPECT_EQ(DeriveHistory(g, 12, &m).disk_read_bytes_per_s, 2000);
  g.disk_read_bytes = 100;  // the domain restarted
  EXPECT_FALSE(DeriveHistory(g, 14, &m).disk_read_bytes_per_s.has_value());
  g.disk_read_bytes.reset();
  const GuestHistory gone = DeriveHistory(g, 16, &m);
  EXPECT_FALSE(gone.disk_read_bytes_per_s.has_value());
  EXPECT_FALSE(gone.disk_read_since_s.has_value());
}

// plimsolld reads the disks every block_stats_interval: between reads a tick sees the last
// read again, older, and the rate is taken between the reads' own times.
TEST(HistoryDeriverTest, DiskRateOverTheReadsOwnTimes) {
  HistoryMemory m;
  GuestView g;
  g.disk_read_bytes = 1000;
  g.disk_read_age_seconds = 0;
  EXPECT_FALSE(DeriveHistory(g, 10, &m).disk_read_bytes_per_s.has_value());  // read at 10
  g.disk_read_bytes = 11000;
  g.disk_read_age_seconds = 1;
  GuestHistory h = DeriveHistory(g, 16, &m);
  EXPECT_EQ(h.disk_read_bytes_per_s, 2000);  // read at 15: 10000 bytes in 5 s
  EXPECT_EQ(h.disk_read_since_s, 10);        // since the read at 10
  g.disk_read_age_seconds = 2;
  h = DeriveHistory(g, 17, &m);
  EXPECT_EQ(h.disk_read_bytes_per_s, 2000) << "the same read again keeps its rate";
  EXPECT_EQ(h.disk_read_since_s, 10);
  g.disk_read_age_seconds = 4.5;
  EXPECT_EQ(DeriveHistory(g, 19.5, &m).disk_read_bytes_per_s, 2000);
  g.disk_read_bytes = 11000;
  g.disk_read_age_seconds = 0;
  h = DeriveHistory(g, 20, &m);
  EXPECT_EQ(h.disk_read_bytes_per_s, 0) << "a new read without new bytes is a rate of 0";
  EXPECT_EQ(h.disk_read_since_s, 15);
  // Stamped with the tick's time instead, the kept count would have read 0 at 16-19.5 and the
  // next read's bytes over the last interval alone.
}

// The balloon's size at the report's time: libvirt's actual is now, the report is older.
TEST(HistoryDeriverTest, SizeAtReport) {
  struct Row {
    double t, actual_mib, age, size_mib;
  };
  const std::vector<Row> rows = {
      {0, 4096, 0, 4096},
      {5, 3584, 0, 3584},
      {10, 3072, 5, 3584},   // the report is from 5, when the balloon was at 3584
      {15, 2560, 12, 4096},  // from 3: the latest size at or before it is 4096 (at 0)
      {20, 2560, 30, 4096},  // older than any kept: the oldest kept
  };
  HistoryMemory m;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.t);
    const GuestHistory h = DeriveHistory(At(r.actual_mib, r.actual_mib, r.age), r.t, &m);
    EXPECT_EQ(*h.size_at_report_bytes, r.size_mib * kMib);
  }
}

// The size after the report: at the first snapshot at or after its time, taken when the report
// is first seen and kept until the next one, so that moves made once it was seen are not in it.
TEST(HistoryDeriverTest, SizeAfterReport) {
  struct Row {
    double t, actual_mib, age, after_mib;
  };
  const std::vector<Row> rows = {
      {0, 4096, 0, 4096},  // a report at 0, seen at 0
      {5, 3584, 3, 3584},  // from 2: the first snapshot after it is this one
      {6, 3072, 4, 3584},  // the same report: the move since is not in it
      {7, 2560, 5, 3584},
      {10, 2560, 1, 2560},  // a new report, from 9
  };
  HistoryMemory m;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.t);
    const GuestHistory h = DeriveHistory(At(r.actual_mib, r.actual_mib, r.age), r.t, &m);
    EXPECT_EQ(*h.size_after_report_bytes, r.after_mib * kMib);
  }
}

TEST(HistoryDeriverTest, OutsideIsTheLeastMaxMinusMemTotalSeen) {
  HistoryMemory m;
  GuestView g = At(2048, 2048);
  EXPECT_FALSE(DeriveHistory(g, 0, &m).outside_bytes.has_value());  // no MemTotal yet
  g.total_bytes = 2048 * kMib - 64 * kMib;  // ballooned, without autodeflate
  EXPECT_EQ(*DeriveHistory(g, 5, &m).outside_bytes, 2112.0 * kMib);
  g.actual_bytes = g.target_bytes = 4096 * kMib;
  g.total_bytes = 4096 * kMib - 64 * kMib;  // at its ceiling: exact
  EXPECT_EQ(*DeriveHistory(g, 10, &m).outside_bytes, 64.0 * kMib);
  g.total_bytes = 3000 * kMib;  // larger again: the least stays
  EXPECT_EQ(*DeriveHistory(g, 15, &m).outside_bytes, 64.0 * kMib);
}

// Each of balloon_progress.h's verdicts, through the history.
TEST(HistoryDeriverTest, ProgressVerdicts) {
  {
    HistoryMemory m;
    EXPECT_EQ(DeriveHistory(At(4096, 3072), 0, &m).progress, ProgressEvent::kNone);
    EXPECT_EQ(DeriveHistory(At(3072, 3072), 5, &m).progress, ProgressEvent::kNone);  // ok
  }
  {
    HistoryMemory m;
    DeriveHistory(At(4096, 2048), 0, &m);
    const GuestHistory h = DeriveHistory(At(4095, 2048), 30, &m);
    EXPECT_EQ(h.progress, ProgressEvent::kStuck);
    EXPECT_THAT(h.progress_detail, HasSubstr("moved="));
  }
  {
    HistoryMemory m;
    DeriveHistory(At(2048, 2048), 0, &m);
    const GuestHistory h = DeriveHistory(At(2560, 2048), 5, &m);
    EXPECT_EQ(h.progress, ProgressEvent::kSelfDeflated);
    EXPECT_THAT(h.progress_detail, HasSubstr("rose_from=2048MiB"));
  }
  {
    HistoryMemory m;
    GuestView g = At(4096, 2048);
    g.balloon_inflate_pages = 0;
    g.balloon_deflate_pages = 0;
    DeriveHistory(g, 0, &m);
    g.actual_bytes = 4000 * kMib;
    g.balloon_inflate_pages = 1024 * 256;  // 1 GiB inflated
    g.balloon_deflate_pages = 1000 * 256;  // and most of it handed back
    const GuestHistory h = DeriveHistory(g, 10, &m);
    EXPECT_EQ(h.progress, ProgressEvent::kChurning);
    EXPECT_THAT(h.progress_detail, HasSubstr("balloon_deflated="));
  }
}

}  // namespace
}  // namespace plimsoll::policy
