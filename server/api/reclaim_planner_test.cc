#include "server/api/reclaim_planner.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMiB = 1LL << 20;

// A managed guest with fresh stats: target and usable in MiB.
std::string GuestText(const std::string& name, int target_mib, int usable_mib, int min_mib = 256,
                      const std::string& extra = "") {
  return absl::StrCat("guests { name: \"", name, "\" uuid: \"", name,
                      "-u\" run_state: GUEST_RUN_STATE_RUNNING management_state: MANAGEMENT_STATE_MANAGED ",
                      "max_bytes: ", 4096 * kMiB, " min_bytes: ", min_mib * kMiB, " target_bytes: ",
                      target_mib * kMiB, " stats { stats_fresh: true usable { bytes: ", usable_mib * kMiB,
                      " } disk_caches { bytes: ", usable_mib / 2 * kMiB, " } } ", extra, " }\n");
}

v1::ListGuestsResponse View(const std::string& text) {
  v1::ListGuestsResponse v;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &v)) << text;
  return v;
}

TEST(PlanReclaimTest, TakesFromTheGuestWithMostRoomFirstAndStopsWhenSatisfied) {
  const auto view = View(GuestText("a", 2048, 600) + GuestText("b", 2048, 1200));
  // margins: max(64, 5% of 2048 = 102.4) = 102 MiB
  const auto plan = PlanReclaim(view, 800 * kMiB);
  ASSERT_EQ(plan.items_size(), 1);
  EXPECT_EQ(plan.items(0).guest_name(), "b");
  EXPECT_EQ(plan.items(0).reclaim_bytes(), 800 * kMiB);
  EXPECT_EQ(plan.items(0).new_target_bytes(), 1248 * kMiB);
  EXPECT_THAT(plan.items(0).reason(), HasSubstr("usable=1200MiB cache=600MiB floor=256MiB"));
  EXPECT_EQ(plan.planned_bytes(), 800 * kMiB);
  EXPECT_THAT(plan.summary(), HasSubstr("take 800MiB from 1 guest"));
}

TEST(PlanReclaimTest, SpreadsAndFallsShortWithoutSqueezingIntoTheWorkingSet) {
  const auto view = View(GuestText("a", 2048, 600) + GuestText("b", 2048, 1200));
  const auto plan = PlanReclaim(view, 4096 * kMiB);
  ASSERT_EQ(plan.items_size(), 2);
  // b: 1200 - 102.4 -> 1097 MiB; a: 600 - 102.4 -> 497 MiB.
  EXPECT_EQ(plan.items(0).reclaim_bytes(), 1097 * kMiB);
  EXPECT_EQ(plan.items(1).reclaim_bytes(), 497 * kMiB);
  EXPECT_EQ(plan.planned_bytes(), 1594 * kMiB);
  EXPECT_THAT(plan.summary(), HasSubstr("short by 2502MiB"));
}

TEST(PlanReclaimTest, FloorsOverridesAndPriorities) {
  const auto view = View(GuestText("low", 1024, 900, 256, "override { priority: -10 min_bytes: 805306368 }") +
                         GuestText("big", 2048, 1500, 256, "override { shares: 10000 }") +
                         GuestText("mid", 2048, 1000));
  const auto plan = PlanReclaim(view, 1000 * kMiB);
  ASSERT_GE(plan.items_size(), 2);
  // Lowest priority gives first, but only down to its override floor (768 MiB).
  EXPECT_EQ(plan.items(0).guest_name(), "low");
  EXPECT_EQ(plan.items(0).new_target_bytes(), 768 * kMiB);
  EXPECT_THAT(plan.items(0).reason(), HasSubstr("floor=768MiB"));
  // Then the most room per share: mid (~897 MiB / 100) before big (~1397 MiB / 10000).
  EXPECT_EQ(plan.items(1).guest_name(), "mid");
}

