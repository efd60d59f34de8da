// GuestTracker::Reconcile keeps the tracked set equal to libvirt's list and the
// by-name order current, without rebuilding either on the usual tick.
#include "server/loop/guest_tracker.h"

#include <optional>
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
  GuestRules rules;
  rules.absent_listings = 1;  // forgotten at the first listing without it
  GuestTracker t(rules);
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

// A listing in another order, or with a guest added in the middle, finds every known guest
// (Reconcile first checks each domain's position in the last listing) and keeps what it knew.
TEST(GuestTrackerTest, ReconcileFindsKnownGuestsWhateverTheListingOrder) {
  GuestTracker t(GuestRules{});
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1"), Domain("b", "u2"), Domain("c", "u3")}, now);
  t.Find("u1")->target_bytes = 500 * kMiB;
  t.Find("u3")->target_bytes = 700 * kMiB;
  auto r = t.Reconcile({Domain("c", "u3", 2048), Domain("b", "u2"), Domain("a", "u1")}, now);
  EXPECT_TRUE(r.added.empty());
  EXPECT_TRUE(r.max_changed);
  EXPECT_EQ(t.Find("u3")->info.max_bytes, 2048 * kMiB);
  r = t.Reconcile({Domain("c", "u3", 2048), Domain("new", "u4"), Domain("b", "u2"), Domain("a2", "u1")}, now);
  EXPECT_EQ(r.added, std::vector<std::string>{"u4"});
  EXPECT_FALSE(r.max_changed);
  EXPECT_EQ(Names(t), (std::vector<std::string>{"a2", "b", "c", "new"}));
  // The same listing again, now on the fast path: a rename and a size still land.
  r = t.Reconcile({Domain("c", "u3", 4096), Domain("new", "u4"), Domain("b", "u2"), Domain("0", "u1")}, now);
  EXPECT_TRUE(r.added.empty());
  EXPECT_TRUE(r.max_changed);
  EXPECT_EQ(Names(t), (std::vector<std::string>{"0", "b", "c", "new"}));
  EXPECT_EQ(t.Find("u1")->target_bytes, 500 * kMiB);
  EXPECT_EQ(t.Find("u3")->target_bytes, 700 * kMiB);
  EXPECT_EQ(t.Find("u3")->info.max_bytes, 4096 * kMiB);
  EXPECT_EQ(t.guests().size(), 4u);
}

// One listing without a guest (a transient per-domain libvirt error) does not
// erase it; absent_listings in a row, or a stop event, do.
TEST(GuestTrackerTest, AGuestLeavesAfterNListingsWithoutItOrAStopEvent) {
  GuestTracker t(GuestRules{});  // absent_listings = 3
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1"), Domain("b", "u2"), Domain("c", "u3")}, now);
  t.Find("u1")->target_bytes = 700 * kMiB;  // what the daemon knows of it
  auto r = t.Reconcile({Domain("b", "u2"), Domain("c", "u3")}, now);
  EXPECT_TRUE(r.removed.empty());
  ASSERT_NE(t.Find("u1"), nullptr);
  EXPECT_EQ(t.Find("u1")->missed_listings, 1);
  r = t.Reconcile({Domain("b", "u2"), Domain("c", "u3")}, now);
  EXPECT_TRUE(r.removed.empty());
  // Listed again: nothing was lost, the count starts over.
  r = t.Reconcile({Domain("a", "u1"), Domain("b", "u2"), Domain("c", "u3")}, now);
  EXPECT_TRUE(r.added.empty());
  EXPECT_EQ(t.Find("u1")->missed_listings, 0);
  EXPECT_EQ(t.Find("u1")->target_bytes, 700 * kMiB);
  // Three listings in a row without it: gone.
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(t.Reconcile({Domain("b", "u2"), Domain("c", "u3")}, now).removed.empty());
  r = t.Reconcile({Domain("b", "u2"), Domain("c", "u3")}, now);
  EXPECT_EQ(r.removed, std::vector<std::string>{"u1"});
  // A stop event: gone at the first listing without it; a stop hint for a listed guest is
  // nothing (it was started again).
  r = t.Reconcile({Domain("c", "u3")}, now, {"u2", "u3"});
  EXPECT_EQ(r.removed, std::vector<std::string>{"u2"});
  EXPECT_NE(t.Find("u3"), nullptr);
}

