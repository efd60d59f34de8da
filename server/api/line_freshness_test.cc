// LineAsOf: a line the loop stopped publishing is served stale, offering nothing.
#include "server/api/line_freshness.h"

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

plimsoll::v1::ListGuestsResponse ViewAt(absl::Time computed, double tick_seconds) {
  plimsoll::v1::ListGuestsResponse view;
  view.mutable_host()->set_tick_seconds(tick_seconds);
  plimsoll::v1::HostLine* line = view.mutable_host_line();
  line->set_tick(7);
  line->set_computed_unix_micros(absl::ToUnixMicros(computed));
  line->set_headroom_bytes(3 * kGiB);
  line->set_offered_bytes(2 * kGiB);
  line->set_explanation("capacity=..");
  return view;
}

TEST(LineFreshnessTest, MaxAgeIsThreeTicksAndAtLeastFifteenSeconds) {
  EXPECT_EQ(LineMaxAge(5), absl::Seconds(15));
  EXPECT_EQ(LineMaxAge(1), absl::Seconds(15));
  EXPECT_EQ(LineMaxAge(60), absl::Seconds(180));
}

TEST(LineFreshnessTest, AYoungLineIsServedAsPublished) {
  const absl::Time t = absl::FromUnixSeconds(1700000000);
  const plimsoll::v1::HostLine line = LineAsOf(ViewAt(t, 5), t + absl::Seconds(15));
  EXPECT_FALSE(line.stale());
  EXPECT_EQ(line.offered_bytes(), 2 * kGiB);
}

TEST(LineFreshnessTest, AnOldLineIsStaleAndOffersNothing) {
  const absl::Time t = absl::FromUnixSeconds(1700000000);
  const plimsoll::v1::HostLine line = LineAsOf(ViewAt(t, 5), t + absl::Seconds(42));
  EXPECT_TRUE(line.stale());
  EXPECT_EQ(line.offered_bytes(), 0);
  EXPECT_EQ(line.headroom_bytes(), 3 * kGiB) << "the figures stay, for the operator";
  EXPECT_EQ(line.stale_reason(), "the control loop has published nothing for 42.0s");
  EXPECT_EQ(line.explanation(), "stale: the control loop has published nothing for 42.0s; capacity=..");
}

TEST(LineFreshnessTest, TheLoopsOwnReasonIsKept) {
  const absl::Time t = absl::FromUnixSeconds(1700000000);
  plimsoll::v1::ListGuestsResponse view = ViewAt(t, 5);
  view.mutable_host_line()->set_stale(true);
  view.mutable_host_line()->set_stale_reason("libvirt is disconnected");
  EXPECT_EQ(LineAsOf(view, t + absl::Seconds(20)).stale_reason(),
            "the control loop has published nothing for 20.0s; libvirt is disconnected");
}

TEST(LineFreshnessTest, ALineNeverComputedIsLeftAsItIs) {
  plimsoll::v1::ListGuestsResponse view;
  view.mutable_host_line()->set_stale(true);
  view.mutable_host_line()->set_stale_reason("no tick yet");
  const plimsoll::v1::HostLine line = LineAsOf(view, absl::FromUnixSeconds(1700000000));
  EXPECT_EQ(line.stale_reason(), "no tick yet");
}

}  // namespace
}  // namespace plimsoll::server
