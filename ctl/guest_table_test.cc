#include "ctl/guest_table.h"

#include "gtest/gtest.h"

namespace plimsoll::ctl {
namespace {

TEST(GuestTableTest, ShowsEveryGuestWithSizesAndReason) {
  plimsoll::v1::ListGuestsResponse view;
  view.mutable_host()->set_guest_budget_bytes(2LL << 30);
  view.mutable_host()->set_policy("mom");
  view.mutable_host()->set_libvirt_connected(true);
  auto* g = view.add_guests();
  g->set_name("web-1");
  g->set_management_state(plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  g->set_max_bytes(1024LL << 20);
  g->set_target_bytes(700LL << 20);
  g->set_actual_bytes(712LL << 20);
  g->mutable_stats()->mutable_disk_caches()->set_bytes(300LL << 20);
  g->mutable_last_decision()->set_reason("mom: shrink");
  auto* idle = view.add_guests();
  idle->set_name("idle");
  idle->set_management_state(plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON);

  const std::string table = RenderGuestTable(view);
  EXPECT_NE(table.find("budget=2048Mi"), std::string::npos) << table;
  EXPECT_NE(table.find("web-1"), std::string::npos) << table;
  EXPECT_NE(table.find("managed"), std::string::npos) << table;
  EXPECT_NE(table.find("700Mi"), std::string::npos) << table;
  EXPECT_NE(table.find("712Mi"), std::string::npos) << table;
  EXPECT_NE(table.find("300Mi"), std::string::npos) << table;
  EXPECT_NE(table.find("mom: shrink"), std::string::npos) << table;
  EXPECT_NE(table.find("no-balloon"), std::string::npos) << table;
  // Absent stats are shown as "-", never as 0.
  const std::string idle_line = table.substr(table.find("idle"));
  EXPECT_NE(idle_line.find("       -        -"), std::string::npos) << idle_line;
  // Truncation keeps lines short for terminals.
  const std::string narrow = RenderGuestTable(view, 8);
  EXPECT_NE(narrow.find("mom: ..."), std::string::npos) << narrow;
}

TEST(GuestTableTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(1024LL << 20), "1024Mi");
  EXPECT_EQ(HumanBytes(20LL << 30), "20.0Gi");
}

}  // namespace
}  // namespace plimsoll::ctl