// A full record, as a guest's balloon driver reports it.
hypervisor::BalloonStats Full(int64_t actual_mib, int64_t last_update) {
  hypervisor::BalloonStats s;
  s.actual_bytes = actual_mib * kMiB;
  s.unused_bytes = 50 * kMiB;
  s.usable_bytes = 300 * kMiB;
  s.available_bytes = actual_mib * kMiB;
  s.disk_caches_bytes = 200 * kMiB;
  s.major_fault = 7;
  s.last_update = last_update;
  return s;
}

// What the bulk call's NOWAIT fallback gives for a domain busy with another job: its size only.
hypervisor::BalloonStats Partial(int64_t actual_mib) {
  hypervisor::BalloonStats s;
  s.actual_bytes = actual_mib * kMiB;
  return s;
}

// A partial record used to replace the whole record, dropping last_update and the guest's own
// numbers: a briefly busy domain looked stat-less (and, after no_balloon_after, balloon-less).
TEST(GuestTrackerTest, APartialRecordMergesIntoTheLastFullOneAndAgesByItsLastUpdate) {
  GuestRules rules;
  rules.stale_after = absl::Seconds(10);
  rules.no_balloon_after = absl::Seconds(6);
  GuestTracker t(rules);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1")}, now);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now);
  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);  // last_update advanced: fresh
  const TrackedGuest& g = *t.Find("u1");
  ASSERT_TRUE(g.stats_fresh);

  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Partial(900)}}, now);
  EXPECT_TRUE(g.has_stats);
  EXPECT_TRUE(g.stats_fresh) << "2 s since last_update advanced: still fresh";
  EXPECT_EQ(g.actual_bytes, 900 * kMiB) << "what the partial record carries is taken";
  EXPECT_EQ(g.stats.actual_bytes, 900 * kMiB);
  EXPECT_EQ(g.stats.usable_bytes, 300 * kMiB) << "the rest is the last full record";
  EXPECT_EQ(g.stats.disk_caches_bytes, 200 * kMiB);
  EXPECT_EQ(g.stats.last_update, 101);
  EXPECT_EQ(g.management, plimsoll::v1::MANAGEMENT_STATE_MANAGED);

  // Still busy: freshness is judged by last_update as ever, so the stats go stale in time,
  // but the guest never looks as if it had no balloon.
  for (int i = 0; i < 5; ++i) {
    now += absl::Seconds(2);
    t.UpdateStats({{"u1", Partial(900)}}, now);
  }
  EXPECT_TRUE(g.has_stats);
  EXPECT_FALSE(g.stats_fresh);
  EXPECT_DOUBLE_EQ(g.stats_age_seconds, 12);
  EXPECT_EQ(g.management, plimsoll::v1::MANAGEMENT_STATE_STALE_STATS);

  // A full record again replaces everything, fields it lacks included.
  hypervisor::BalloonStats next = Full(950, 102);
  next.disk_caches_bytes.reset();
  now += absl::Seconds(2);
  t.UpdateStats({{"u1", next}}, now);
  EXPECT_TRUE(g.stats_fresh);
  EXPECT_FALSE(g.stats.disk_caches_bytes.has_value());
  EXPECT_EQ(g.actual_bytes, 950 * kMiB);
}

