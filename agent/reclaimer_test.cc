// The reclaimer's loop with a fake guest (its /proc numbers set by the test), a fake executor
// that takes what it is asked from that guest's cache as the kernel would, and a fake clock.
#include "agent/reclaimer.h"

#include <stdlib.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/testing/fake_reclaim.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

using ::plimsoll::agent::testing::FakeGuestMemory;
using ::plimsoll::agent::testing::FakeReclaimExecutor;
using ::plimsoll::agent::testing::kMiB;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// keep: 300 MiB used, 500 MiB file; steps of 64 MiB at 32 MiB/s.
v1::ReclaimBounds HostBounds() {
  v1::ReclaimBounds b;
  b.set_enabled(true);
  b.set_keep_bytes(300 * kMiB);
  b.set_keep_file_bytes(500 * kMiB);
  b.set_step_bytes(64 * kMiB);
  b.set_max_bytes_per_second(32 * kMiB);
  return b;
}

// Counts compactions; fails when told to.
class FakeCompactor : public Compactor {
 public:
  absl::Status Compact() override {
    ++calls;
    return fail ? absl::PermissionDeniedError("compact_memory is not writable") : absl::OkStatus();
  }
  int calls = 0;
  bool fail = false;
};

class ReclaimerTest : public ::testing::Test {
 protected:
  // The fake guest: 1 GiB, 50 MiB free, 877 MiB of file cache, calm.
  void Make(ReclaimerOptions o = {}, bool with_executor = true, Clock* clock = nullptr, bool with_compactor = false) {
    o.series_start_boottime_ns = 123'000'000'000;
    auto executor = std::make_unique<FakeReclaimExecutor>(&guest_);
    executor_ = with_executor ? executor.get() : nullptr;
    auto compactor = std::make_unique<FakeCompactor>();
    compactor_ = with_compactor ? compactor.get() : nullptr;
    reclaimer_ = std::make_unique<Reclaimer>(o, with_executor ? std::move(executor) : nullptr, &guest_,
                                             clock != nullptr ? clock : &clock_,
                                             with_compactor ? std::move(compactor) : nullptr);
  }
  // Bounds from the host, then the clock moves one period and the reclaimer ticks.
  ReclaimDecision TickAfter(absl::Duration d = absl::Seconds(1)) {
    clock_.Advance(d);
    return reclaimer_->Tick();
  }
  void Bounds(const v1::ReclaimBounds& b = HostBounds()) { reclaimer_->OnHostBounds(b); }
  v1::ReclaimReport Report() {
    v1::ReclaimReport r;
    reclaimer_->FillReport(&r);
    return r;
  }

  FakeClock clock_;
  FakeGuestMemory guest_;
  FakeReclaimExecutor* executor_ = nullptr;
  FakeCompactor* compactor_ = nullptr;
  std::unique_ptr<Reclaimer> reclaimer_;
};

// A round that freed enough is followed by one compaction once it is over (5 s without a step),
// never between its steps; the next needs another round's worth, 30 s later at the earliest.
TEST_F(ReclaimerTest, ARoundIsFollowedByOneCompaction) {
  Make({}, true, nullptr, /*with_compactor=*/true);
  int steps_seen = 0;
  int compactions_during_round = 0;
  for (int i = 0; i < 40; ++i) {
    Bounds();
    const ReclaimDecision d = TickAfter();
    if (d.reason == ReclaimReason::kStep) {
      ++steps_seen;
      compactions_during_round = compactor_->calls;
    }
  }
  ASSERT_GT(steps_seen, 3);
  EXPECT_EQ(compactions_during_round, 0);  // not while the round went on
  EXPECT_EQ(compactor_->calls, 1);
  v1::ReclaimReport r = Report();
  EXPECT_EQ(r.compactions(), 1u);
  EXPECT_EQ(r.failed_compactions(), 0u);

  // Nothing more freed: no more compactions, however long.
  for (int i = 0; i < 60; ++i) {
    Bounds();
    TickAfter();
  }
  EXPECT_EQ(compactor_->calls, 1);

  // A lower keep frees more once the hold of the higher one is over (5 min): a second round, a
  // second compaction.
  v1::ReclaimBounds lower = HostBounds();
  lower.set_keep_file_bytes(200 * kMiB);
  for (int i = 0; i < 400; ++i) {
    Bounds(lower);
    TickAfter();
  }
  EXPECT_EQ(compactor_->calls, 2);
  EXPECT_EQ(Report().compactions(), 2u);
}

