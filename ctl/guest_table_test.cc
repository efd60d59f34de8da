#include "ctl/guest_table.h"

#include <algorithm>

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
      "pagecache: take x=0.00 ws=420MiB taken=256MiB -> 767MiB | src=agent actual=1023MiB "
      "floor=376MiB burst=0MiB ws=420MiB allow=767MiB stall_pct=0.00 refault=0MiB/s measured=1");
  for (size_t width : {100u, 120u, 160u}) {
    const std::string narrow = RenderGuestTable(view, width);
    for (absl::string_view line : absl::StrSplit(narrow, '\n')) {
      EXPECT_LE(line.size(), width) << line;
    }
    EXPECT_NE(narrow.find("budget=2048Mi"), std::string::npos) << narrow;  // wrapped, not cut
    if (width >= 120) {
      EXPECT_NE(narrow.find("take taken=256MiB"), std::string::npos) << narrow;
    }
  }
  // Without a width (--wide) the reason is whole.
  EXPECT_NE(RenderGuestTable(view).find("| src=agent actual=1023MiB floor=376MiB"), std::string::npos);
}

// The agent's reclaim in `guest`: its state, the bounds sent, its claims and their check; no
// lines for a guest whose agent has no reclaimer.
TEST(GuestTableTest, AnAgentsReclaim) {
  plimsoll::v1::Guest g;
  g.set_name("web-1");
  g.mutable_agent()->set_connected(true);
  EXPECT_FALSE(absl::StrContains(RenderGuest(g), "reclaim")) << RenderGuest(g);
  auto* r = g.mutable_agent()->mutable_reclaim();
  r->set_state("idle");
  r->set_reason("below_keep");
  r->set_agent_keep_bytes(256LL << 20);
  r->set_bounds_enabled(true);
  r->set_bounds_keep_bytes(256LL << 20);
  r->set_claimed_bytes(1324LL << 20);
  r->set_confirmed_bytes(300LL << 20);
  r->set_unconfirmed_bytes(1024LL << 20);
  r->set_unconfirmed_claims(1);
  r->set_last_verdict("confirmed");
  std::string one = RenderGuest(g);
  EXPECT_TRUE(absl::StrContains(one, "reclaim:         idle (below_keep) agent keep 256Mi, bounds sent: keep 256Mi\n"))
      << one;
  EXPECT_TRUE(absl::StrContains(one, "reclaim claims:  1324Mi claimed, 300Mi confirmed by qemu rss, 1024Mi not "
                                     "(1 unconfirmed claims, last confirmed)\n"))
      << one;
  r->set_bounds_enabled(false);
  r->set_pending_claim_bytes(64LL << 20);
  one = RenderGuest(g);
  EXPECT_TRUE(absl::StrContains(one, "bounds sent: off\n")) << one;
  EXPECT_TRUE(absl::StrContains(one, ", 64Mi pending\n")) << one;
  r->set_bounds_pause_left_seconds(540.4);
  one = RenderGuest(g);
  EXPECT_TRUE(absl::StrContains(one, ", 64Mi pending, bounds paused 540s more\n")) << one;
  r->clear_bounds_enabled();
  EXPECT_TRUE(absl::StrContains(RenderGuest(g), "bounds sent: none\n")) << RenderGuest(g);
}