// After libvirt's answers were lost, each guest's stats must be seen to change again, and until
// they are their age counts from the loss, not from when the guest was first seen: a reconnect
// must not make every guest look long unseen.
TEST(GuestTrackerTest, AfterALossStatsAreUnprovenAndAgeFromTheLoss) {
  GuestRules rules;
  rules.stale_after = absl::Seconds(10);
  GuestTracker t(rules);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1")}, now);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now);
  EXPECT_FALSE(t.Find("u1")->stats_fresh) << "a first value proves nothing";
  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  ASSERT_TRUE(t.Find("u1")->stats_fresh);

  now += absl::Minutes(10);
  t.MarkAllStale(now);
  EXPECT_FALSE(t.Find("u1")->stats_fresh);
  now += absl::Seconds(3);
  t.UpdateStats({{"u1", Full(1024, 700)}}, now);
  const TrackedGuest& g = *t.Find("u1");
  EXPECT_FALSE(g.stats_fresh) << "the first value after the loss proves nothing";
  EXPECT_DOUBLE_EQ(g.stats_age_seconds, 3) << "3 s since the loss, not 10 min since first seen";
  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Full(1024, 702)}}, now);
  EXPECT_TRUE(g.stats_fresh);
  EXPECT_DOUBLE_EQ(g.stats_age_seconds, 0);
}

// How long the host has watched a guest's stats stand still: from their last change, but not
// across the times the host could not ask the guest (a failed call, a busy domain's partial
// record, a paused domain).
TEST(GuestTrackerTest, StatsStandStillOnlyWhileTheHostCanAskTheGuest) {
  GuestRules rules;
  rules.stale_after = absl::Seconds(10);
  GuestTracker t(rules);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  hypervisor::DomainInfo d = Domain("a", "u1");
  t.Reconcile({d}, now);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now);
  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  const TrackedGuest& g = *t.Find("u1");
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 0);
  now += absl::Seconds(30);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 30) << "the guest's stats stood still while asked";
  EXPECT_DOUBLE_EQ(g.stats_age_seconds, 30);

  now += absl::Seconds(30);
  t.UpdateStats({{"u1", Partial(1024)}}, now);  // busy with a job
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 0);
  EXPECT_DOUBLE_EQ(g.stats_age_seconds, 60) << "the stats themselves are as old as ever";
  now += absl::Seconds(5);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 5);

  now += absl::Seconds(5);
  t.UpdateStats({}, now);  // the stats call failed
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 0);

  d.state = hypervisor::DomainRunState::kPaused;
  for (int i = 0; i < 10; ++i) {
    now += absl::Seconds(10);
    t.Reconcile({d}, now);
    t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  }
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 0) << "paused: its stats stand still because it does";
  d.state = hypervisor::DomainRunState::kRunning;
  now += absl::Seconds(1);
  t.Reconcile({d}, now);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  EXPECT_DOUBLE_EQ(g.stats_still_seconds, 1) << "resumed: watched from the last paused tick";
}

TEST(GuestTrackerTest, APartialRecordWithoutAFullOneIsNoStats) {
  GuestRules rules;
  GuestTracker t(rules);
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1")}, now);
  t.UpdateStats({{"u1", Partial(700)}}, now);
  EXPECT_FALSE(t.Find("u1")->has_stats);
  EXPECT_EQ(t.Find("u1")->actual_bytes, 700 * kMiB);
}

// A full record of a 1 GiB guest whose disks were read: `bytes` and `requests` so far.
hypervisor::BalloonStats FullWithReads(uint64_t bytes, uint64_t requests) {
  hypervisor::BalloonStats full = Full(1024, 100);
  full.disk_read_bytes = bytes;
  full.disk_read_requests = requests;
  return full;
}

