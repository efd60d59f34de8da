#include "policy/proxmox_policy.h"

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

GuestView G(const std::string& name, int64_t actual_mib, int64_t unused_mib) {
  GuestView g;
  g.name = name;
  g.uuid = "uuid-" + name;
  g.max_bytes = 4096 * kMib;
  g.min_bytes = 1024 * kMib;
  g.actual_bytes = actual_mib * kMib;
  g.target_bytes = g.actual_bytes;
  g.has_stats = true;
  g.stats_fresh = true;
  g.unused_bytes = unused_mib * kMib;
  return g;
}

Decisions Decide(const std::vector<GuestView>& guests, int64_t budget_mib,
              int64_t available_mib = 65536) {
  Snapshot s;
  s.host.guest_budget_bytes = budget_mib * kMib;
  s.host.mem_available_bytes = available_mib * kMib;
  s.guests = guests;
  return ProxmoxPolicy().Decide(s, PolicyState());
}

double Mib(const GuestDecision& d) { return static_cast<double>(d.target_bytes) / kMib; }

TEST(ProxmoxPolicyTest, Name) { EXPECT_EQ(ProxmoxPolicy().name(), "proxmox"); }

TEST(ProxmoxPolicyTest, ShrinksEveryGuestByShareAtMost100MibPerCycle) {
  // 12288 MiB held, budget 9216: goal -3072. Equal shares: desired = 1024 + (9216-3072)/3 each.
  const Decisions d = Decide({G("a", 4096, 50), G("b", 4096, 2000), G("c", 4096, 50)}, 9216);
  for (const GuestDecision& g : d.guests) EXPECT_EQ(Mib(g), 3996);
  EXPECT_THAT(d.guests[0].reason, HasSubstr("mode=shrink"));
  EXPECT_THAT(d.guests[0].reason, HasSubstr("desired=3072MiB"));
  EXPECT_THAT(d.summary, HasSubstr("goal=-3072MiB"));
}

TEST(ProxmoxPolicyTest, SharesWeighTheSplitAndMinClamps) {
  GuestView big = G("big", 2048, 10);
  big.shares = 3000;
  const Decisions d = Decide({big, G("small", 1100, 10)}, 2048 + 1100 - 2000);
  // alloc = (2048-1024) + (1100-1024) - 2000 = -900 -> small clamps at its min 1024, big takes
  // the rest: 2048 - 100 (cap).
  EXPECT_EQ(Mib(d.guests[0]), 1948);
  EXPECT_EQ(Mib(d.guests[1]), 1024);
}

TEST(ProxmoxPolicyTest, GrowsNeedyGuestsFirst) {
  // 2048 MiB free. "needy" has 100 MiB free of 4096 max, "roomy" 2000 MiB.
  const Decisions d = Decide({G("needy", 2048, 100), G("roomy", 2048, 2000)}, 6144);
  EXPECT_EQ(Mib(d.guests[0]), 2148);
  EXPECT_EQ(Mib(d.guests[1]), 2048);
  EXPECT_THAT(d.guests[0].reason, HasSubstr("set=needy"));
  // Nobody needy: everybody grows.
  const Decisions all = Decide({G("a", 2048, 2000), G("b", 2048, 2000)}, 6144);
  EXPECT_EQ(Mib(all.guests[0]), 2148);
  EXPECT_EQ(Mib(all.guests[1]), 2148);
  EXPECT_THAT(all.guests[0].reason, HasSubstr("set=all"));
}

TEST(ProxmoxPolicyTest, DeadbandAndHostLimit) {
  const Decisions d = Decide({G("a", 2048, 100)}, 2048 + 8);
  EXPECT_EQ(Mib(d.guests[0]), 2048);
  EXPECT_THAT(d.guests[0].reason, HasSubstr("mode=deadband"));
  // Budget free but the host is not: the host decides.
  const Decisions host = Decide({G("a", 2048, 100)}, 8192, 0);
  EXPECT_THAT(host.summary, HasSubstr("goal=0MiB"));
}

TEST(ProxmoxPolicyTest, UnsafeGuestsAreHeldButCounted) {
  GuestView stale = G("stale", 4096, 50);
  stale.stats_fresh = false;
  const Decisions d = Decide({stale, G("b", 4096, 50)}, 4096);
  EXPECT_EQ(Mib(d.guests[0]), 4096);
  EXPECT_THAT(d.guests[0].reason, HasSubstr("proxmox: hold stats_fresh=false"));
  EXPECT_EQ(Mib(d.guests[1]), 3996);
  EXPECT_EQ(Decide({}, 0).guests.size(), 0u);
}

}  // namespace
}  // namespace plimsoll::policy