TEST(PlanReclaimTest, SkipsWithReasons) {
  const std::string stale =
      "guests { name: \"stale\" run_state: GUEST_RUN_STATE_RUNNING management_state: "
      "MANAGEMENT_STATE_STALE_STATS target_bytes: 2147483648 stats { stats_age_seconds: 45 } }\n";
  const std::string off = "guests { name: \"off\" run_state: GUEST_RUN_STATE_SHUTOFF }\n";
  const auto view = View(GuestText("ex", 2048, 1500, 256, "override { exclude: true }") +
                         GuestText("pin", 2048, 1500, 256, "override { pin_bytes: 2147483648 }") +
                         GuestText("floor", 256, 200) + stale + off);
  const auto plan = PlanReclaim(view, 100 * kMiB);
  EXPECT_EQ(plan.items_size(), 0);
  ASSERT_EQ(plan.skipped_size(), 5);
  EXPECT_EQ(plan.skipped(0).reason(), "excluded by override");
  EXPECT_EQ(plan.skipped(1).reason(), "pinned at 2048MiB by override");
  EXPECT_THAT(plan.skipped(2).reason(), HasSubstr("at its floor"));
  EXPECT_THAT(plan.skipped(3).reason(), HasSubstr("stale stats (age 45s)"));
  EXPECT_THAT(plan.skipped(4).reason(), HasSubstr("not running"));
  EXPECT_THAT(plan.summary(), HasSubstr("short by 100MiB"));
}

}  // namespace
// With the policy's estimates, hot cache is not spare. Guest a: MemAvailable
// says 1200 MiB could go, but its working set (hard demand + hot cache + headroom) is 1800 of
// its 2048 MiB; b reports its policy floor above the configured one.
TEST(PlanReclaimTest, ThePolicysWorkingSetBoundsWhatAGuestCanSpare) {
  const auto view = View(
      GuestText("a", 2048, 1200, 256,
                absl::StrCat("last_decision { policy_floor_bytes: ", 700 * kMiB,
                             " working_set_bytes: ", 1800 * kMiB, " }")) +
      GuestText("b", 2048, 1200, 256,
                absl::StrCat("last_decision { policy_floor_bytes: ", 1900 * kMiB,
                             " working_set_bytes: ", 1000 * kMiB, " }")) +
      GuestText("c", 2048, 1200));  // no estimates (mom): MemAvailable minus the margin
  const auto plan = PlanReclaim(view, 4096 * kMiB);
  ASSERT_EQ(plan.items_size(), 3);
  EXPECT_EQ(plan.items(0).guest_name(), "c");
  EXPECT_EQ(plan.items(0).reclaim_bytes(), 1097 * kMiB);
  EXPECT_EQ(plan.items(1).guest_name(), "a");
  EXPECT_EQ(plan.items(1).reclaim_bytes(), 248 * kMiB);
  EXPECT_THAT(plan.items(1).reason(), HasSubstr("ws=1800MiB"));
  EXPECT_EQ(plan.items(2).guest_name(), "b");
  EXPECT_EQ(plan.items(2).reclaim_bytes(), 148 * kMiB);  // down to its policy floor
  EXPECT_THAT(plan.items(2).reason(), HasSubstr("floor=1900MiB"));
}

// The host's own floor (actual - MemAvailable + headroom) bounds a guest under a policy without
// estimates too: a hold planned below it would be released as soon as it landed.
TEST(PlanReclaimTest, TheSeenFloorBoundsWhatAGuestCanSpareWhateverThePolicy) {
  const auto view =
      View(GuestText("c", 2048, 1200, 256, absl::StrCat("last_decision { seen_floor_bytes: ", 1500 * kMiB, " }")));
  const auto plan = PlanReclaim(view, 4096 * kMiB);
  ASSERT_EQ(plan.items_size(), 1);
  EXPECT_EQ(plan.items(0).reclaim_bytes(), 548 * kMiB);  // 2048 - 1500, not MemAvailable's 1097
  EXPECT_THAT(plan.items(0).reason(), HasSubstr("floor=1500MiB"));
}

}  // namespace plimsoll::server
