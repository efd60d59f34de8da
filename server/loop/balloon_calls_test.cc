#include "server/loop/balloon_calls.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using Kind = BalloonCalls::Kind;

BalloonCalls::Call TargetCall(const std::string& uuid, int64_t bytes) {
  BalloonCalls::Call c;
  c.kind = Kind::kSetTarget;
  c.uuid = uuid;
  c.name = uuid;
  c.value = bytes;
  return c;
}

// Takes until `n` results came (the workers are real threads), at most 10 s of real time.
std::vector<BalloonCalls::Result> TakeAtLeast(BalloonCalls& calls, size_t n) {
  std::vector<BalloonCalls::Result> out;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (out.size() < n && absl::Now() < deadline) {
    for (auto& r : calls.Take()) out.push_back(std::move(r));
    if (out.size() < n) absl::SleepFor(absl::Milliseconds(1));
  }
  return out;
}

TEST(BalloonCallsTest, InlineRunsOnTheCallersThreadAndReportsAtTheNextTake) {
  FakeClock clock;
  BalloonCalls calls({/*workers=*/0, absl::Seconds(60)}, &clock);
  int runs = 0;
  ASSERT_EQ(calls.Submit(TargetCall("a", 1 << 30), [&] {
    ++runs;
    return absl::InternalError("no");
  }),
            BalloonCalls::Submitted::kAccepted);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(calls.Pending("a"), nullptr);
  std::vector<BalloonCalls::Result> r = calls.Take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].call.value, 1 << 30);
  EXPECT_TRUE(absl::IsInternal(r[0].status));
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_TRUE(calls.Take().empty());
}

// One domain's call hangs: the others' calls run meanwhile; the hung domain is busy (no second
// call) until its deadline, then timed out and free for one new call; the hung call's late
// return is reported with its real status.
TEST(BalloonCallsTest, AHungCallCostsOneWorkerAndIsTimedOutThenReportedLate) {
  FakeClock clock;
  BalloonCalls calls({/*workers=*/2, absl::Seconds(10)}, &clock);
  absl::Notification release, started;
  ASSERT_EQ(calls.Submit(TargetCall("hung", 1000), [&] {
    started.Notify();
    release.WaitForNotification();
    return absl::OkStatus();
  }),
            BalloonCalls::Submitted::kAccepted);
  started.WaitForNotification();
  EXPECT_EQ(calls.Submit(TargetCall("hung", 2000), [] { return absl::OkStatus(); }), BalloonCalls::Submitted::kBusy);
  ASSERT_NE(calls.Pending("hung"), nullptr);
  EXPECT_EQ(calls.Pending("hung")->value, 1000);

  ASSERT_EQ(calls.Submit(TargetCall("calm", 3000), [] { return absl::OkStatus(); }),
            BalloonCalls::Submitted::kAccepted);
  std::vector<BalloonCalls::Result> r = TakeAtLeast(calls, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].call.uuid, "calm");
  EXPECT_TRUE(r[0].status.ok());
  EXPECT_NE(calls.Pending("hung"), nullptr) << "not past its deadline yet";

  clock.Advance(absl::Seconds(10));
  r = calls.Take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].call.uuid, "hung");
  EXPECT_TRUE(r[0].timed_out);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r[0].status));
  EXPECT_EQ(calls.Pending("hung"), nullptr);

  // Free for one new call, which queues behind nothing here (the other worker is idle).
  std::atomic<bool> second_ran{false};
  absl::Notification release_second, second_started;
  ASSERT_EQ(calls.Submit(TargetCall("hung", 4000), [&] {
    second_started.Notify();
    release_second.WaitForNotification();
    second_ran = true;
    return absl::InternalError("second failed");
  }),
            BalloonCalls::Submitted::kAccepted);
  second_started.WaitForNotification();
  clock.Advance(absl::Seconds(10));
  r = calls.Take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].timed_out);
  // Two calls of this domain in the pool, both given up: no third until one returns.
  EXPECT_EQ(calls.Submit(TargetCall("hung", 5000), [] { return absl::OkStatus(); }), BalloonCalls::Submitted::kBusy);
  EXPECT_EQ(calls.in_pool(), 2);

  release.Notify();
  r = TakeAtLeast(calls, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].call.value, 1000);
  EXPECT_TRUE(r[0].late);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_TRUE(r[0].status.ok());
  release_second.Notify();
  r = TakeAtLeast(calls, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].call.value, 4000);
  EXPECT_TRUE(r[0].late);
  EXPECT_TRUE(absl::IsInternal(r[0].status));
  EXPECT_TRUE(second_ran);
  EXPECT_EQ(calls.in_pool(), 0);
}

// A call given up while it still waited in the queue is never run: it would move a balloon to a
// target the loop no longer expects.
TEST(BalloonCallsTest, ACallTimedOutInTheQueueIsNeverRun) {
  FakeClock clock;
  BalloonCalls calls({/*workers=*/1, absl::Seconds(5)}, &clock);
  absl::Notification release, started;
  calls.Submit(TargetCall("a", 1), [&] {
    started.Notify();
    release.WaitForNotification();
    return absl::OkStatus();
  });
  started.WaitForNotification();
  std::atomic<bool> b_ran{false};
  ASSERT_EQ(calls.Submit(TargetCall("b", 2), [&] {
    b_ran = true;
    return absl::OkStatus();
  }),
            BalloonCalls::Submitted::kAccepted);
  clock.Advance(absl::Seconds(5));
  std::vector<BalloonCalls::Result> r = calls.Take();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].timed_out && r[1].timed_out);
  release.Notify();
  r = TakeAtLeast(calls, 2);
  ASSERT_EQ(r.size(), 2u);
  for (const auto& x : r) {
    EXPECT_TRUE(x.late);
    if (x.call.uuid == "b") {
      EXPECT_TRUE(absl::IsCancelled(x.status)) << x.status;
    }
  }
  EXPECT_FALSE(b_ran);
}

// The destructor drops queued calls and joins the workers once the running call returns.
TEST(BalloonCallsTest, DestructionWaitsForTheRunningCallAndDropsTheQueue) {
  FakeClock clock;
  std::atomic<bool> queued_ran{false};
  std::atomic<bool> running_done{false};
  absl::Notification started;
  {
    BalloonCalls calls({/*workers=*/1, absl::Seconds(60)}, &clock);
    calls.Submit(TargetCall("a", 1), [&] {
      started.Notify();
      absl::SleepFor(absl::Milliseconds(200));
      running_done = true;
      return absl::OkStatus();
    });
    started.WaitForNotification();
    calls.Submit(TargetCall("b", 2), [&] {
      queued_ran = true;
      return absl::OkStatus();
    });
  }
  EXPECT_TRUE(running_done);
  EXPECT_FALSE(queued_ran);
}

}  // namespace
}  // namespace plimsoll::server
