#include "server/agent/guest_reclaim_bounds.h"

#include <memory>

#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

v1::Guest Guest(const char* uuid, std::optional<bool> reporting, int64_t ws_mib, int64_t floor_mib) {
  v1::Guest g;
  g.set_uuid(uuid);
  if (reporting.has_value()) g.set_free_page_reporting(*reporting);
  g.mutable_last_decision()->set_working_set_bytes(ws_mib * kMiB);
  g.mutable_last_decision()->set_policy_floor_bytes(floor_mib * kMiB);
  g.mutable_stats()->mutable_anon()->set_bytes(100 * kMiB);
  g.mutable_stats()->mutable_active_file()->set_bytes(100 * kMiB);
  return g;
}

TEST(GuestReclaimBoundsTest, TheKeepIsThePolicysWorkingSetOrFloor) {
  const v1::ReclaimBounds b = GuestReclaimBounds(Guest("a", true, 600, 400));
  EXPECT_TRUE(b.enabled());
  EXPECT_EQ(b.keep_bytes(), 600 * kMiB);
  EXPECT_EQ(b.step_bytes(), kGuestReclaimStepBytes);
  EXPECT_EQ(b.max_bytes_per_second(), kGuestReclaimBytesPerSecond);
  EXPECT_FALSE(b.has_psi_some_avg10_stop_pct()) << "the agent's own stop";
  // pagecache's refault target, 1 MiB/s, in 4 KiB pages.
  EXPECT_DOUBLE_EQ(b.refaults_per_second_stop(), 256);
  // A floor above the working set (a burst's room) is kept too.
  EXPECT_EQ(GuestReclaimBounds(Guest("a", true, 600, 900)).keep_bytes(), 900 * kMiB);
}

TEST(GuestReclaimBoundsTest, NothingWithoutReportingOrAWorkingSet) {
  // Reporting off or unknown: the cache dropped would stay in QEMU's memory.
  EXPECT_FALSE(GuestReclaimBounds(Guest("a", false, 600, 400)).enabled());
  EXPECT_FALSE(GuestReclaimBounds(Guest("a", std::nullopt, 600, 400)).enabled());
  // A policy that names no working set (MoM, static) or no decision yet.
  EXPECT_FALSE(GuestReclaimBounds(Guest("a", true, 0, 400)).enabled());
  EXPECT_FALSE(GuestReclaimBounds(v1::Guest()).enabled());
  // A decision made on libvirt's figures alone: its W counts all cache as hot.
  v1::Guest agentless = Guest("a", true, 600, 400);
  agentless.mutable_stats()->clear_anon();
  agentless.mutable_stats()->clear_active_file();
  EXPECT_FALSE(GuestReclaimBounds(agentless).enabled());
}

TEST(GuestReclaimBoundsTest, NothingWhileItsUnconfirmedReclaimPausesIt) {
  v1::Guest g = Guest("a", true, 600, 400);
  g.mutable_agent()->mutable_reclaim()->set_bounds_pause_left_seconds(120);
  EXPECT_FALSE(GuestReclaimBounds(g).enabled());
  g.mutable_agent()->mutable_reclaim()->set_bounds_pause_left_seconds(0);
  EXPECT_TRUE(GuestReclaimBounds(g).enabled());
}

TEST(GuestReclaimBoundsTest, ThePublishedViewIsReadAndReindexedWhenItChanges) {
  PublishedReclaimBounds p;
  EXPECT_EQ(p.BoundsFor("a"), std::nullopt) << "no source yet";
  auto view = std::make_shared<v1::ListGuestsResponse>();
  *view->add_guests() = Guest("a", true, 600, 400);
  *view->add_guests() = Guest("b", false, 500, 400);
  std::shared_ptr<const v1::ListGuestsResponse> current = view;
  p.SetSource([&current] { return current; });
  ASSERT_TRUE(p.BoundsFor("a").has_value());
  EXPECT_EQ(p.BoundsFor("a")->keep_bytes(), 600 * kMiB);
  EXPECT_FALSE(p.BoundsFor("b")->enabled());
  EXPECT_EQ(p.BoundsFor("c"), std::nullopt) << "not in the view";
  // The next tick's view: a's working set grew, b is gone.
  auto next = std::make_shared<v1::ListGuestsResponse>();
  *next->add_guests() = Guest("a", true, 800, 400);
  current = next;
  EXPECT_EQ(p.BoundsFor("a")->keep_bytes(), 800 * kMiB);
  EXPECT_EQ(p.BoundsFor("b"), std::nullopt);
}

}  // namespace
}  // namespace plimsoll::server::agent
