#include "server/loop/stored_controls.h"

#include <cstdint>
#include <optional>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(GuestBudgetTest, IsTheSmallerOfHostLessReserveAndCap) {
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, std::nullopt), 12 * kMiB);
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, 20 * kMiB), 12 * kMiB);
  EXPECT_EQ(GuestBudget(4 * kMiB, 8 * kMiB, std::nullopt), 0) << "never negative";
}

// A view as the loop published it: guest a with a pin, guest b without an override, the host
// at the configuration's reserve and cap.
plimsoll::v1::ListGuestsResponse Published() {
  plimsoll::v1::ListGuestsResponse v;
  auto* a = v.add_guests();
  a->set_uuid("a-uuid");
  a->mutable_override()->set_pin_bytes(512 * kMiB);
  a->set_target_bytes(512 * kMiB);
  v.add_guests()->set_uuid("b-uuid");
  auto* h = v.mutable_host();
  h->set_mem_total_bytes(16384 * kMiB);
  h->set_host_reserve_bytes(1024 * kMiB);
  h->set_guest_budget_bytes(8192 * kMiB);
  h->set_guest_overrides(1);
  return v;
}

TEST(WithStoredControlsTest, ShowsEveryWriteAndLeavesWhatTheTickDecides) {
  const HostBase base{1024 * kMiB, 8192 * kMiB};
  struct Case {
    const char* name;
    OverrideStore::Snapshot stored;
    bool a_has_override;
    bool b_has_override;
    int64_t overrides, reserve_mib, budget_mib;
    bool paused;
  };
  OverrideStore::Snapshot cleared;  // a's pin cleared, nothing else stored
  OverrideStore::Snapshot b_set;
  b_set.guests["a-uuid"].set_pin_bytes(512 * kMiB);
  b_set.guests["b-uuid"].set_exclude(true);
  OverrideStore::Snapshot host_set = b_set;
  host_set.guests.erase("b-uuid");
  host_set.host.set_host_reserve_bytes(2048 * kMiB);
  host_set.host.set_guest_memory_budget_bytes(4096 * kMiB);
  host_set.host.set_paused(true);
  OverrideStore::Snapshot reserve_only = host_set;
  reserve_only.host.clear_guest_memory_budget_bytes();
  reserve_only.host.clear_paused();
  reserve_only.host.set_host_reserve_bytes(12288 * kMiB);  // 16 GiB - 12 GiB under the 8 GiB cap
  const Case cases[] = {
      {"cleared", cleared, false, false, 0, 1024, 8192, false},
      {"set on b", b_set, true, true, 2, 1024, 8192, false},
      {"host policy", host_set, true, false, 1, 2048, 4096, true},
      {"reserve over the config's cap", reserve_only, true, false, 1, 12288, 4096, false},
  };
  for (const Case& c : cases) {
    const plimsoll::v1::ListGuestsResponse out = WithStoredControls(Published(), c.stored, base);
    EXPECT_EQ(out.guests(0).has_override(), c.a_has_override) << c.name;
    EXPECT_EQ(out.guests(1).has_override(), c.b_has_override) << c.name;
    EXPECT_EQ(out.host().guest_overrides(), c.overrides) << c.name;
    EXPECT_EQ(out.host().host_reserve_bytes(), c.reserve_mib * kMiB) << c.name;
    EXPECT_EQ(out.host().guest_budget_bytes(), c.budget_mib * kMiB) << c.name;
    EXPECT_EQ(out.host().paused(), c.paused) << c.name;
    EXPECT_EQ(out.host().host_policy().paused(), c.paused) << c.name;
    EXPECT_EQ(out.guests(0).target_bytes(), 512 * kMiB) << c.name << ": the tick's to change";
  }
  const auto with_b = WithStoredControls(Published(), b_set, base);
  EXPECT_TRUE(with_b.guests(1).override().exclude());
}

TEST(WithStoredControlsTest, ABudgetIsNotInventedWithoutTheHostsMemory) {
  plimsoll::v1::ListGuestsResponse v = Published();
  v.mutable_host()->clear_mem_total_bytes();
  v.mutable_host()->clear_guest_budget_bytes();
  OverrideStore::Snapshot stored;
  stored.host.set_guest_memory_budget_bytes(4096 * kMiB);
  EXPECT_EQ(WithStoredControls(v, stored, HostBase{}).host().guest_budget_bytes(), 0);
}

}  // namespace
}  // namespace plimsoll::server
