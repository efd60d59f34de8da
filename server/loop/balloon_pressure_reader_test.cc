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
    p.last_update = 100;
    return p;
  }

  // Reads on the caller's thread: one Read() asks and hands back.
  static BalloonPressureReader::Options Inline() {
    BalloonPressureReader::Options o;
    o.inline_reads = true;
    return o;
  }

  int Reads() const { return hv_.call_count(FakeHypervisor::Method::kReadBalloonPressure); }

  FakeHypervisor hv_;
  absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(BalloonPressureReaderTest, AsksOncePerNewGuestReportAndRepeatsTheAnswerBetween) {
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(2));
  BalloonPressureReader r(&hv_, Inline());
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
  BalloonPressureReader r(&hv_, Inline());
  DomainSurvey partial = Survey(0);  // a busy domain's record: a monitor command would wait
  r.Read(t0_, &partial);
  EXPECT_EQ(Reads(), 0);
  EXPECT_FALSE(partial.stats["u1"].pressure.any());
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 1);  // u1 only: u2 is paused
}

TEST_F(BalloonPressureReaderTest, AGuestWithoutCountersIsAskedAgainOnlyAfterRetry) {
  BalloonPressure none;
  none.last_update = 100;  // the guest reported, with no counter: QEMU < 9.2 or kernel < 6.12
  hv_.SetBalloonPressure("u1", none);
  hv_.SetBalloonPressure("u2", absl::NotFoundError("no balloon"));
  BalloonPressureReader r(&hv_, Inline());
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

TEST_F(BalloonPressureReaderTest, AFailedReadKeepsTheLastAnswerAndBacksOff) {
  hv_.SetBalloonPressure("u1", Kills(1));
  hv_.SetBalloonPressure("u2", Kills(1));
  BalloonPressureReader r(&hv_, Inline());
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  hv_.SetBalloonPressure("u1", absl::DeadlineExceededError("monitor busy"));
  DomainSurvey failed = Survey(102);
  r.Read(t0_ + absl::Seconds(2), &failed);
  EXPECT_EQ(failed.stats["u1"].pressure.oom_kills, 1u);  // the last answer, with its own time
  EXPECT_EQ(r.counts().failed, 1u);
  hv_.SetBalloonPressure("u1", Kills(2));
  const int reads = Reads();
  DomainSurvey soon = Survey(104);
  r.Read(t0_ + absl::Seconds(20), &soon);  // within the 30 s backoff: u2 only
  EXPECT_EQ(Reads(), reads + 1);
  DomainSurvey later = Survey(106);
  r.Read(t0_ + absl::Seconds(33), &later);
  EXPECT_EQ(later.stats["u1"].pressure.oom_kills, 2u);
}

TEST_F(BalloonPressureReaderTest, AGuestThatHasNotReportedIsNotAskedNorCountedLacking) {
  BalloonPressure not_yet;
  not_yet.last_update = 0;  // QEMU answers 2^64-1 for every counter until the guest's first report
  hv_.SetBalloonPressure("u1", not_yet);
  hv_.SetBalloonPressure("u2", not_yet);
  BalloonPressureReader r(&hv_, Inline());
  DomainSurvey zero = Survey(0);
  for (auto& [u, st] : zero.stats) st.last_update = 0;  // bulk stats before the first report
  r.Read(t0_, &zero);
  EXPECT_EQ(Reads(), 0);
  DomainSurvey first = Survey(100);
  r.Read(t0_ + absl::Seconds(1), &first);
  EXPECT_EQ(Reads(), 2);
  EXPECT_EQ(r.counts().lacking, 0u);
  hv_.SetBalloonPressure("u1", Kills(1));
  DomainSurvey next = Survey(101);
  r.Read(t0_ + absl::Seconds(2), &next);
  EXPECT_EQ(next.stats["u1"].pressure.oom_kills, 1u);
}

TEST_F(BalloonPressureReaderTest, OnItsOwnThreadReadsArriveAtALaterReadAndWakeTheLoop) {
  hv_.SetBalloonPressure("u1", Kills(4));
  hv_.SetBalloonPressure("u2", Kills(4));
  absl::Mutex mu;
  int wakes = 0;
  BalloonPressureReader r(&hv_, {}, [&] {
    absl::MutexLock l(&mu);
    ++wakes;
  });
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  {
    absl::MutexLock l(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(+[](int* w) { return *w == 2; }, &wakes), absl::Seconds(10)));
  }
  EXPECT_EQ(r.outstanding(), 2u);
  DomainSurvey same = Survey(100);
  r.Read(t0_ + absl::Seconds(1), &same);
  EXPECT_EQ(r.outstanding(), 0u);
  EXPECT_EQ(same.stats["u1"].pressure.oom_kills, 4u);
  EXPECT_EQ(Reads(), 2);
}

TEST_F(BalloonPressureReaderTest, NoMonitorStopsReadingUntilReset) {
  BalloonPressureReader r(&hv_, Inline());  // the fake answers UNIMPLEMENTED by default
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
  BalloonPressureReader::Options off = Inline();
  off.enabled = false;
  BalloonPressureReader r(&hv_, off);
  DomainSurvey s = Survey(100);
  r.Read(t0_, &s);
  EXPECT_EQ(Reads(), 0);
  EXPECT_FALSE(s.stats["u1"].pressure.any());
}

}  // namespace
}  // namespace plimsoll::server
