#include "server/events/watch_hub.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using Result = WatchSubscription::Result;

v1::WatchEvent Decision(const std::string& name, v1::Direction d) {
  v1::WatchEvent e;
  e.mutable_decision()->set_guest_name(name);
  e.mutable_decision()->set_guest_uuid(name + "-uuid");
  e.mutable_decision()->mutable_decision()->set_direction(d);
  return e;
}

v1::WatchEvent GuestChange(const std::string& name) {
  v1::WatchEvent e;
  e.mutable_guest()->set_change(v1::GuestEvent::CHANGE_CHANGED);
  e.mutable_guest()->mutable_guest()->set_name(name);
  e.mutable_guest()->mutable_guest()->set_uuid("aaaaaaaa-0000-0000-0000-00000000000a");
  return e;
}

TEST(WatchFilterTest, Table) {
  v1::WatchEvent host;
  host.mutable_host_policy()->mutable_policy()->set_paused(true);
  v1::WatchEvent dropped;
  dropped.mutable_dropped()->set_count(3);
  struct Row {
    WatchFilter filter;
    v1::WatchEvent event;
    bool pass;
  };
  const std::vector<Row> rows = {
      {{}, Decision("web", v1::DIRECTION_INFLATE), true},
      {{}, Decision("web", v1::DIRECTION_DEFLATE), true},
      {{}, Decision("web", v1::DIRECTION_HOLD), false},  // holds are opt-in
      {{{}, {}, true}, Decision("web", v1::DIRECTION_HOLD), true},
      {{{"db"}, {}, false}, Decision("web", v1::DIRECTION_INFLATE), false},
      {{{"web"}, {}, false}, Decision("web", v1::DIRECTION_INFLATE), true},
      {{{"web-uuid"}, {}, false}, Decision("web", v1::DIRECTION_INFLATE), true},
      {{{"AAAAAAAA-0000-0000-0000-00000000000A"}, {}, false}, GuestChange("x"), true},
      {{{}, {v1::WATCH_EVENT_KIND_GUEST}, false}, Decision("web", v1::DIRECTION_INFLATE), false},
      {{{}, {v1::WATCH_EVENT_KIND_GUEST}, false}, GuestChange("web"), true},
      {{{"db"}, {}, false}, host, true},  // host-wide events ignore the guest filter
      {{{}, {v1::WATCH_EVENT_KIND_DECISION}, false}, host, false},
      {{{"db"}, {v1::WATCH_EVENT_KIND_DECISION}, false}, dropped, true},  // bookkeeping always passes
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(WatchFilterMatches(rows[i].filter, rows[i].event), rows[i].pass) << "row " << i;
  }
}

TEST(WatchHubTest, DeliversInOrderWithSequenceAndTime) {
  FakeClock clock;
  WatchHub hub(&clock);
  auto sub = hub.Subscribe({});
  EXPECT_EQ(hub.subscribers(), 1);
  hub.Publish(Decision("a", v1::DIRECTION_INFLATE));
  hub.Publish(GuestChange("b"));
  v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), Result::kEvent);
  EXPECT_EQ(e.sequence(), 1u);
  EXPECT_EQ(e.unix_micros(), absl::ToUnixMicros(clock.Now()));
  EXPECT_EQ(e.decision().guest_name(), "a");
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), Result::kEvent);
  EXPECT_EQ(e.sequence(), 2u);
  EXPECT_EQ(sub->Next(&e, absl::Milliseconds(10)), Result::kTimeout);
  sub.reset();
  EXPECT_EQ(hub.subscribers(), 0);
}

TEST(WatchHubTest, FilteredEventsTakeNoQueueSpaceButConsumeSequence) {
  FakeClock clock;
  WatchHub hub(&clock, 2);
  auto sub = hub.Subscribe({{"web"}, {}, false});
  for (int i = 0; i < 10; ++i) hub.Publish(Decision("db", v1::DIRECTION_INFLATE));
  hub.Publish(Decision("web", v1::DIRECTION_INFLATE));
  v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), Result::kEvent);
  EXPECT_EQ(e.decision().guest_name(), "web");
  EXPECT_EQ(e.sequence(), 11u);
  EXPECT_EQ(sub->dropped(), 0u);
}

