#include "server/hypervisor/testing/fake_hypervisor.h"

#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::UnorderedElementsAre;

constexpr int64_t kMiB = 1024 * 1024;
constexpr char kA[] = "00000000-0000-0000-0000-00000000000a";
constexpr char kB[] = "00000000-0000-0000-0000-00000000000b";

class FakeHypervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.AddDomain(kA, "a", 1024 * kMiB, 512 * kMiB);
    fake_.AddDomain(kB, "b", 2048 * kMiB, 2048 * kMiB);
    ASSERT_TRUE(fake_.Connect().ok());
  }
  FakeHypervisor fake_;
};

TEST(FakeHypervisorStartTest, StartsDisconnectedLikeTheRealOne) {
  FakeHypervisor fake;
  EXPECT_FALSE(fake.IsConnected());
  EXPECT_TRUE(absl::IsUnavailable(fake.ListActiveDomains().status()));
  EXPECT_TRUE(fake.Connect().ok());
  EXPECT_TRUE(fake.IsConnected());
  EXPECT_TRUE(fake.Connect().ok()) << "Connect is idempotent";
}

TEST_F(FakeHypervisorTest, ListsOnlyActiveDomains) {
  fake_.SetState(kB, DomainRunState::kShutoff);
  auto list = fake_.ListActiveDomains();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].uuid, kA);
  EXPECT_EQ((*list)[0].name, "a");
  EXPECT_EQ((*list)[0].max_bytes, 1024 * kMiB);
  EXPECT_EQ((*list)[0].current_bytes, 512 * kMiB);

  fake_.SetState(kB, DomainRunState::kPaused);
  EXPECT_EQ(fake_.ListActiveDomains()->size(), 2u);
}

TEST_F(FakeHypervisorTest, StatsDefaultToActualAndSkipUnknown) {
  auto stats = fake_.GetBalloonStats({kA, "nope"});
  ASSERT_TRUE(stats.ok());
  EXPECT_THAT(*stats, UnorderedElementsAre(Key(kA)));
  EXPECT_EQ(stats->at(kA).actual_bytes, 512 * kMiB);
  EXPECT_FALSE(stats->at(kA).unused_bytes.has_value());
}

TEST_F(FakeHypervisorTest, SetStatsKeepsActualAndCurrentTogether) {
  BalloonStats s;
  s.usable_bytes = 100 * kMiB;
  fake_.SetStats(kA, s);
  auto stats = fake_.GetBalloonStats({kA});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->at(kA).usable_bytes, 100 * kMiB);
  EXPECT_EQ(stats->at(kA).actual_bytes, 512 * kMiB) << "unset actual keeps the current size";

  s.actual_bytes = 300 * kMiB;
  fake_.SetStats(kA, s);
  EXPECT_EQ(fake_.GetDomain(kA)->current_bytes, 300 * kMiB);

  fake_.SetActualBytes(kA, 400 * kMiB);
  EXPECT_EQ(fake_.GetDomain(kA)->current_bytes, 400 * kMiB);
  EXPECT_EQ(fake_.GetBalloonStats({kA})->at(kA).actual_bytes, 400 * kMiB);
  EXPECT_EQ(fake_.GetBalloonStats({kA})->at(kA).usable_bytes, 100 * kMiB);
}

TEST_F(FakeHypervisorTest, TargetIsRecordedButBalloonDoesNotMoveByDefault) {
  ASSERT_TRUE(fake_.SetBalloonTarget(kA, 256 * kMiB + 100).ok());
  EXPECT_EQ(fake_.LastTarget(kA), 256 * kMiB) << "rounded down to KiB";
  EXPECT_EQ(fake_.GetDomain(kA)->current_bytes, 512 * kMiB);
  EXPECT_THAT(fake_.target_calls(),
              ElementsAre(AllOf(Field(&FakeHypervisor::TargetCall::uuid, kA),
                                Field(&FakeHypervisor::TargetCall::bytes, 256 * kMiB + 100))));
  fake_.ClearTargetCalls();
  EXPECT_THAT(fake_.target_calls(), IsEmpty());
}

TEST_F(FakeHypervisorTest, TargetErrorsMirrorLibvirt) {
  EXPECT_TRUE(absl::IsNotFound(fake_.SetBalloonTarget("nope", kMiB)));
  absl::Status above = fake_.SetBalloonTarget(kA, 2048 * kMiB);
  EXPECT_TRUE(absl::IsInvalidArgument(above));
  EXPECT_THAT(std::string(above.message()), HasSubstr("higher than max memory"));
  EXPECT_TRUE(absl::IsInvalidArgument(fake_.SetBalloonTarget(kA, 100)));
  fake_.SetState(kA, DomainRunState::kShutoff);
  EXPECT_TRUE(absl::IsFailedPrecondition(fake_.SetBalloonTarget(kA, kMiB)));
  EXPECT_EQ(fake_.target_calls().size(), 4u) << "failed calls are recorded too";
  EXPECT_FALSE(fake_.LastTarget(kA).has_value());
}

