#include "server/events/view_events.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "server/events/watch_hub.h"

namespace plimsoll::server {
namespace {

v1::ListGuestsResponse View(const std::string& text) {
  v1::ListGuestsResponse v;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &v)) << text;
  return v;
}

TEST(EventsBetweenTest, AppearedChangedDisappearedAndDecisions) {
  const auto a = View(R"(
    guests { name: "web" uuid: "u1" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_MANAGED last_decision { tick: 1 direction: DIRECTION_HOLD } }
    guests { name: "db" uuid: "u2" run_state: GUEST_RUN_STATE_RUNNING last_decision { tick: 1 } })");
  const auto first = EventsBetween(nullptr, a);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[0].guest().change(), v1::GuestEvent::CHANGE_APPEARED);
  EXPECT_EQ(first[1].decision().guest_name(), "web");

  const auto b = View(R"(
    guests { name: "web" uuid: "u1" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_STALE_STATS
             last_decision { tick: 2 direction: DIRECTION_INFLATE unix_micros: 77 } }
    guests { name: "new" uuid: "u3" })");
  const auto events = EventsBetween(&a, b);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].guest().change(), v1::GuestEvent::CHANGE_CHANGED);
  EXPECT_EQ(events[0].guest().detail(), "management_state MANAGED -> STALE_STATS");
  EXPECT_EQ(events[1].decision().decision().direction(), v1::DIRECTION_INFLATE);
  EXPECT_EQ(events[1].unix_micros(), 77);
  EXPECT_EQ(events[2].guest().change(), v1::GuestEvent::CHANGE_APPEARED);
  EXPECT_EQ(events[2].guest().guest().name(), "new");
  EXPECT_EQ(events[3].guest().change(), v1::GuestEvent::CHANGE_DISAPPEARED);
  EXPECT_EQ(events[3].guest().guest().name(), "db");

  // Same tick, only numbers moved: nothing to say.
  EXPECT_TRUE(EventsBetween(&b, b).empty());
}

// The same guests in the same order (paired by position) and in another order (paired by
// uuid) give the same events: an override set, one cleared, a new decision.
TEST(EventsBetweenTest, SameGuestsInAnyOrderArePairedByUuid) {
  const auto a = View(R"(
    guests { name: "a" uuid: "u1" override { exclude: true } last_decision { tick: 1 } }
    guests { name: "b" uuid: "u2" last_decision { tick: 1 } }
    guests { name: "c" uuid: "u3" last_decision { tick: 1 } })");
  const auto b = View(R"(
    guests { name: "a" uuid: "u1" last_decision { tick: 1 } }
    guests { name: "b" uuid: "u2" override { pin_bytes: 1 } last_decision { tick: 1 } }
    guests { name: "c" uuid: "u3" last_decision { tick: 2 } })");
  auto reversed = b;
  std::swap(*reversed.mutable_guests(0), *reversed.mutable_guests(2));
  for (const v1::ListGuestsResponse* next : {&b, static_cast<const v1::ListGuestsResponse*>(&reversed)}) {
    const auto events = EventsBetween(&a, *next);
    int changed = 0, decisions = 0;
    for (const auto& e : events) {
      if (e.has_guest()) {
        EXPECT_EQ(e.guest().change(), v1::GuestEvent::CHANGE_CHANGED);
        EXPECT_EQ(e.guest().detail(), "override");
        ++changed;
      }
      if (e.has_decision()) {
        EXPECT_EQ(e.decision().guest_uuid(), "u3");
        ++decisions;
      }
    }
    EXPECT_EQ(changed, 2);
    EXPECT_EQ(decisions, 1);
    EXPECT_EQ(events.size(), 3u);
  }
}

TEST(SnapshotEventsTest, OnePerGuestThenComplete) {
  const auto v = View(R"(guests { name: "a" } guests { name: "b" })");
  const auto events = SnapshotEvents(v);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].guest().change(), v1::GuestEvent::CHANGE_SNAPSHOT);
  EXPECT_EQ(events[2].snapshot_complete().guests(), 2);
}

TEST(EventsBetweenTest, TheHostLineWhenItsOfferOverLineOrStalenessChanges) {
  const auto first = View(R"(host_line { tick: 1 headroom_bytes: 100 offered_bytes: 0 computed_unix_micros: 5 })");
  const auto from_nothing = EventsBetween(nullptr, first);
  ASSERT_EQ(from_nothing.size(), 1u);
  EXPECT_EQ(from_nothing[0].host_line().tick(), 1);
  EXPECT_EQ(from_nothing[0].unix_micros(), 5);
  WatchFilter lines;
  lines.kinds = {v1::WATCH_EVENT_KIND_HOST_LINE};
  lines.guests = {"web"};  // host-wide: a guest filter does not hide it
  EXPECT_TRUE(WatchFilterMatches(lines, from_nothing[0]));
  WatchFilter decisions;
  decisions.kinds = {v1::WATCH_EVENT_KIND_DECISION};
  EXPECT_FALSE(WatchFilterMatches(decisions, from_nothing[0]));

  const auto headroom_only = View(R"(host_line { tick: 2 headroom_bytes: 90 offered_bytes: 0 })");
  EXPECT_TRUE(EventsBetween(&first, headroom_only).empty()) << "headroom alone is not an event";
  for (const char* text : {R"(host_line { tick: 2 headroom_bytes: 100 offered_bytes: 100 })",
                           R"(host_line { tick: 2 headroom_bytes: 100 over_line: true })",
                           R"(host_line { tick: 2 headroom_bytes: 100 stale: true stale_reason: "x" })"}) {
    const auto next = View(text);
    const auto events = EventsBetween(&first, next);
    ASSERT_EQ(events.size(), 1u) << text;
    EXPECT_TRUE(events[0].has_host_line()) << text;
  }
  const auto never_computed = View(R"(host_line { stale: true stale_reason: "no tick yet" })");
  EXPECT_TRUE(EventsBetween(nullptr, never_computed).empty()) << "the view before the first tick is no line yet";
}

TEST(SnapshotEventsTest, TheHostLineBeforeComplete) {
  const auto v = View(R"(guests { name: "a" } host_line { tick: 3 offered_bytes: 7 })");
  const auto events = SnapshotEvents(v);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].host_line().offered_bytes(), 7);
  EXPECT_TRUE(events[2].has_snapshot_complete());
}

}  // namespace
}  // namespace plimsoll::server
