#include "ctl/guest_table.h"

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
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
  // A line width keeps every line within it, reasons in their short form.
  g->mutable_last_decision()->set_reason(
      "pagecache: src=agent actual=1023MiB hard=120MiB cache=707MiB free=12MiB floor=376MiB "
      "ws=200MiB allow=1024MiB stall_pct=0.00 refault=0.0MiB/s severity=0.00 level=calm "
      "new_report=1 action=reclaim taken=256MiB -> 767MiB state=ok");
  for (size_t width : {100u, 120u, 160u}) {
    const std::string narrow = RenderGuestTable(view, width);
    for (absl::string_view line : absl::StrSplit(narrow, '\n')) {
      EXPECT_LE(line.size(), width) << line;
    }
    EXPECT_NE(narrow.find("budget=2048Mi"), std::string::npos) << narrow;  // wrapped, not cut
    if (width >= 120) {
      EXPECT_NE(narrow.find("reclaim taken=256MiB"), std::string::npos) << narrow;
    }
  }
  // Without a width (--wide) the reason is whole.
  EXPECT_NE(RenderGuestTable(view).find("severity=0.00 level=calm new_report=1"), std::string::npos);
}

TEST(GuestTableTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(1024LL << 20), "1024Mi");
  EXPECT_EQ(HumanBytes(20LL << 30), "20.0Gi");
}

}  // namespace
}  // namespace plimsoll::ctl