TEST(WatchHubTest, OverflowDropsOldestCountsAndReportsBeforeTheRest) {
  FakeClock clock;
  WatchHub hub(&clock, 3);
  auto slow = hub.Subscribe({});
  auto fast = hub.Subscribe({});
  v1::WatchEvent e;
  for (int i = 0; i < 5; ++i) {
    hub.Publish(GuestChange("g" + std::to_string(i)));
    ASSERT_EQ(fast->Next(&e, absl::Seconds(1)), Result::kEvent);  // keeps up: loses nothing
  }
  EXPECT_EQ(fast->dropped(), 0u);
  EXPECT_EQ(slow->dropped(), 2u);
  EXPECT_EQ(hub.dropped_total(), 2u);
  ASSERT_EQ(slow->Next(&e, absl::Seconds(1)), Result::kEvent);
  ASSERT_TRUE(e.has_dropped());
  EXPECT_EQ(e.dropped().count(), 2u);
  for (int i = 2; i < 5; ++i) {
    ASSERT_EQ(slow->Next(&e, absl::Seconds(1)), Result::kEvent);
    EXPECT_EQ(e.guest().guest().name(), "g" + std::to_string(i));
  }
  EXPECT_EQ(slow->Next(&e, absl::Milliseconds(1)), Result::kTimeout);
}

TEST(WatchHubTest, PublishNeverBlocksOnAReaderThatNeverReads) {
  FakeClock clock;
  WatchHub hub(&clock, 8);
  auto stuck = hub.Subscribe({});
  const absl::Time start = absl::Now();
  for (int i = 0; i < 100000; ++i) hub.Publish(GuestChange("g"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(stuck->dropped(), 100000u - 8u);
}

TEST(WatchHubTest, NextWakesOnPublishFromAnotherThreadAndOnClose) {
  FakeClock clock;
  WatchHub hub(&clock);
  auto sub = hub.Subscribe({});
  std::thread publisher([&] {
    absl::SleepFor(absl::Milliseconds(50));
    hub.Publish(GuestChange("late"));
    absl::SleepFor(absl::Milliseconds(50));
    hub.Close();
  });
  v1::WatchEvent e;
  EXPECT_EQ(sub->Next(&e, absl::Seconds(10)), Result::kEvent);
  EXPECT_EQ(e.guest().guest().name(), "late");
  const absl::Time before = absl::Now();
  EXPECT_EQ(sub->Next(&e, absl::Seconds(10)), Result::kClosed);
  EXPECT_LT(absl::Now() - before, absl::Seconds(5));
  publisher.join();
  // After close, new subscribers are closed at once.
  EXPECT_EQ(hub.Subscribe({})->Next(&e, absl::Seconds(10)), Result::kClosed);
}

TEST(WatchHubTest, SubscriptionMayOutliveTheHub) {
  auto clock = std::make_unique<FakeClock>();
  auto hub = std::make_unique<WatchHub>(clock.get());
  auto sub = hub->Subscribe({});
  hub.reset();
  v1::WatchEvent e;
  EXPECT_EQ(sub->Next(&e, absl::Milliseconds(1)), Result::kClosed);
  sub.reset();  // must not touch freed memory (run under ASan to prove it)
}

TEST(WatchHubTest, ManyPublishersAndReadersConcurrently) {
  FakeClock clock;
  WatchHub hub(&clock, 64);
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  std::atomic<uint64_t> seen{0};
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      auto sub = hub.Subscribe({});
      v1::WatchEvent e;
      while (!stop) {
        if (sub->Next(&e, absl::Milliseconds(5)) == Result::kEvent) ++seen;
      }
    });
  }
  std::vector<std::thread> publishers;
  for (int p = 0; p < 2; ++p) {
    publishers.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) hub.Publish(Decision("x", v1::DIRECTION_INFLATE));
    });
  }
  for (auto& t : publishers) t.join();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_GT(seen.load(), 0u);
}

}  // namespace
}  // namespace plimsoll::server