TEST_F(ReclaimerTest, AFailedCompactionIsCountedAndReclaimGoesOn) {
  Make({}, true, nullptr, /*with_compactor=*/true);
  compactor_->fail = true;
  for (int i = 0; i < 40; ++i) {
    Bounds();
    TickAfter();
  }
  EXPECT_EQ(compactor_->calls, 1);
  const v1::ReclaimReport r = Report();
  EXPECT_EQ(r.compactions(), 0u);
  EXPECT_EQ(r.failed_compactions(), 1u);
  EXPECT_EQ(r.reason(), "below_keep");
}

TEST_F(ReclaimerTest, WithoutACompactorNothingIsCompacted) {
  Make();
  for (int i = 0; i < 40; ++i) {
    Bounds();
    TickAfter();
  }
  EXPECT_EQ(Report().compactions(), 0u);
}

TEST_F(ReclaimerTest, OffWritesNothingAndSaysSo) {
  ReclaimerOptions o;
  o.enabled = false;
  Make(o);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kOffDisabled);
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kOffDisabled);
  const v1::ReclaimReport r = Report();
  EXPECT_EQ(r.state(), v1::RECLAIM_STATE_OFF_DISABLED);
  EXPECT_EQ(r.reason(), "off_disabled");
  EXPECT_EQ(r.requested_bytes(), 0u);
  EXPECT_EQ(guest_.reads(), 0);
  EXPECT_EQ(guest_.file(), 877 * kMiB);  // the executor it was given (and dropped) took nothing
}

// The agent's own zero step or rate allows nothing whatever the host sends: reclaim is off by the
// agent's flags, and says which, never "the host disabled it".
TEST_F(ReclaimerTest, AZeroOwnStepOrRateIsOffByTheAgentsFlag) {
  const struct {
    uint64_t step;
    double rate;
    const char* flag;
  } cases[] = {
      {0, 64.0 * kMiB, "--reclaim_max_step_mib=0"},
      {128 * kMiB, 0, "--reclaim_max_rate_mib=0"},
      {0, 0, "--reclaim_max_step_mib=0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flag);
    ReclaimerOptions o;
    o.own.max_step_bytes = c.step;
    o.own.max_bytes_per_second = c.rate;
    EXPECT_EQ(ReclaimOffDetail(o).rfind(c.flag, 0), 0u) << ReclaimOffDetail(o);
    Make(o);
    EXPECT_EQ(Report().reason(), "off_disabled");
    Bounds();
    const ReclaimDecision d = TickAfter();
    EXPECT_EQ(d.reason, ReclaimReason::kOffDisabled);
    EXPECT_THAT(d.detail, HasSubstr(c.flag));
    const v1::ReclaimReport r = Report();
    EXPECT_EQ(r.state(), v1::RECLAIM_STATE_OFF_DISABLED);
    EXPECT_EQ(r.reason(), "off_disabled");
    EXPECT_THAT(r.detail(), HasSubstr(c.flag));
    EXPECT_EQ(guest_.reads(), 0);
    EXPECT_EQ(guest_.file(), 877 * kMiB);
  }
  ReclaimerOptions on;
  EXPECT_EQ(ReclaimOffDetail(on), "");
  on.enabled = false;
  EXPECT_EQ(ReclaimOffDetail(on), "--reclaim=off");
}

TEST_F(ReclaimerTest, UnsupportedReportsWhy) {
  ReclaimerOptions o;
  o.unsupported_detail = "no /sys/fs/cgroup/memory.reclaim: kernel < 5.19, cgroup v1, or ...";
  Make(o, /*with_executor=*/false);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kOffUnsupported);
  const v1::ReclaimReport r = Report();
  EXPECT_EQ(r.state(), v1::RECLAIM_STATE_OFF_UNSUPPORTED);
  EXPECT_THAT(r.detail(), HasSubstr("kernel < 5.19"));
  EXPECT_FALSE(r.file_only());
  EXPECT_EQ(guest_.reads(), 0);
}

