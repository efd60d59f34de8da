#include "sim/units.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace plimsoll::sim {
namespace {

TEST(UnitsTest, Sizes) {
  EXPECT_EQ(*ParseBytes("4GiB"), 4 * kGib);
  EXPECT_EQ(*ParseBytes("1.5GiB"), 1.5 * kGib);
  EXPECT_EQ(*ParseBytes("512MiB"), 512 * kMib);
  EXPECT_EQ(*ParseBytes("64KiB"), 64 * kKib);
  EXPECT_EQ(*ParseBytes("4096"), 4096);
  EXPECT_EQ(*ParseBytes("0"), 0);
  EXPECT_EQ(*ParseBytes(" 2MiB "), 2 * kMib);
  EXPECT_EQ(ParseBytes("4GB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("-1MiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("MiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("nan").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnitsTest, RatesAndDurations) {
  EXPECT_EQ(*ParseRate("40MiB/s"), 40 * kMib);
  EXPECT_EQ(*ParseRate("40MiB"), 40 * kMib);
  EXPECT_EQ(*ParseSeconds("30s"), 30);
  EXPECT_EQ(*ParseSeconds("5m"), 300);
  EXPECT_EQ(*ParseSeconds("1h"), 3600);
  EXPECT_EQ(*ParseSeconds("250ms"), 0.25);
  EXPECT_EQ(*ParseSeconds("12"), 12);
  EXPECT_EQ(*ParseSeconds("1e3s"), 1000);
  EXPECT_EQ(ParseSeconds("5d").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnitsTest, Format) {
  EXPECT_EQ(FormatBytes(4 * kGib), "4GiB");
  EXPECT_EQ(FormatBytes(1.5 * kGib), "1.5GiB");
  EXPECT_EQ(FormatBytes(868.8 * kMib), "868.8MiB");
  EXPECT_EQ(FormatBytes(100), "100B");
  EXPECT_EQ(FormatBytes(0), "0B");
}

}  // namespace
}  // namespace plimsoll::sim