// Disk reads are the host's count at a call that read them, full record or partial. A full
// record without them is a guest without disks now; a partial one (a busy domain) keeps the
// last count with its time, so its rate is taken between the reads' own times.
TEST(GuestTrackerTest, DiskReadsAreTheLatestRecordsAndReachTheView) {
  GuestRules rules;
  GuestTracker t(rules);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1")}, now);
  t.UpdateStats({{"u1", FullWithReads(5000, 3)}}, now);
  ASSERT_EQ(t.Views().size(), 1u);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 5000u);
  EXPECT_EQ(t.Views()[0].disk_read_requests, 3u);

  now += absl::Seconds(1);
  hypervisor::BalloonStats partial = Partial(1000);
  partial.disk_read_bytes = 9000;
  t.UpdateStats({{"u1", partial}}, now);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 9000u) << "a partial record's count is taken";
  EXPECT_FALSE(t.Views()[0].disk_read_requests.has_value());
  EXPECT_EQ(t.Views()[0].usable_bytes, 300 * kMiB) << "the guest's own numbers are kept";

  now += absl::Seconds(1);
  t.UpdateStats({{"u1", Partial(1000)}}, now);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 9000u) << "a busy domain's disks did not go away";
  EXPECT_EQ(t.Views()[0].disk_read_age_seconds, 1);

  now += absl::Seconds(1);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now);
  EXPECT_FALSE(t.Views()[0].disk_read_bytes.has_value()) << "read, and none: none";
}

// A survey that did not read the disks (block_stats_interval) leaves every guest's last reads
// in place, full record or partial, with the time they were read: their age grows until the
// next read replaces them.
TEST(GuestTrackerTest, DiskReadsStandBetweenReadsWithTheirAge) {
  GuestRules rules;
  GuestTracker t(rules);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1")}, now);
  t.UpdateStats({{"u1", FullWithReads(5000, 3)}}, now, /*disk_reads_read=*/true);
  EXPECT_EQ(t.Views()[0].disk_read_age_seconds, 0);

  now += absl::Seconds(2);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now, /*disk_reads_read=*/false);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 5000u) << "kept: this survey did not read the disks";
  EXPECT_EQ(t.Views()[0].disk_read_requests, 3u);
  EXPECT_EQ(t.Views()[0].disk_read_age_seconds, 2);

  now += absl::Seconds(1);
  t.UpdateStats({{"u1", Partial(1000)}}, now, /*disk_reads_read=*/false);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 5000u) << "a partial record keeps them too";
  EXPECT_EQ(t.Views()[0].disk_read_age_seconds, 3);

  now += absl::Seconds(2);
  hypervisor::BalloonStats next = Full(1024, 100);
  next.disk_read_bytes = 8000;
  t.UpdateStats({{"u1", next}}, now, /*disk_reads_read=*/true);
  EXPECT_EQ(t.Views()[0].disk_read_bytes, 8000u);
  EXPECT_FALSE(t.Views()[0].disk_read_requests.has_value()) << "a read replaces them outright";
  EXPECT_EQ(t.Views()[0].disk_read_age_seconds, 0);

  now += absl::Seconds(1);
  t.UpdateStats({{"u1", Full(1024, 100)}}, now, /*disk_reads_read=*/true);
  EXPECT_FALSE(t.Views()[0].disk_read_bytes.has_value()) << "read, and none: none";
  EXPECT_FALSE(t.Views()[0].disk_read_age_seconds.has_value());
}

// The history the policy reads is derived from the targets the loop set and what libvirt
// reported, tick after tick: an adopted guest landed long ago, a new target travels until the
// balloon is within the landing tolerance.
TEST(GuestTrackerTest, HistoriesFollowTheTargetsSetAndTheBalloon) {
  GuestTracker t(GuestRules{});
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  t.Reconcile({Domain("a", "u1", 2048)}, now);
  auto nothing_more = [](policy::GuestView&) {};
  std::vector<policy::GuestView> views = t.DerivedViews(now, nothing_more);
  ASSERT_TRUE(views[0].history.has_value());
  ASSERT_TRUE(views[0].history->landed_s.has_value());
  EXPECT_LT(*views[0].history->landed_s, 0);  // long ago

  t.Find("u1")->target_bytes = 1024 * kMiB;  // a call set it
  now += absl::Seconds(5);
  views = t.DerivedViews(now, nothing_more);
  EXPECT_FALSE(views[0].history->landed_s.has_value());

  t.Find("u1")->actual_bytes = 1030 * kMiB;
  now += absl::Seconds(5);
  views = t.DerivedViews(now, nothing_more);
  ASSERT_TRUE(views[0].history->landed_s.has_value());
  EXPECT_EQ(*views[0].history->landed_s, absl::ToDoubleSeconds(now - absl::UnixEpoch()));
}

