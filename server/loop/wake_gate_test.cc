// WakeGate on a FakeClock: when early ticks start, what they serve first, and which spikes are
// logged.
#include "server/loop/wake_gate.h"

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

constexpr absl::Duration kTick = absl::Seconds(5);

TEST(WakeGateTest, WithoutAWakeTheTickIsOnSchedule) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(1));
  EXPECT_FALSE(gate.woken());
  EXPECT_EQ(gate.NextTickAt(clock.Now(), kTick), clock.Now() + kTick);
}

TEST(WakeGateTest, SpikesWithinTheIntervalCoalesceIntoOneTickThatServesThemFirst) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(1));
  const absl::Time t0 = clock.Now();  // the last tick started
  gate.StartTick();
  clock.Advance(absl::Milliseconds(100));
  gate.Spike("b", clock.Now());
  clock.Advance(absl::Milliseconds(100));
  gate.Spike("a", clock.Now());
  clock.Advance(absl::Milliseconds(100));
  gate.Spike("b", clock.Now());
  gate.Wake(clock.Now());
  EXPECT_TRUE(gate.woken());
  EXPECT_EQ(gate.NextTickAt(t0, kTick), t0 + absl::Seconds(1)) << "no sooner than 1 s after the last tick";
  EXPECT_THAT(gate.StartTick(), ElementsAre("b", "a")) << "each once, first spike first";
  EXPECT_FALSE(gate.woken());
  EXPECT_EQ(gate.NextTickAt(t0 + absl::Seconds(1), kTick), t0 + absl::Seconds(6));
}

TEST(WakeGateTest, AWakeAfterTheIntervalTicksAtOnce) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(1));
  const absl::Time t0 = clock.Now();
  clock.Advance(absl::Seconds(3));
  gate.Wake(clock.Now());
  EXPECT_EQ(gate.NextTickAt(t0, kTick), clock.Now());
}

TEST(WakeGateTest, AnIntervalLongerThanTheTickLeavesTheSchedule) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(30));
  gate.Wake(clock.Now());
  EXPECT_EQ(gate.NextTickAt(clock.Now(), kTick), clock.Now() + kTick);
  gate.set_min_interval(absl::Milliseconds(200));
  EXPECT_EQ(gate.NextTickAt(clock.Now(), kTick), clock.Now() + absl::Milliseconds(200));
}

// One guest within its agent report budget (2 reports a second), every report a spike, for a
// minute: at most one early tick per second, not one per report.
TEST(WakeGateTest, SustainedSpikesCostOneTickPerInterval) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(1));
  const absl::Time end = clock.Now() + absl::Minutes(1);
  absl::Time last_start = clock.Now();
  gate.StartTick();
  int ticks = 0;
  int spikes = 0;
  int served_first = 0;
  absl::Time next_spike = clock.Now() + absl::Milliseconds(500);
  while (clock.Now() < end) {
    clock.Advance(absl::Milliseconds(10));
    if (clock.Now() >= next_spike) {
      gate.Spike("g", clock.Now());
      ++spikes;
      next_spike += absl::Milliseconds(500);
    }
    if (clock.Now() >= gate.NextTickAt(last_start, kTick)) {
      last_start = clock.Now();
      ++ticks;
      served_first += static_cast<int>(gate.StartTick().size());
    }
  }
  EXPECT_NEAR(spikes, 120, 1);
  EXPECT_LE(ticks, 61);
  EXPECT_GE(ticks, 59);
  EXPECT_EQ(served_first, ticks) << "every early tick served the spiking guest first";
}

TEST(WakeGateTest, SpikeLinesAreLimitedPerGuestAndCountWhatWasNotLogged) {
  FakeClock clock;
  WakeGate gate(absl::Seconds(1), /*log_every=*/absl::Seconds(10));
  EXPECT_THAT(gate.Spike("a", clock.Now()), Optional(0)) << "the first spike is logged at once";
  for (int i = 0; i < 5; ++i) {
    clock.Advance(absl::Seconds(1));
    EXPECT_FALSE(gate.Spike("a", clock.Now()).has_value());
  }
  EXPECT_THAT(gate.Spike("b", clock.Now()), Optional(0)) << "another guest has its own limit";
  clock.Advance(absl::Seconds(5));
  EXPECT_THAT(gate.Spike("a", clock.Now()), Optional(5)) << "10 s after its last line, with the 5 in between";
  EXPECT_FALSE(gate.Spike("a", clock.Now()).has_value());
  gate.Forget("a");
  EXPECT_THAT(gate.Spike("a", clock.Now()), Optional(0)) << "a guest that left starts afresh";
}

}  // namespace
}  // namespace plimsoll::server
