#include "agent/reclaim_bounds.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
const absl::Time kT0 = absl::FromUnixSeconds(1000);

v1::ReclaimBounds Bounds(uint64_t keep, uint64_t keep_file = 0) {
  v1::ReclaimBounds b;
  b.set_enabled(true);
  b.set_keep_bytes(keep);
  b.set_keep_file_bytes(keep_file);
  b.set_step_bytes(32 * kMiB);
  b.set_max_bytes_per_second(16 * kMiB);
  return b;
}

TEST(ReclaimBoundsTest, NoBoundsYet) {
  ReclaimBoundsKeeper k{ReclaimOwnLimits{}};
  ReclaimLimits l;
  EXPECT_EQ(k.Effective(kT0, &l), BoundsStatus::kNone);
  EXPECT_FALSE(l.enabled);
  // The agent's own file floor is in force even before the host says anything.
  EXPECT_EQ(l.keep_file_bytes, 64 * kMiB);
}

TEST(ReclaimBoundsTest, HostValuesWithinTheAgentsOwn) {
  ReclaimOwnLimits own;
  own.max_step_bytes = 16 * kMiB;
  own.max_bytes_per_second = 8.0 * kMiB;
  own.psi_stop_pct = 5;
  own.refault_stop_per_second = 1000;
  own.min_file_bytes = 100 * kMiB;
  ReclaimBoundsKeeper k{own};
  v1::ReclaimBounds b = Bounds(500 * kMiB, 50 * kMiB);
  b.set_step_bytes(1ull << 40);            // larger than the agent's own: the agent's
  b.set_max_bytes_per_second(1ull << 40);  // likewise
  b.set_psi_some_avg10_stop_pct(2);        // stricter: the host's
  b.set_refaults_per_second_stop(5000);    // looser: the agent's
  k.Update(b, kT0);
  ReclaimLimits l;
  ASSERT_EQ(k.Effective(kT0, &l), BoundsStatus::kLive);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.step_bytes, 16 * kMiB);
  EXPECT_EQ(l.max_bytes_per_second, 8.0 * kMiB);
  EXPECT_EQ(l.psi_stop_pct, 2);
  EXPECT_EQ(l.refault_stop_per_second, 1000);
  EXPECT_EQ(l.keep_bytes, 500 * kMiB);
  EXPECT_EQ(l.keep_file_bytes, 100 * kMiB);  // the agent's floor is above the host's keep

  // Smaller host values are taken as they are; unset stops are the agent's.
  b = Bounds(0, 200 * kMiB);
  b.set_step_bytes(4 * kMiB);
  b.set_max_bytes_per_second(kMiB);
  k.Update(b, kT0 + absl::Seconds(1));
  ASSERT_EQ(k.Effective(kT0 + absl::Seconds(1), &l), BoundsStatus::kLive);
  EXPECT_EQ(l.step_bytes, 4 * kMiB);
  EXPECT_EQ(l.max_bytes_per_second, 1.0 * kMiB);
  EXPECT_EQ(l.psi_stop_pct, 5);
  EXPECT_EQ(l.keep_file_bytes, 200 * kMiB);
}

TEST(ReclaimBoundsTest, AKeepHoldsForTheHoldWhateverComesLater) {
  ReclaimOwnLimits own;
  own.keep_hold = absl::Minutes(5);
  own.bounds_ttl = absl::Hours(1);
  ReclaimBoundsKeeper k{own};
  ReclaimLimits l;
  k.Update(Bounds(600 * kMiB, 300 * kMiB), kT0);
  // A minute later the host (or someone speaking for it) names far lower keeps.
  k.Update(Bounds(100 * kMiB, 0), kT0 + absl::Minutes(1));
  ASSERT_EQ(k.Effective(kT0 + absl::Minutes(1), &l), BoundsStatus::kLive);
  EXPECT_EQ(l.keep_bytes, 600 * kMiB);
  EXPECT_EQ(l.keep_file_bytes, 300 * kMiB);
  // Repeated every few seconds, the low keep still changes nothing within the hold.
  for (absl::Duration t = absl::Minutes(1); t < absl::Minutes(5); t += absl::Seconds(5)) {
    k.Update(Bounds(100 * kMiB, 0), kT0 + t);
    k.Effective(kT0 + t, &l);
    ASSERT_EQ(l.keep_bytes, 600 * kMiB) << t;
  }
  // Once the high keep is keep_hold old, the largest named since is in force.
  k.Effective(kT0 + absl::Minutes(5), &l);
  EXPECT_EQ(l.keep_bytes, 100 * kMiB);
  EXPECT_EQ(l.keep_file_bytes, 64 * kMiB);  // the agent's own floor
}