TEST_F(ReclaimerTest, WithoutBoundsNothingIsReadOrWritten) {
  Make();
  EXPECT_EQ(Report().reason(), "no_bounds");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(TickAfter().reason, ReclaimReason::kNoBounds);
  EXPECT_EQ(guest_.reads(), 0);
  EXPECT_TRUE(executor_->requests().empty());
  EXPECT_EQ(Report().state(), v1::RECLAIM_STATE_IDLE);
}

TEST_F(ReclaimerTest, StepsDownToTheKeepAndNoFurther) {
  Make();
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kNoBaseline);  // the first sample is the base
  ReclaimDecision d = TickAfter();
  ASSERT_EQ(d.reason, ReclaimReason::kStep) << d.detail;
  EXPECT_EQ(d.bytes, 64 * kMiB);  // a first step may be a whole step
  EXPECT_EQ(guest_.file(), 813 * kMiB);
  v1::ReclaimReport r = Report();
  EXPECT_EQ(r.state(), v1::RECLAIM_STATE_ACTIVE);
  EXPECT_EQ(r.requested_bytes(), 64 * kMiB);
  EXPECT_EQ(r.achieved_bytes(), 64 * kMiB);
  EXPECT_EQ(r.steps(), 1u);
  EXPECT_EQ(r.counters_since_boottime_ns(), 123'000'000'000);
  EXPECT_TRUE(r.file_only());
  EXPECT_EQ(r.keep_bytes(), 300 * kMiB);
  EXPECT_EQ(r.keep_file_bytes(), 500 * kMiB);

  // Bounds keep coming with every ack; one tick a second for a minute.
  for (int i = 0; i < 60; ++i) {
    Bounds();
    d = TickAfter();
  }
  EXPECT_EQ(d.reason, ReclaimReason::kBelowKeep) << d.detail;
  // Down to the file keep in halves, within the smallest step of it, never a byte under.
  EXPECT_GE(guest_.file(), 500 * kMiB);
  EXPECT_LT(guest_.file(), 501 * kMiB);
  // After the first whole step, 32 MiB a second: the rate; within a step of the keep, halves.
  const std::vector<uint64_t> requests = executor_->requests();
  ASSERT_GE(requests.size(), 3u);
  EXPECT_EQ(requests[1], 32 * kMiB);
  for (size_t i = 1; i < requests.size(); ++i) EXPECT_LE(requests[i], requests[i - 1]) << i;
  EXPECT_EQ(requests.back(), kMiB);
  r = Report();
  EXPECT_EQ(r.requested_bytes(), 877 * kMiB - guest_.file());
  EXPECT_EQ(r.achieved_bytes(), r.requested_bytes());
  EXPECT_EQ(r.state(), v1::RECLAIM_STATE_IDLE);
  EXPECT_EQ(r.reason(), "below_keep");
}

