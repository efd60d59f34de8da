#include "policy/policy_state.h"

#include <string>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

struct OneMemory {
  double allowance_bytes = 0;
};
struct OtherMemory {
  int count = 0;
};

TEST(StateSlotTest, EmptySlotReadsNull) {
  StateSlot slot;
  EXPECT_TRUE(slot.empty());
  EXPECT_EQ(slot.Get<OneMemory>(), nullptr);
}

TEST(StateSlotTest, ReadsBackWhatWasSet) {
  StateSlot slot;
  slot.Set(OneMemory{512});
  ASSERT_NE(slot.Get<OneMemory>(), nullptr);
  EXPECT_EQ(slot.Get<OneMemory>()->allowance_bytes, 512);
  slot.GetMutable<OneMemory>()->allowance_bytes = 256;
  EXPECT_EQ(slot.Get<OneMemory>()->allowance_bytes, 256);
}

// A policy switched in on a guest another policy remembered starts afresh: it never misreads the
// other's memory as its own.
TEST(StateSlotTest, AnotherPolicysTypeReadsNull) {
  StateSlot slot;
  slot.Set(OtherMemory{7});
  EXPECT_FALSE(slot.empty());
  EXPECT_EQ(slot.Get<OneMemory>(), nullptr);
  slot.Set(OneMemory{1});
  EXPECT_EQ(slot.Get<OtherMemory>(), nullptr);
  EXPECT_EQ(slot.Get<OneMemory>()->allowance_bytes, 1);
}

// Decide returns the next state by value: a copy must not share the original's value.
TEST(StateSlotTest, CopiesAreIndependent) {
  PolicyState a;
  a.guests["g"].Set(OneMemory{100});
  a.host.Set(OtherMemory{3});
  PolicyState b = a;
  b.guests["g"].GetMutable<OneMemory>()->allowance_bytes = 200;
  b.host.GetMutable<OtherMemory>()->count = 4;
  EXPECT_EQ(FindGuestState<OneMemory>(a, "g")->allowance_bytes, 100);
  EXPECT_EQ(FindGuestState<OneMemory>(b, "g")->allowance_bytes, 200);
  EXPECT_EQ(a.host.Get<OtherMemory>()->count, 3);
}

TEST(StateSlotTest, FindGuestStateOfUnknownGuestIsNull) {
  PolicyState s;
  s.guests["g"].Set(OneMemory{1});
  EXPECT_EQ(FindGuestState<OneMemory>(s, "h"), nullptr);
  EXPECT_EQ(FindGuestState<OtherMemory>(s, "g"), nullptr);
}

}  // namespace
}  // namespace plimsoll::policy