TEST(FakeHypervisorOptionsTest, BalloonCanFollowTargetAndEmitEvents) {
  FakeHypervisor::Options options;
  options.balloon_follows_target = true;
  options.emit_balloon_events = true;
  FakeHypervisor fake(options);
  fake.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  ASSERT_TRUE(fake.Connect().ok());
  std::vector<DomainEvent> events;
  fake.SetEventCallback([&](const DomainEvent& e) { events.push_back(e); });
  ASSERT_TRUE(fake.SetBalloonTarget(kA, 300 * kMiB).ok());
  EXPECT_EQ(fake.GetDomain(kA)->current_bytes, 300 * kMiB);
  EXPECT_EQ(fake.GetBalloonStats({kA})->at(kA).actual_bytes, 300 * kMiB);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, DomainEvent::Kind::kBalloonChange);
  EXPECT_EQ(events[0].uuid, kA);
  EXPECT_EQ(events[0].balloon_bytes, 300 * kMiB);
}

TEST_F(FakeHypervisorTest, ScriptedFailuresAreConsumedInOrder) {
  fake_.FailNext(FakeHypervisor::Method::kSetBalloonTarget, absl::InternalError("boom"), 2);
  EXPECT_TRUE(absl::IsInternal(fake_.SetBalloonTarget(kA, 300 * kMiB)));
  EXPECT_TRUE(absl::IsInternal(fake_.SetBalloonTarget(kA, 300 * kMiB)));
  EXPECT_TRUE(fake_.SetBalloonTarget(kA, 300 * kMiB).ok());
  EXPECT_EQ(fake_.call_count(FakeHypervisor::Method::kSetBalloonTarget), 3);
  EXPECT_TRUE(fake_.IsConnected()) << "a non-UNAVAILABLE failure keeps the connection";

  fake_.FailNext(FakeHypervisor::Method::kGetBalloonStats, absl::NotFoundError("x"));
  EXPECT_TRUE(absl::IsNotFound(fake_.GetBalloonStats({kA}).status()));
  EXPECT_TRUE(fake_.GetBalloonStats({kA}).ok());
}

TEST_F(FakeHypervisorTest, UnavailableFailureDisconnectsUntilConnect) {
  fake_.FailNext(FakeHypervisor::Method::kListActiveDomains, absl::UnavailableError("gone"));
  EXPECT_TRUE(absl::IsUnavailable(fake_.ListActiveDomains().status()));
  EXPECT_FALSE(fake_.IsConnected());
  EXPECT_TRUE(absl::IsUnavailable(fake_.GetBalloonStats({kA}).status()));
  ASSERT_TRUE(fake_.Connect().ok());
  EXPECT_TRUE(fake_.ListActiveDomains().ok());
}

TEST_F(FakeHypervisorTest, SimulatedDisconnectAndFailingReconnect) {
  fake_.SimulateDisconnect();
  EXPECT_FALSE(fake_.IsConnected());
  EXPECT_TRUE(absl::IsUnavailable(fake_.SetBalloonTarget(kA, 300 * kMiB)));
  EXPECT_TRUE(absl::IsUnavailable(fake_.EnableStats(kA, 1)));
  fake_.FailNext(FakeHypervisor::Method::kConnect, absl::UnavailableError("still down"));
  EXPECT_TRUE(absl::IsUnavailable(fake_.Connect()));
  EXPECT_FALSE(fake_.IsConnected());
  EXPECT_TRUE(fake_.Connect().ok());
  EXPECT_TRUE(fake_.SetBalloonTarget(kA, 300 * kMiB).ok());
  EXPECT_EQ(fake_.call_count(FakeHypervisor::Method::kConnect), 3);
}

TEST_F(FakeHypervisorTest, EnableStatsIsRemembered) {
  EXPECT_FALSE(fake_.StatsPeriod(kA).has_value());
  ASSERT_TRUE(fake_.EnableStats(kA, 5).ok());
  EXPECT_EQ(fake_.StatsPeriod(kA), 5);
  EXPECT_TRUE(absl::IsNotFound(fake_.EnableStats("nope", 5)));
}

TEST_F(FakeHypervisorTest, EmitsEventsOnDemandAndCallbackMayReenter) {
  std::vector<DomainEvent> events;
  fake_.SetEventCallback([&](const DomainEvent& e) {
    events.push_back(e);
    // Re-entering from the callback must not deadlock.
    EXPECT_TRUE(fake_.ListActiveDomains().ok());
  });
  DomainEvent stopped;
  stopped.kind = DomainEvent::Kind::kStopped;
  stopped.uuid = kB;
  fake_.RemoveDomain(kB);
  fake_.EmitEvent(stopped);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, DomainEvent::Kind::kStopped);
  EXPECT_EQ(events[0].uuid, kB);
  EXPECT_EQ(fake_.ListActiveDomains()->size(), 1u);

  fake_.SetEventCallback(nullptr);
  fake_.EmitEvent(stopped);
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace plimsoll::hypervisor
