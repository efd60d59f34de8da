#include "common/clock.h"

#include "gtest/gtest.h"

namespace plimsoll {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - start, absl::Seconds(3));
  clock.SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(clock.Now() - start, absl::Milliseconds(3500));
}

}  // namespace
}  // namespace plimsoll