// What a guest costs the host: its QEMU RSS and free page reporting in `guest`, unknown said as
// such; the guests' RSS summed in the host header.
TEST(GuestTableTest, WhatGuestsCostTheHost) {
  plimsoll::v1::Guest g;
  g.set_name("web-1");
  g.mutable_stats()->mutable_rss()->set_bytes(621LL << 20);
  std::string one = RenderGuest(g);
  EXPECT_TRUE(absl::StrContains(one, "qemu rss:        621Mi")) << one;
  EXPECT_TRUE(absl::StrContains(one, "page reporting:  unknown\n")) << one;
  g.set_free_page_reporting(true);
  EXPECT_TRUE(absl::StrContains(RenderGuest(g), "page reporting:  on\n")) << RenderGuest(g);
  g.set_free_page_reporting(false);
  EXPECT_TRUE(absl::StrContains(RenderGuest(g), "page reporting:  off\n")) << RenderGuest(g);

  plimsoll::v1::ListGuestsResponse view;
  view.mutable_host()->set_guests_actual_bytes(2LL << 30);
  view.mutable_host()->set_guests_rss_bytes(1242LL << 20);
  const std::string table = RenderGuestTable(view);
  EXPECT_TRUE(absl::StrContains(table, "guests_actual=2048Mi guests_rss=1242Mi ")) << table;
  EXPECT_FALSE(absl::StrContains(table, "host: policy:")) << table;
  // The policy's host line (its share-out and pool) under the header, wrapped like it.
  view.mutable_host()->set_policy_summary("pagecache: limit=2048MiB free=0MiB pool members=1 covers=1");
  EXPECT_TRUE(absl::StrContains(RenderGuestTable(view), "host: policy: pagecache: limit=2048MiB"))
      << RenderGuestTable(view);
  for (absl::string_view line : absl::StrSplit(RenderGuestTable(view, 100), '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }
}

TEST(GuestTableTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(1024LL << 20), "1024Mi");
  EXPECT_EQ(HumanBytes(20LL << 30), "20.0Gi");
}

TEST(GuestTableTest, TheLineInTheHeaderAndInFull) {
  plimsoll::v1::ListGuestsResponse view;
  view.mutable_host()->set_policy("mom");
  auto* l = view.mutable_host_line();
  l->set_capacity_bytes(8LL << 30);
  l->set_committed_bytes(9LL << 30);
  l->set_burst_reserve_bytes(1LL << 30);
  l->set_new_guest_room_bytes(512LL << 20);
  l->set_headroom_bytes(-(1536LL << 20));
  l->set_over_line(true);
  l->set_guests(3);
  l->set_guests_at_ceiling(1);
  l->set_tick(9);
  std::string table = RenderGuestTable(view);
  EXPECT_TRUE(absl::StrContains(
      table, "line: offered=0Mi headroom=-1536Mi committed=9216Mi/capacity=8192Mi at_ceiling=1/3 OVER THE LINE\n"))
      << table;
  const std::string full = RenderLine(*l);
  EXPECT_TRUE(absl::StrContains(full, "committed          9216Mi  guests 8192Mi (max(floor, working set) each; 1 of 3"))
      << full;
  EXPECT_TRUE(absl::StrContains(full, "over the line         YES  committed > capacity")) << full;
  EXPECT_TRUE(absl::StrContains(full, "stale                  no")) << full;

  l->set_over_line(false);
  l->set_stale(true);
  l->set_stale_reason("libvirt is disconnected");
  table = RenderGuestTable(view);
  EXPECT_TRUE(absl::StrContains(table, "STALE (libvirt is disconnected)")) << table;
  EXPECT_FALSE(absl::StrContains(table, "OVER THE LINE")) << table;
  EXPECT_TRUE(absl::StrContains(RenderLine(*l), "(0: the line is stale)")) << RenderLine(*l);
  view.clear_host_line();
  EXPECT_FALSE(absl::StrContains(RenderGuestTable(view), "line:")) << "no line in the view, none shown";
}

TEST(GuestTableTest, ALineEventOnOneLine) {
  plimsoll::v1::WatchEvent e;
  e.mutable_host_line()->set_offered_bytes(2LL << 30);
  e.mutable_host_line()->set_headroom_bytes(2LL << 30);
  const std::string line = RenderEvent(e);
  EXPECT_TRUE(absl::StrContains(line, "--:--:-- line: offered=2048Mi headroom=2048Mi")) << line;
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
}

}  // namespace
}  // namespace plimsoll::ctl