TEST_F(ReclaimerTest, PressureStopsItAtOnce) {
  Make();
  Bounds();
  TickAfter();
  ASSERT_EQ(TickAfter().reason, ReclaimReason::kStep);
  const size_t before = executor_->requests().size();

  // Half of the last second stalled: avg10 has not caught up yet, the total has.
  guest_.AddStall(absl::Milliseconds(500));
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kPressure);
  EXPECT_EQ(Report().state(), v1::RECLAIM_STATE_STOPPED_PRESSURE);
  // Then avg10 over the agent's own stop (5%).
  guest_.SetPsi(7.5);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kPressure);
  // Calm again: the stall came right after its step, so the file LRU before that step is kept.
  guest_.SetPsi(0.5);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kBelowKeep);
  EXPECT_EQ(executor_->requests().size(), before);
}

TEST_F(ReclaimerTest, RefaultsRightAfterItsStepsKeepTheCacheThoseStepsTook) {
  Make();
  Bounds();
  TickAfter();  // the refault baseline
  const uint64_t file_before = guest_.file();
  ASSERT_EQ(TickAfter(absl::Seconds(2)).reason, ReclaimReason::kStep);
  Bounds();
  ASSERT_EQ(TickAfter(absl::Seconds(2)).reason, ReclaimReason::kStep);
  ASSERT_EQ(guest_.file(), file_before - 128 * kMiB);
  // The pages were still in use: the guest reads 100 MiB of them back at once.
  guest_.AddRefaults(25600);
  guest_.SetFile(guest_.file() + 100 * kMiB - 400 * kMiB, 400 * kMiB);
  guest_.SetFree(78 * kMiB);
  Bounds();
  const ReclaimDecision d = TickAfter();
  ASSERT_EQ(d.reason, ReclaimReason::kPressure);
  EXPECT_THAT(d.detail, HasSubstr(absl::StrCat("learned_keep_file=", file_before)));
  EXPECT_EQ(Report().keep_file_bytes(), file_before) << "the report shows the keep in force";
  // Calm again, with 100 MiB of cache above the host's keep: the agent keeps what its steps took.
  for (int i = 0; i < 100; ++i) {
    Bounds();
    ASSERT_EQ(TickAfter(absl::Seconds(2)).reason, ReclaimReason::kBelowKeep) << i;
  }
  EXPECT_EQ(executor_->requests().size(), 2u);
  // After the keep hold (5 min) it tries again, a step at a time.
  clock_.Advance(absl::Minutes(2));
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kNoBaseline) << "its last sample is minutes old";
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kStep);
}

TEST_F(ReclaimerTest, PressureLongAfterItsStepsIsNotTheirs) {
  Make();
  // Room for one step only: the file keep 64 MiB under the cache.
  v1::ReclaimBounds b = HostBounds();
  b.set_keep_file_bytes(guest_.file() - 64 * kMiB);
  Bounds(b);
  TickAfter();
  Bounds(b);
  ASSERT_EQ(TickAfter(absl::Seconds(2)).reason, ReclaimReason::kStep);
  // The rest of the room in halves, a tick apart.
  int ticks = 0;
  do {
    Bounds(b);
    ASSERT_LT(++ticks, 20);
  } while (TickAfter().reason != ReclaimReason::kBelowKeep);
  const size_t steps = executor_->requests().size();
  ASSERT_GT(steps, 1u);
  // Refaults 11 s after the last step (the blame window is 10 s): the guest's own, nothing learned.
  for (int i = 0; i < 10; ++i) {
    Bounds(b);
    ASSERT_EQ(TickAfter().reason, ReclaimReason::kBelowKeep);
  }
  guest_.AddRefaults(25600);
  Bounds(b);
  const ReclaimDecision d = TickAfter();
  ASSERT_EQ(d.reason, ReclaimReason::kPressure);
  EXPECT_THAT(d.detail, ::testing::Not(HasSubstr("learned_keep_file")));
  EXPECT_EQ(Report().keep_file_bytes(), b.keep_file_bytes()) << "the host's keep";
}

TEST_F(ReclaimerTest, TheHostsStricterStopIsTheOneInForce) {
  Make();
  v1::ReclaimBounds b = HostBounds();
  b.set_psi_some_avg10_stop_pct(1);
  Bounds(b);
  guest_.SetPsi(2);  // under the agent's 5%, over the host's 1%
  TickAfter();
  Bounds(b);
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kPressure);
  EXPECT_TRUE(executor_->requests().empty());
}

