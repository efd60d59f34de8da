#include "policy/balloon_follow.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/history_deriver.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMib = int64_t{1} << 20;

GuestView At(double actual_mib, double target_mib, double inflated_mib = 0, double deflated_mib = 0) {
  GuestView g;
  g.max_bytes = 4096 * kMib;
  g.actual_bytes = static_cast<int64_t>(actual_mib * kMib);
  g.target_bytes = static_cast<int64_t>(target_mib * kMib);
  g.balloon_inflate_pages = static_cast<uint64_t>(inflated_mib * 256);
  g.balloon_deflate_pages = static_cast<uint64_t>(deflated_mib * 256);
  return g;
}

// What a loop keeps for one guest: the history's and the component's memories.
struct Memories {
  HistoryMemory history;
  FollowMemory follow;
};

// CheckFollow on `g` at `t` with its history derived first, as plimsolld's collect step does.
FollowVerdict CheckFollow(GuestView g, double t, const FollowParams& p, Memories* m) {
  g.history = DeriveHistory(g, t, &m->history);
  return policy::CheckFollow(g, t, p, &m->follow);
}

TEST(BalloonFollowTest, AFollowingBalloonIsOk) {
  Memories m;
  EXPECT_EQ(CheckFollow(At(4096, 3072), 0, FollowParams(), &m).event, ProgressEvent::kNone);
  FollowVerdict v = CheckFollow(At(3072, 3072), 5, FollowParams(), &m);
  EXPECT_EQ(v.event, ProgressEvent::kNone);
  EXPECT_FALSE(v.in_retry);
  EXPECT_STREQ(v.state, "ok");
  EXPECT_EQ(FollowAllowance(v, 3072 * kMib, 2048 * kMib), 2048 * kMib);
}

TEST(BalloonFollowTest, ChurnStopsTheBalloonAndHoldsTakingForTheRetry) {
  Memories m;
  CheckFollow(At(4096, 2048), 0, FollowParams(), &m);
  // 500 MiB inflated, 494 MiB handed back by the guest: churn.
  FollowVerdict v = CheckFollow(At(4090, 2048, 500, 494), 5, FollowParams(), &m);
  ASSERT_EQ(v.event, ProgressEvent::kChurning);
  EXPECT_TRUE(v.in_retry);
  EXPECT_STREQ(v.state, "churning");
  EXPECT_THAT(v.detail, HasSubstr("net=6MiB"));
  // Stopped where it got to, not at the target it cannot reach.
  EXPECT_EQ(FollowAllowance(v, 4090.0 * kMib, 2048.0 * kMib), 4090.0 * kMib);
  // Held for retry_seconds (60), then taking may start again.
  v = CheckFollow(At(4090, 4090, 500, 494), 64, FollowParams(), &m);
  EXPECT_TRUE(v.in_retry);
  EXPECT_NEAR(v.retry_left_s, 1, 1e-9);
  v = CheckFollow(At(4090, 4090, 500, 494), 66, FollowParams(), &m);
  EXPECT_FALSE(v.in_retry);
  EXPECT_STREQ(v.state, "ok");
}

TEST(BalloonFollowTest, TheRetryDoublesPerEventAndResetsAfterTheMax) {
  FollowParams p;
  p.retry_seconds = 60;
  p.max_retry_seconds = 200;
  Memories m;
  double t = 0;
  double inflated = 0, deflated = 0;
  CheckFollow(At(4096, 2048, inflated, deflated), t, p, &m);
  std::vector<double> retries;
  for (int i = 0; i < 4; ++i) {
    t += 5;
    inflated += 500;
    deflated += 494;
    FollowVerdict v = CheckFollow(At(4090, 2048, inflated, deflated), t, p, &m);
    ASSERT_EQ(v.event, ProgressEvent::kChurning) << i;
    retries.push_back(v.retry_left_s);
  }
  EXPECT_EQ(retries, (std::vector<double>{60, 120, 200, 200}));
  // 200 s without an event: the next one starts at 60 s again.
  t += 201;
  CheckFollow(At(4090, 4090, inflated, deflated), t, p, &m);
  t += 5;
  CheckFollow(At(4090, 2048, inflated, deflated), t, p, &m);
  t += 5;
  inflated += 500;
  deflated += 494;
  FollowVerdict v = CheckFollow(At(4090, 2048, inflated, deflated), t, p, &m);
  ASSERT_EQ(v.event, ProgressEvent::kChurning);
  EXPECT_EQ(v.retry_left_s, 60);
}

TEST(BalloonFollowTest, SelfDeflationKeepsWhatTheGuestTook) {
  Memories m;
  CheckFollow(At(2048, 2048), 0, FollowParams(), &m);
  FollowVerdict v = CheckFollow(At(2600, 2048), 5, FollowParams(), &m);
  ASSERT_EQ(v.event, ProgressEvent::kSelfDeflated);
  EXPECT_STREQ(v.state, "self_deflated");
  EXPECT_EQ(FollowAllowance(v, 2600.0 * kMib, 2048.0 * kMib), 2600.0 * kMib);
  // A larger allowance stays: giving is never held back.
  EXPECT_EQ(FollowAllowance(v, 2600.0 * kMib, 3000.0 * kMib), 3000.0 * kMib);
}

TEST(BalloonFollowTest, OffSeesNothing) {
  FollowParams p;
  p.retry_seconds = 0;
  Memories m;
  CheckFollow(At(2048, 2048), 0, p, &m);
  FollowVerdict v = CheckFollow(At(2600, 2048), 5, p, &m);
  EXPECT_EQ(v.event, ProgressEvent::kNone);
  EXPECT_FALSE(v.in_retry);
}

}  // namespace
}  // namespace plimsoll::policy