// The snapshot's one pass gives Views() with each guest's history (policy::DeriveHistory on its
// memory), in ByName()'s order, with each view completed before its history is derived, and
// AtByName() finds its guest.
TEST(GuestTrackerTest, DerivedViewsAreTheViewsWithTheirHistories) {
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  GuestTracker a(GuestRules{});
  GuestTracker b(GuestRules{});
  for (GuestTracker* t : {&a, &b}) {
    t->Reconcile({Domain("b", "u2", 2048), Domain("a", "u1")}, now);
    t->Find("u2")->target_bytes = 1024 * kMiB;  // a call set it: travelling, not landed
  }
  now += absl::Seconds(5);
  std::vector<policy::GuestView> expected = a.Views();
  for (policy::GuestView& v : expected) {
    v.history = policy::DeriveHistory(v, absl::ToDoubleSeconds(now - absl::UnixEpoch()), &a.Find(v.uuid)->history);
  }
  std::vector<std::string> completed;
  std::vector<policy::GuestView> got = b.DerivedViews(now, [&](policy::GuestView& v) {
    EXPECT_FALSE(v.history.has_value());  // completed before its history is derived
    completed.push_back(v.uuid);
  });
  EXPECT_EQ(completed, (std::vector<std::string>{"u1", "u2"}));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].uuid, expected[i].uuid);
    EXPECT_EQ(got[i].target_bytes, expected[i].target_bytes);
    ASSERT_TRUE(got[i].history.has_value());
    ASSERT_TRUE(expected[i].history.has_value());
    EXPECT_EQ(got[i].history->landed_s, expected[i].history->landed_s);
    EXPECT_EQ(b.AtByName(i)->info.uuid, got[i].uuid);
  }
  EXPECT_FALSE(got[1].history->landed_s.has_value());
}

// What a guest costs the host reaches the policy's view: QEMU's RSS from the stats (a busy
// domain's partial record keeps the last), free page reporting from the latest listing.
TEST(GuestTrackerTest, WhatAGuestCostsTheHostReachesTheView) {
  GuestTracker t(GuestRules{});
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  hypervisor::DomainInfo reporting = Domain("a", "u1");
  reporting.free_page_reporting = true;
  hypervisor::DomainInfo unknown = Domain("b", "u2");
  t.Reconcile({reporting, unknown}, now);
  hypervisor::BalloonStats with_rss = Full(1024, 100);
  with_rss.rss_bytes = 621 * kMiB;
  t.UpdateStats({{"u1", with_rss}, {"u2", Full(1024, 100)}}, now);
  std::vector<policy::GuestView> views = t.Views();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].host_rss_bytes, 621 * kMiB);
  EXPECT_EQ(views[0].free_page_reporting, std::optional<bool>(true));
  EXPECT_FALSE(views[1].host_rss_bytes.has_value()) << "not reported: absent, never 0";
  EXPECT_FALSE(views[1].free_page_reporting.has_value()) << "not known: absent, never off";

  now += absl::Seconds(1);
  reporting.free_page_reporting = false;  // restarted with reporting off
  t.Reconcile({reporting, unknown}, now);
  t.UpdateStats({{"u1", Partial(1024)}}, now);
  views = t.Views();
  EXPECT_EQ(views[0].free_page_reporting, std::optional<bool>(false));
  EXPECT_EQ(views[0].host_rss_bytes, 621 * kMiB) << "a busy domain's partial record keeps the last RSS";

  now += absl::Seconds(1);
  t.UpdateStats({{"u1", Full(1024, 101)}}, now);
  EXPECT_FALSE(t.Views()[0].host_rss_bytes.has_value()) << "a full record without it: none";
}

}  // namespace
}  // namespace plimsoll::server
