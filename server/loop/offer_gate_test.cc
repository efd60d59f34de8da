// OfferGate on literal headroom series: slow to offer, fast to withdraw, time passed in.
#include "server/loop/offer_gate.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

struct Step {
  int64_t at_seconds;  // since the start
  int64_t headroom;
  int64_t offered;  // expected
};

struct GateCase {
  std::string name;
  int64_t hold_seconds;
  std::vector<Step> steps;
};

TEST(OfferGateTest, Table) {
  const std::vector<GateCase> cases = {
      {"a new gate offers nothing until the headroom has held for the hold", 60,
       {{0, 4 * kGiB, 0}, {30, 4 * kGiB, 0}, {59, 4 * kGiB, 0}, {60, 4 * kGiB, 4 * kGiB}}},
      {"a drop is offered at once", 60,
       {{0, 4 * kGiB, 0}, {60, 4 * kGiB, 4 * kGiB}, {65, 1 * kGiB, 1 * kGiB}, {70, 3 * kGiB, 1 * kGiB}}},
      {"a rise waits the hold from when it began", 60,
       {{0, 2 * kGiB, 0}, {60, 2 * kGiB, 2 * kGiB}, {65, 5 * kGiB, 2 * kGiB}, {124, 5 * kGiB, 2 * kGiB},
        {125, 5 * kGiB, 5 * kGiB}}},
      {"a dip inside the window restarts the wait for the higher value", 60,
       {{0, 3 * kGiB, 0}, {60, 3 * kGiB, 3 * kGiB}, {70, 1 * kGiB, 1 * kGiB}, {75, 3 * kGiB, 1 * kGiB},
        {130, 3 * kGiB, 1 * kGiB}, {135, 3 * kGiB, 3 * kGiB}}},
      {"a rise offers the lowest value it held, stepwise", 60,
       {{0, 1 * kGiB, 0}, {60, 1 * kGiB, 1 * kGiB}, {70, 2 * kGiB, 1 * kGiB}, {100, 3 * kGiB, 1 * kGiB},
        {130, 3 * kGiB, 2 * kGiB}, {160, 3 * kGiB, 3 * kGiB}}},
      {"negative headroom offers 0, and the recovery waits the hold", 60,
       {{0, 1 * kGiB, 0}, {60, 1 * kGiB, 1 * kGiB}, {65, -2 * kGiB, 0}, {70, 2 * kGiB, 0},
        {129, 2 * kGiB, 0}, {130, 2 * kGiB, 2 * kGiB}}},
      {"stale data (fed as 0) withdraws the offer and the fresh data waits the hold", 30,
       {{0, 4 * kGiB, 0}, {30, 4 * kGiB, 4 * kGiB}, {35, 0, 0}, {40, 4 * kGiB, 0}, {69, 4 * kGiB, 0},
        {70, 4 * kGiB, 4 * kGiB}}},
      {"a zero hold follows the headroom", 0,
       {{0, 4 * kGiB, 4 * kGiB}, {5, 1 * kGiB, 1 * kGiB}, {10, 3 * kGiB, 3 * kGiB}}},
      {"a clock that goes back starts the gate over", 60,
       {{0, 4 * kGiB, 0}, {60, 4 * kGiB, 4 * kGiB}, {50, 4 * kGiB, 0}, {110, 4 * kGiB, 4 * kGiB}}},
  };
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  for (const GateCase& c : cases) {
    SCOPED_TRACE(c.name);
    OfferGate gate(absl::Seconds(c.hold_seconds));
    for (const Step& s : c.steps) {
      EXPECT_EQ(gate.Update(s.headroom, t0 + absl::Seconds(s.at_seconds)), s.offered) << "at t=" << s.at_seconds;
    }
  }
}

TEST(OfferGateTest, AShorterHoldTakesEffectOnTheNextUpdate) {
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  OfferGate gate(absl::Seconds(300));
  EXPECT_EQ(gate.Update(4 * kGiB, t0), 0);
  EXPECT_EQ(gate.Update(4 * kGiB, t0 + absl::Seconds(60)), 0);
  gate.set_hold(absl::Seconds(60));
  EXPECT_EQ(gate.hold(), absl::Seconds(60));
  EXPECT_EQ(gate.Update(4 * kGiB, t0 + absl::Seconds(61)), 4 * kGiB);
}

}  // namespace
}  // namespace plimsoll::server
