// GuestTracker::Reconcile keeps the tracked set equal to libvirt's list and the
// by-name order current, without rebuilding either on the usual tick.
#include "server/loop/guest_tracker.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = 1LL << 20;

hypervisor::DomainInfo Domain(const std::string& name, const std::string& uuid, int64_t max_mib = 1024) {
  hypervisor::DomainInfo d;
  d.name = name;
  d.uuid = uuid;
  d.state = hypervisor::DomainRunState::kRunning;
  d.max_bytes = max_mib * kMiB;
  d.current_bytes = max_mib * kMiB;
  return d;
}

std::vector<std::string> Names(const GuestTracker& t) {
  std::vector<std::string> out;
  for (const TrackedGuest* g : t.ByName()) out.push_back(g->info.name);
  return out;
}

TEST(GuestTrackerTest, ReconcileAddsRemovesRenamesAndKeepsTheNameOrder) {
  GuestTracker t(GuestRules{});
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  auto r = t.Reconcile({Domain("c", "u1"), Domain("a", "u2"), Domain("b", "u3")}, now);
  EXPECT_EQ(r.added.size(), 3u);
  EXPECT_TRUE(r.removed.empty());
  EXPECT_EQ(Names(t), (std::vector<std::string>{"a", "b", "c"}));

  r = t.Reconcile({Domain("c", "u1"), Domain("a", "u2"), Domain("b", "u3")}, now);
  EXPECT_TRUE(r.added.empty());
  EXPECT_TRUE(r.removed.empty());
  EXPECT_FALSE(r.max_changed);

  // The same uuid listed twice still leaves u3 to be removed.
  r = t.Reconcile({Domain("c", "u1"), Domain("c", "u1"), Domain("a", "u2")}, now);
  EXPECT_EQ(r.removed, std::vector<std::string>{"u3"});
  EXPECT_EQ(Names(t), (std::vector<std::string>{"a", "c"}));

  // A rename reorders; a new size is reported.
  r = t.Reconcile({Domain("0-first", "u1", 2048), Domain("a", "u2")}, now);
  EXPECT_TRUE(r.max_changed);
  EXPECT_EQ(Names(t), (std::vector<std::string>{"0-first", "a"}));
  EXPECT_EQ(t.Find("u1")->info.max_bytes, 2048 * kMiB);

  // Views follow the same order.
  const std::vector<policy::GuestView> views = t.Views();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].uuid, "u1");
  EXPECT_EQ(views[1].uuid, "u2");

  r = t.Reconcile({}, now);
  EXPECT_EQ(r.removed.size(), 2u);
  EXPECT_TRUE(t.ByName().empty());
  EXPECT_TRUE(t.guests().empty());
}

}  // namespace
}  // namespace plimsoll::server