TEST(ReclaimBoundsTest, AHigherKeepAppliesAtOnce) {
  ReclaimBoundsKeeper k{ReclaimOwnLimits{}};
  ReclaimLimits l;
  k.Update(Bounds(100 * kMiB), kT0);
  k.Update(Bounds(700 * kMiB), kT0 + absl::Seconds(5));
  k.Effective(kT0 + absl::Seconds(5), &l);
  EXPECT_EQ(l.keep_bytes, 700 * kMiB);
}

TEST(ReclaimBoundsTest, BoundsExpireAfterTheTtl) {
  ReclaimOwnLimits own;
  own.bounds_ttl = absl::Seconds(20);
  ReclaimBoundsKeeper k{own};
  ReclaimLimits l;
  k.Update(Bounds(0), kT0);
  EXPECT_EQ(k.Effective(kT0 + absl::Seconds(20), &l), BoundsStatus::kLive);
  EXPECT_EQ(k.Effective(kT0 + absl::Seconds(21), &l), BoundsStatus::kExpired);
  EXPECT_FALSE(l.enabled);
  EXPECT_EQ(l.step_bytes, 0u);
  // Fresh bounds revive them.
  k.Update(Bounds(0), kT0 + absl::Seconds(30));
  EXPECT_EQ(k.Effective(kT0 + absl::Seconds(31), &l), BoundsStatus::kLive);
}

TEST(ReclaimBoundsTest, NonsenseStopsAreInvalidButTheirKeepsCount) {
  ReclaimBoundsKeeper k{ReclaimOwnLimits{}};
  ReclaimLimits l;
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    v1::ReclaimBounds b = Bounds(800 * kMiB);
    b.set_psi_some_avg10_stop_pct(bad);
    k.Update(b, kT0);
    EXPECT_EQ(k.Effective(kT0, &l), BoundsStatus::kInvalid) << bad;
    EXPECT_EQ(l.keep_bytes, 800 * kMiB);
    b = Bounds(800 * kMiB);
    b.set_refaults_per_second_stop(bad);
    k.Update(b, kT0);
    EXPECT_EQ(k.Effective(kT0, &l), BoundsStatus::kInvalid) << bad;
  }
  k.Update(Bounds(0), kT0 + absl::Seconds(1));
  EXPECT_EQ(k.Effective(kT0 + absl::Seconds(1), &l), BoundsStatus::kLive);
  EXPECT_EQ(l.keep_bytes, 800 * kMiB);  // held
}

TEST(ReclaimBoundsTest, WindowMaxKeepsAShortRun) {
  WindowMax w(absl::Seconds(10));
  EXPECT_EQ(w.Max(kT0), 0u);
  w.Record(5, kT0);
  w.Record(9, kT0 + absl::Seconds(1));
  w.Record(3, kT0 + absl::Seconds(2));
  EXPECT_EQ(w.Max(kT0 + absl::Seconds(2)), 9u);
  EXPECT_EQ(w.Max(kT0 + absl::Seconds(10.5)), 9u);
  EXPECT_EQ(w.Max(kT0 + absl::Seconds(11)), 3u);
  // The newest value holds however old it is.
  EXPECT_EQ(w.Max(kT0 + absl::Hours(1)), 3u);
}

TEST(ReclaimBoundsTest, WithoutAHoldTheNewestKeepStillApplies) {
  ReclaimOwnLimits own;
  own.keep_hold = absl::ZeroDuration();
  ReclaimBoundsKeeper k{own};
  ReclaimLimits l;
  k.Update(Bounds(900 * kMiB, 700 * kMiB), kT0);
  ASSERT_EQ(k.Effective(kT0 + absl::Seconds(1), &l), BoundsStatus::kLive);
  EXPECT_EQ(l.keep_bytes, 900 * kMiB);
  EXPECT_EQ(l.keep_file_bytes, 700 * kMiB);
  k.Update(Bounds(100 * kMiB, 0), kT0 + absl::Seconds(2));
  k.Effective(kT0 + absl::Seconds(2), &l);
  EXPECT_EQ(l.keep_bytes, 100 * kMiB);  // no hold: the lower keep at once
}

}  // namespace
}  // namespace plimsoll::agent