TEST_F(ReclaimerTest, EagainCountsWhatTheCacheLostAndBacksOff) {
  Make();
  Bounds();
  TickAfter();
  executor_->Then(ReclaimOutcome::kPartial, /*takes=*/10 * kMiB);
  ReclaimDecision d = TickAfter();
  ASSERT_EQ(d.reason, ReclaimReason::kStep);
  v1::ReclaimReport r = Report();
  EXPECT_EQ(r.requested_bytes(), 64 * kMiB);
  EXPECT_EQ(r.achieved_bytes(), 10 * kMiB);
  EXPECT_EQ(r.partial_steps(), 1u);
  for (int i = 0; i < 29; ++i) {
    Bounds();
    ASSERT_EQ(TickAfter().reason, ReclaimReason::kAfterPartial) << i;
  }
  EXPECT_EQ(executor_->requests().size(), 1u);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kNoBaseline);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kStep);
}

TEST_F(ReclaimerTest, AFailedWriteIsCountedReportedAndRetriedAMinuteLater) {
  Make();
  Bounds();
  TickAfter();
  executor_->Then(absl::PermissionDeniedError("write /sys/fs/cgroup/memory.reclaim: Permission denied"));
  ASSERT_EQ(TickAfter().reason, ReclaimReason::kStep);
  Bounds();
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kAfterError);
  v1::ReclaimReport r = Report();
  EXPECT_EQ(r.state(), v1::RECLAIM_STATE_FAILED);
  EXPECT_EQ(r.failed_steps(), 1u);
  EXPECT_EQ(r.requested_bytes(), 64 * kMiB);
  EXPECT_EQ(r.achieved_bytes(), 0u);
  EXPECT_EQ(guest_.file(), 877 * kMiB);
  for (int i = 0; i < 60; ++i) {
    Bounds();
    TickAfter();
  }
  EXPECT_GT(executor_->requests().size(), 1u);
}

TEST_F(ReclaimerTest, BoundsThatStopComingExpire) {
  Make();
  Bounds();
  TickAfter();
  ASSERT_EQ(TickAfter().reason, ReclaimReason::kStep);
  // No ack carries bounds any more: steps go on until the TTL (20 s), then stop.
  ReclaimDecision d;
  for (int i = 0; i < 25; ++i) d = TickAfter();
  EXPECT_EQ(d.reason, ReclaimReason::kBoundsExpired);
  const size_t requests = executor_->requests().size();
  for (int i = 0; i < 10; ++i) TickAfter();
  EXPECT_EQ(executor_->requests().size(), requests);
}

TEST_F(ReclaimerTest, HostDisablesItAtOnce) {
  Make();
  Bounds();
  TickAfter();
  ASSERT_EQ(TickAfter().reason, ReclaimReason::kStep);
  v1::ReclaimBounds off = HostBounds();
  off.set_enabled(false);
  Bounds(off);
  EXPECT_EQ(TickAfter().reason, ReclaimReason::kHostDisabled);
  EXPECT_EQ(executor_->requests().size(), 1u);
}

TEST_F(ReclaimerTest, ALowerKeepNamedLaterWaitsForTheHold) {
  Make();
  v1::ReclaimBounds b = HostBounds();
  b.set_keep_bytes(950 * kMiB);  // the guest uses 974 MiB: 24 MiB of headroom
  Bounds(b);
  TickAfter();
  ASSERT_EQ(TickAfter().bytes, 12 * kMiB);  // within a step of the keep: half the headroom
  int ticks = 0;
  do {
    Bounds(b);
    ASSERT_LT(++ticks, 20);
  } while (TickAfter().reason != ReclaimReason::kBelowKeep);
  // Now the bounds say keep 100 MiB; the held keep (950 MiB) is in force for 5 minutes.
  b.set_keep_bytes(100 * kMiB);
  for (int i = 0; i < 290; ++i) {
    Bounds(b);
    ASSERT_EQ(TickAfter().reason, ReclaimReason::kBelowKeep) << i;
  }
  EXPECT_EQ(Report().keep_bytes(), 950 * kMiB);
  for (int i = 0; i < 15; ++i) {
    Bounds(b);
    TickAfter();
  }
  EXPECT_EQ(Report().keep_bytes(), 100 * kMiB);
  EXPECT_GT(executor_->requests().size(), 1u);
}

