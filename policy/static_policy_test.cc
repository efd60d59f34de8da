#include "policy/static_policy.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMib = int64_t{1} << 20;

GuestView Guest(const std::string& uuid, int64_t target_mib, int64_t actual_mib, int64_t min_mib,
                bool fresh) {
  GuestView guest;
  guest.uuid = uuid;
  guest.name = "vm-" + uuid;
  guest.target_bytes = target_mib * kMib;
  guest.actual_bytes = actual_mib * kMib;
  guest.max_bytes = 8192 * kMib;
  guest.min_bytes = min_mib * kMib;
  guest.has_stats = fresh;
  guest.stats_fresh = fresh;
  if (fresh) guest.unused_bytes = 10 * kMib;
  return guest;
}

struct Row {
  GuestView guest;
  int64_t want_mib;
  const char* reason;
};

TEST(StaticPolicyTest, HoldsEveryGuestAtItsTarget) {
  const std::vector<Row> rows = {
      {Guest("a", 4096, 4096, 0, true), 4096, "static policy holds target=4096MiB"},
      // target differs from actual (a balloon still moving): the target is what is held.
      {Guest("b", 3000, 3500, 0, true), 3000, "static policy holds target=3000MiB"},
      // Almost no free memory and a host under pressure make no difference.
      {Guest("c", 1024, 1024, 512, true), 1024, "static policy holds target=1024MiB"},
      {Guest("d", 2048, 2048, 0, false), 2048, "static policy holds target=2048MiB"},
      // The one exception: the floor every policy honours.
      {Guest("e", 256, 256, 512, true), 512,
       "static policy holds target=256MiB raised_to_min=512MiB"},
  };
  Snapshot snapshot;
  snapshot.host.guest_budget_bytes = 1024 * kMib;  // far over budget: still no change
  for (const Row& row : rows) snapshot.guests.push_back(row.guest);

  const StaticPolicy policy;
  const Decisions decisions = policy.Decide(snapshot, PolicyState());
  ASSERT_EQ(decisions.guests.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(decisions.guests[i].uuid, rows[i].guest.uuid);
    EXPECT_EQ(decisions.guests[i].target_bytes, rows[i].want_mib * kMib) << i;
    EXPECT_EQ(decisions.guests[i].reason, rows[i].reason);
  }
  EXPECT_THAT(decisions.summary, HasSubstr("static: guests=5"));
  EXPECT_TRUE(decisions.next_state.guests.empty());
  EXPECT_EQ(policy.name(), "static");
}

TEST(StaticPolicyTest, PureAndEmpty) {
  Snapshot snapshot;
  snapshot.guests.push_back(Guest("a", 100, 100, 0, true));
  const StaticPolicy policy;
  const Decisions a = policy.Decide(snapshot, PolicyState());
  const Decisions b = policy.Decide(snapshot, PolicyState());
  ASSERT_EQ(a.guests.size(), 1u);
  EXPECT_EQ(a.guests[0].target_bytes, b.guests[0].target_bytes);
  EXPECT_EQ(a.guests[0].reason, b.guests[0].reason);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_TRUE(policy.Decide(Snapshot(), PolicyState()).guests.empty());
}

}  // namespace
}  // namespace plimsoll::policy
