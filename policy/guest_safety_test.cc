#include "policy/guest_safety.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;

GuestView Healthy() {
  GuestView guest;
  guest.uuid = "u";
  guest.actual_bytes = 4096 * kMib;
  guest.target_bytes = 4096 * kMib;
  guest.max_bytes = 8192 * kMib;
  guest.min_bytes = 1024 * kMib;
  guest.has_stats = true;
  guest.stats_fresh = true;
  guest.stats_age_seconds = 3;
  guest.unused_bytes = 100 * kMib;
  return guest;
}

TEST(GuestSafetyTest, UnsafeToActReasons) {
  EXPECT_EQ(UnsafeToActReason(Healthy()), std::nullopt);

  GuestView no_stats = Healthy();
  no_stats.has_stats = false;
  EXPECT_EQ(UnsafeToActReason(no_stats), "has_stats=false");

  GuestView stale = Healthy();
  stale.stats_fresh = false;
  stale.stats_age_seconds = 42;
  EXPECT_EQ(UnsafeToActReason(stale), "stats_fresh=false stats_age_s=42.0");

  GuestView no_unused = Healthy();
  no_unused.unused_bytes.reset();
  EXPECT_EQ(UnsafeToActReason(no_unused), "unused=missing");

  GuestView no_actual = Healthy();
  no_actual.actual_bytes = 0;
  EXPECT_EQ(UnsafeToActReason(no_actual), "actual_bytes=0");

  GuestView no_max = Healthy();
  no_max.max_bytes = -1;
  EXPECT_EQ(UnsafeToActReason(no_max), "max_bytes=-1");
}

TEST(GuestSafetyTest, Floor) {
  GuestView guest = Healthy();
  EXPECT_EQ(FloorBytes(guest), 1024 * kMib);
  guest.min_bytes = -7;
  EXPECT_EQ(FloorBytes(guest), 0);
  guest.min_bytes = 9000 * kMib;  // above max: the ceiling wins
  EXPECT_EQ(FloorBytes(guest), 8192 * kMib);
  guest.max_bytes = 0;  // unknown max: min as is
  EXPECT_EQ(FloorBytes(guest), 9000 * kMib);
}

TEST(GuestSafetyTest, SeenFloorIsHardDemandPlusHeadroom) {
  struct Case {
    const char* name;
    int64_t actual_mib, max_mib;
    std::optional<int64_t> usable_mib;
    std::optional<int64_t> want_mib;
  };
  const Case cases[] = {
      // 1 GiB ceiling: the 128 MiB minimum headroom wins over 5% (51 MiB).
      {"small guest", 373, 1024, 100, 273 + 128},
      // 8 GiB ceiling: 5% (409.6 MiB) wins.
      {"large guest", 4096, 8192, 1024, 3072 + 409},
      {"usable above actual: no hard demand", 512, 1024, 600, 128},
      {"capped at the ceiling", 1024, 1024, 0, 1024},
      {"no MemAvailable", 512, 1024, std::nullopt, std::nullopt},
      {"no actual", 0, 1024, 100, std::nullopt},
  };
  for (const Case& c : cases) {
    GuestView g = Healthy();
    g.actual_bytes = c.actual_mib * kMib;
    g.max_bytes = c.max_mib * kMib;
    g.usable_bytes.reset();
    if (c.usable_mib) {
      g.usable_bytes = *c.usable_mib * kMib;
    }
    const std::optional<int64_t> got = SeenFloorBytes(g);
    ASSERT_EQ(got.has_value(), c.want_mib.has_value()) << c.name;
    if (c.want_mib) {
      EXPECT_EQ(*got / kMib, *c.want_mib) << c.name;
    }
  }
  // Stale stats still count: the floor only ever raises a target.
  GuestView stale = Healthy();
  stale.stats_fresh = false;
  stale.usable_bytes = 1000 * kMib;
  EXPECT_EQ(SeenFloorBytes(stale), 4096 * kMib - 1000 * kMib + static_cast<int64_t>(0.05 * 8192 * kMib));
}

TEST(GuestSafetyTest, ClampTarget) {
  const GuestView guest = Healthy();
  EXPECT_EQ(ClampTarget(guest, 2000.4 * kMib), std::llround(2000.4 * kMib));
  EXPECT_EQ(ClampTarget(guest, 10.0), 1024 * kMib);
  EXPECT_EQ(ClampTarget(guest, 1e30), 8192 * kMib);
  EXPECT_EQ(ClampTarget(guest, -1e30), 1024 * kMib);
  EXPECT_EQ(ClampTarget(guest, std::nan("")), 1024 * kMib);
  EXPECT_EQ(ClampTarget(guest, std::numeric_limits<double>::infinity()), 8192 * kMib);
  GuestView huge = Healthy();
  huge.max_bytes = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ClampTarget(huge, 1e19), std::numeric_limits<int64_t>::max());
}

TEST(GuestSafetyTest, HoldNeverLowersAndRaisesToFloor) {
  GuestView guest = Healthy();
  guest.target_bytes = 3000 * kMib;
  GuestDecision hold = HoldDecision(guest, "x: hold why");
  EXPECT_EQ(hold.uuid, "u");
  EXPECT_EQ(hold.target_bytes, 3000 * kMib);
  EXPECT_EQ(hold.reason, "x: hold why target=3000MiB");

  guest.target_bytes = 9000 * kMib;  // above max: a hold does not touch it
  EXPECT_EQ(HoldDecision(guest, "h").target_bytes, 9000 * kMib);

  guest.target_bytes = 512 * kMib;
  hold = HoldDecision(guest, "h");
  EXPECT_EQ(hold.target_bytes, 1024 * kMib);
  EXPECT_EQ(hold.reason, "h target=512MiB raised_to_min=1024MiB");
}

}  // namespace
}  // namespace plimsoll::policy