TEST_F(ReclaimerTest, AnUnreadableProcIsNoSample) {
  Make();
  Bounds();
  guest_.SetReadError(absl::UnavailableError("meminfo gone"));
  const ReclaimDecision d = TickAfter();
  EXPECT_EQ(d.reason, ReclaimReason::kNoSample);
  EXPECT_THAT(d.detail, HasSubstr("meminfo gone"));
  EXPECT_TRUE(executor_->requests().empty());
}

TEST_F(ReclaimerTest, DryRunCountsRequestsAndAchievesNothing) {
  ReclaimerOptions o;
  o.series_start_boottime_ns = 1;
  reclaimer_ = std::make_unique<Reclaimer>(o, std::make_unique<DryRunReclaimExecutor>(true), &guest_, &clock_);
  Bounds();
  TickAfter();
  ASSERT_EQ(TickAfter().reason, ReclaimReason::kStep);
  const v1::ReclaimReport r = Report();
  EXPECT_TRUE(r.dry_run());
  EXPECT_EQ(r.requested_bytes(), 64 * kMiB);
  EXPECT_EQ(r.achieved_bytes(), 0u);
  EXPECT_EQ(guest_.file(), 877 * kMiB);
}

// --reclaim=dry_run opens memory.reclaim without the swappiness probe: the report says so.
TEST_F(ReclaimerTest, ADryRunSaysItsProbeWasSkipped) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/cgroup.XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  std::ofstream(root + "/memory.reclaim") << "";
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> e = OpenReclaimExecutor(/*dry_run=*/true, {root});
  ASSERT_TRUE(e.ok()) << e.status();
  ReclaimerOptions o;
  reclaimer_ = std::make_unique<Reclaimer>(o, *std::move(e), &guest_, &clock_);
  const v1::ReclaimReport r = Report();
  EXPECT_EQ(r.reason(), "no_bounds");
  EXPECT_THAT(r.detail(), HasSubstr("probe was skipped"));
  EXPECT_THAT(r.detail(), HasSubstr("file_only=unknown"));
  EXPECT_TRUE(r.dry_run());
  EXPECT_FALSE(r.file_only());
}

TEST_F(ReclaimerTest, RunSleepsUntilBoundsArriveAndStops) {
  // Real time: the loop's waits are real.
  ReclaimerOptions o;
  o.period = absl::Milliseconds(5);
  o.idle_wait = absl::Hours(1);  // only bounds (or Stop) may wake it
  Make(o, /*with_executor=*/true, RealClock::Get());
  std::thread loop([this] { reclaimer_->Run(); });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(guest_.reads(), 0);  // idle: no /proc reads without bounds
  Bounds();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (executor_->requests().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_FALSE(executor_->requests().empty());
  const absl::Time stopping = absl::Now();
  reclaimer_->Stop();
  loop.join();
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(1));
}

TEST_F(ReclaimerTest, RunReturnsAtOnceWhenOff) {
  ReclaimerOptions o;
  o.enabled = false;
  Make(o);
  Bounds();
  reclaimer_->Run();  // returns at once: a loop here would hang the test
  EXPECT_EQ(guest_.reads(), 0);
  EXPECT_EQ(Report().reason(), "off_disabled");
}

}  // namespace
}  // namespace plimsoll::agent
