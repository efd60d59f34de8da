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

TEST(UnitsTest, ExactFormsReadBackTheSame) {
  EXPECT_EQ(FormatExactBytes(4 * kGib), "4GiB");
  EXPECT_EQ(FormatExactBytes(1536 * kMib), "1536MiB");
  EXPECT_EQ(FormatExactBytes(2 * kGib * 1024), "2TiB");
  EXPECT_EQ(FormatExactBytes(4097), "4097");
  EXPECT_EQ(FormatExactBytes(0), "0");
  EXPECT_EQ(FormatExactBytes(0.5), "0.5");
  EXPECT_EQ(FormatExactSeconds(3600), "1h");
  EXPECT_EQ(FormatExactSeconds(600), "10m");
  EXPECT_EQ(FormatExactSeconds(90), "90s");
  EXPECT_EQ(FormatExactSeconds(0.25), "0.25s");
  EXPECT_EQ(FormatExactSeconds(0), "0s");
  for (double v : {0.0, 1.0, 4096.0, 1.5 * kGib, 123456789.0, 1e-5, 0.1, 1.0 / 3, 7e15,
                   64 * kGib + 1, 333.3 * kMib}) {
    EXPECT_EQ(*ParseBytes(FormatExactBytes(v)), v) << FormatExactBytes(v);
    EXPECT_EQ(*ParseRate(FormatExactBytes(v) + "/s"), v);
    EXPECT_EQ(*ParseSeconds(FormatExactSeconds(v)), v) << FormatExactSeconds(v);
  }
}

}  // namespace
}  // namespace plimsoll::sim
