#include "policy/reclaim_pool.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr double kMiB = 1 << 20;

TEST(ReclaimPoolTest, SizesByTable) {
  struct Case {
    const char* name;
    std::vector<PoolMember> members;
    double lent_mib, reserve_mib;
    bool covers;
  };
  const Case cases[] = {
      {"no members", {}, 0, 0, false},
      // 1024 promised, 400 resident: 624 lent; one burst of 100 is the reserve.
      {"one member", {{1024 * kMiB, 400 * kMiB, 100 * kMiB}}, 624, 100, true},
      // Bursts add as if independent: sqrt(300^2 + 400^2) = 500, less than their sum.
      {"two bursts", {{1024 * kMiB, 524 * kMiB, 300 * kMiB}, {1024 * kMiB, 524 * kMiB, 400 * kMiB}},
       1000, 500, true},
      {"lent short of the reserve", {{1024 * kMiB, 1000 * kMiB, 100 * kMiB}}, 24, 100, false},
      // RSS above the balloon (QEMU's own memory) lends nothing, and takes nothing from the rest.
      {"rss over commitment", {{1024 * kMiB, 1100 * kMiB, 0}, {1024 * kMiB, 824 * kMiB, 0}}, 200, 0, true},
      // Nothing lent and no burst: a pool of nothing covers nothing it needs to.
      {"all resident, no burst", {{1024 * kMiB, 1024 * kMiB, 0}}, 0, 0, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ReclaimPool p = SizePool(c.members);
    EXPECT_EQ(p.members, static_cast<int>(c.members.size()));
    EXPECT_NEAR(p.lent / kMiB, c.lent_mib, 1e-6);
    EXPECT_NEAR(p.reserve / kMiB, c.reserve_mib, 1e-6);
    EXPECT_EQ(p.covers, c.covers);
  }
}

TEST(ReclaimPoolTest, MembershipNeedsEveryCondition) {
  HostView host;
  host.in_guest_reclaim = true;
  GuestView g;
  g.max_bytes = int64_t{1024} << 20;
  g.free_page_reporting = true;
  g.host_rss_bytes = 400 << 20;
  g.agent_reclaims = true;
  g.anon_bytes = 100 << 20;
  g.active_file_bytes = 50 << 20;
  EXPECT_TRUE(ReclaimsInGuest(g, host));
  struct Drop {
    const char* name;
    void (*drop)(GuestView*, HostView*);
  };
  const Drop drops[] = {
      {"host sends no bounds", [](GuestView*, HostView* h) { h->in_guest_reclaim = false; }},
      {"reporting off", [](GuestView* v, HostView*) { v->free_page_reporting = false; }},
      {"reporting unknown", [](GuestView* v, HostView*) { v->free_page_reporting.reset(); }},
      {"no rss", [](GuestView* v, HostView*) { v->host_rss_bytes.reset(); }},
      {"rss 0", [](GuestView* v, HostView*) { v->host_rss_bytes = 0; }},
      {"rss over twice the ceiling", [](GuestView* v, HostView*) { v->host_rss_bytes = int64_t{2049} << 20; }},
      {"reclaimer unable", [](GuestView* v, HostView*) { v->agent_reclaims = false; }},
      {"no reclaimer", [](GuestView* v, HostView*) { v->agent_reclaims.reset(); }},
      {"no agent figures", [](GuestView* v, HostView*) { v->active_file_bytes.reset(); }},
  };
  for (const Drop& d : drops) {
    SCOPED_TRACE(d.name);
    GuestView v = g;
    HostView h = host;
    d.drop(&v, &h);
    EXPECT_FALSE(ReclaimsInGuest(v, h));
  }
  // Costed by RSS on host facts alone: the agent's word changes only whether it reclaims.
  EXPECT_TRUE(CostedByRss(g, host));
  GuestView no_agent = g;
  no_agent.agent_reclaims.reset();
  no_agent.anon_bytes.reset();
  no_agent.active_file_bytes.reset();
  EXPECT_TRUE(CostedByRss(no_agent, host));
  for (int i = 0; i < 6; ++i) {  // the first six drops are host facts
    SCOPED_TRACE(drops[i].name);
    GuestView v = g;
    HostView h = host;
    drops[i].drop(&v, &h);
    EXPECT_FALSE(CostedByRss(v, h));
  }
}

TEST(ReclaimPoolTest, SummaryNamesTheFigures) {
  EXPECT_EQ(ReclaimPoolSummary(SizePool({})), "");
  EXPECT_EQ(ReclaimPoolSummary(SizePool({{1024 * kMiB, 400 * kMiB, 100 * kMiB}})),
            "pool members=1 lent=624MiB reserve=100MiB covers=1");
}

}  // namespace
}  // namespace plimsoll::policy
