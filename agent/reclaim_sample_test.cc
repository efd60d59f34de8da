#include "agent/reclaim_sample.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

using ::testing::DoubleEq;
using ::testing::Optional;

v1::AgentReport Report(uint64_t refaults, uint64_t stall_us, double avg10) {
  v1::AgentReport r;
  v1::GuestMeminfo* m = r.mutable_meminfo();
  m->set_mem_total_bytes(1000);
  m->set_mem_free_bytes(100);
  m->set_active_file_bytes(200);
  m->set_inactive_file_bytes(300);
  r.mutable_vmstat()->set_workingset_refault_file(refaults);
  r.mutable_memory_pressure()->mutable_some()->set_avg10(avg10);
  r.mutable_memory_pressure()->mutable_some()->set_total_us(stall_us);
  return r;
}

TEST(ReclaimSampleTest, SizesAndAvg10WithoutABase) {
  const ReclaimSample s = MeasureReclaimSample(Report(50, 0, 1.5), nullptr, absl::Seconds(1));
  EXPECT_THAT(s.mem_total_bytes, Optional(1000u));
  EXPECT_THAT(s.mem_free_bytes, Optional(100u));
  EXPECT_THAT(s.active_file_bytes, Optional(200u));
  EXPECT_THAT(s.inactive_file_bytes, Optional(300u));
  EXPECT_THAT(s.psi_some_avg10, Optional(DoubleEq(1.5)));
  EXPECT_FALSE(s.file_refaults_per_second.has_value());
  EXPECT_FALSE(s.psi_some_recent_pct.has_value());
}

TEST(ReclaimSampleTest, RatesOverTheSpan) {
  const v1::AgentReport before = Report(1000, 5'000'000, 0);
  // 2 s later: 600 refaults, 0.5 s stalled.
  const ReclaimSample s = MeasureReclaimSample(Report(1600, 5'500'000, 0.2), &before, absl::Seconds(2));
  EXPECT_THAT(s.file_refaults_per_second, Optional(DoubleEq(300)));
  EXPECT_THAT(s.psi_some_recent_pct, Optional(DoubleEq(25)));
}

TEST(ReclaimSampleTest, NoRateFromBackwardsCountersOrAnEmptySpan) {
  const v1::AgentReport before = Report(1000, 5'000'000, 0);
  ReclaimSample s = MeasureReclaimSample(Report(900, 4'000'000, 0), &before, absl::Seconds(1));
  EXPECT_FALSE(s.file_refaults_per_second.has_value());
  EXPECT_FALSE(s.psi_some_recent_pct.has_value());
  s = MeasureReclaimSample(Report(2000, 6'000'000, 0), &before, absl::ZeroDuration());
  EXPECT_FALSE(s.file_refaults_per_second.has_value());
}

TEST(ReclaimSampleTest, AStallShareNeverExceedsAllOfIt) {
  const v1::AgentReport before = Report(0, 0, 0);
  const ReclaimSample s = MeasureReclaimSample(Report(0, 3'000'000, 0), &before, absl::Seconds(1));
  EXPECT_THAT(s.psi_some_recent_pct, Optional(DoubleEq(100)));
}

TEST(ReclaimSampleTest, AbsentIsAbsent) {
  v1::AgentReport bare;
  const ReclaimSample s = MeasureReclaimSample(bare, &bare, absl::Seconds(1));
  EXPECT_FALSE(s.mem_total_bytes.has_value());
  EXPECT_FALSE(s.inactive_file_bytes.has_value());
  EXPECT_FALSE(s.psi_some_avg10.has_value());
  EXPECT_FALSE(s.file_refaults_per_second.has_value());
}

}  // namespace
}  // namespace plimsoll::agent
