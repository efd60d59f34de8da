#include "server/loop/balloon_pressure_reader.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server {
namespace {

using hypervisor::BalloonPressure;
using hypervisor::DomainSurvey;
using hypervisor::FakeHypervisor;

constexpr int64_t kGiB = int64_t{1} << 30;

class BalloonPressureReaderTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hv_.Connect().ok());
    hv_.AddDomain("u1", "g1", kGiB, kGiB);
    hv_.AddDomain("u2", "g2", kGiB, kGiB);
  }

  // A survey whose records carry `update` as last_update (0: a partial record without it).
  DomainSurvey Survey(int64_t update) {
    DomainSurvey s;
    for (const char* u : {"u1", "u2"}) {
      s.domains.push_back(*hv_.GetDomain(u));
      hypervisor::BalloonStats st;
      st.actual_bytes = kGiB;
      if (update > 0) st.last_update = update;
      s.stats[u] = st;
    }
    return s;
  }

  static BalloonPressure Kills(uint64_t n) {
    BalloonPressure p;
    p.oom_kills = n;
    p.alloc_stalls = 10 * n;
    return p;
  }

  int Reads() const { return hv_.call_count(FakeHypervisor::Method::kReadBalloonPressure); }

  FakeHypervisor hv_;
  absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(BalloonPressureReaderTest, AsksOncePerNewGuestReportAndRepeatsTheAnswerBetween) {
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(2));
  BalloonPressureReader r(&hv_, {});
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 2);
  EXPECT_EQ(s.stats["u1"].pressure.oom_kills, 1u);
  EXPECT_EQ(s.stats["u2"].pressure.alloc_stalls, 20u);

  hv_.SetBalloonPressure("u1", Kills(5));
  DomainSurvey same = Survey(100);  // the guests sent nothing new: QEMU's counters are unchanged
  r.Read(t0_ + absl::Seconds(1), &same);
  EXPECT_EQ(Reads(), 2);
  EXPECT_EQ(same.stats["u1"].pressure.oom_kills, 1u);

  DomainSurvey next = Survey(102);
  r.Read(t0_ + absl::Seconds(2), &next);
  EXPECT_EQ(Reads(), 4);
  EXPECT_EQ(next.stats["u1"].pressure.oom_kills, 5u);
  EXPECT_EQ(r.counts().read, 4u);
}

TEST_F(BalloonPressureReaderTest, PartialRecordsAndStoppedDomainsAreNotAsked) {
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(1));
  hv_.SetState("u2", hypervisor::DomainRunState::kPaused);
  BalloonPressureReader r(&hv_, {});
  DomainSurvey partial = Survey(0);  // a busy domain's record: a monitor command would wait
  r.Read(t0_, &partial);
  EXPECT_EQ(Reads(), 0);
  EXPECT_FALSE(partial.stats["u1"].pressure.any());
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 1);  // u1 only: u2 is paused
}

TEST_F(BalloonPressureReaderTest, AGuestWithoutCountersIsAskedAgainOnlyAfterRetry) {
  hv_.SetBalloonPressure("u1", BalloonPressure{});  // QEMU < 9.2 or kernel < 6.12
  hv_.SetBalloonPressure("u2", absl::NotFoundError("no balloon"));
  BalloonPressureReader r(&hv_, {true, absl::Minutes(5)});
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 2);
  EXPECT_EQ(r.counts().lacking, 2u);
  EXPECT_FALSE(s.stats["u1"].pressure.any());
  DomainSurvey later = Survey(200);
  r.Read(t0_ + absl::Minutes(4), &later);
  EXPECT_EQ(Reads(), 2);
  hv_.SetBalloonPressure("u1", Kills(3));  // the guest rebooted into 6.12
  DomainSurvey after = Survey(300);
  r.Read(t0_ + absl::Minutes(5), &after);
  EXPECT_EQ(Reads(), 4);
  EXPECT_EQ(after.stats["u1"].pressure.oom_kills, 3u);
}

TEST_F(BalloonPressureReaderTest, AFailedReadLeavesTheCountersAbsentAndIsRetriedNextTick) {
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(1));
  BalloonPressureReader r(&hv_, {});
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  hv_.SetBalloonPressure("u1", absl::DeadlineExceededError("monitor busy"));
  DomainSurvey failed = Survey(102);
  r.Read(t0_ + absl::Seconds(2), &failed);
  EXPECT_FALSE(failed.stats["u1"].pressure.any());
  EXPECT_EQ(r.counts().failed, 1u);
  hv_.SetBalloonPressure("u1", Kills(2));
  DomainSurvey again = Survey(102);  // same report, but the last read failed: asked again
  r.Read(t0_ + absl::Seconds(3), &again);
  EXPECT_EQ(again.stats["u1"].pressure.oom_kills, 2u);
}

TEST_F(BalloonPressureReaderTest, NoMonitorStopsReadingUntilReset) {
  BalloonPressureReader r(&hv_, {});  // the fake answers UNIMPLEMENTED by default
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 1);
  EXPECT_FALSE(r.monitor_available());
  DomainSurvey next = Survey(102);
  r.Read(t0_ + absl::Seconds(2), &next);
  EXPECT_EQ(Reads(), 1);
  r.Reset();
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(1));
  DomainSurvey after = Survey(104);
  r.Read(t0_ + absl::Seconds(4), &after);
  EXPECT_EQ(Reads(), 3);
  EXPECT_TRUE(r.monitor_available());
}

TEST_F(BalloonPressureReaderTest, SwitchedOffAsksNothing) {
  hv_.SetBalloonPressure("u1", Kills(1));
  BalloonPressureReader r(&hv_, {false});
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 0);
  EXPECT_FALSE(s.stats["u1"].pressure.any());
}

}  // namespace
}  // namespace plimsoll::server
