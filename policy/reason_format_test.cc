#include "policy/reason_format.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;

TEST(ReasonFormatTest, Mib) {
  EXPECT_EQ(FormatMib(int64_t{1024} * kMib), "1024MiB");
  EXPECT_EQ(FormatMib(int64_t{0}), "0MiB");
  EXPECT_EQ(FormatMib(972.8 * kMib), "972.8MiB");
  EXPECT_EQ(FormatMib(1023.96 * kMib), "1024MiB");
  EXPECT_EQ(FormatMib(int64_t{-1024} * kMib), "-1024MiB");
  EXPECT_EQ(FormatMib(-0.5 * kMib), "-0.5MiB");
  EXPECT_EQ(FormatMib(int64_t{1}), "0MiB");
}

TEST(ReasonFormatTest, Fixed) {
  EXPECT_EQ(FormatFixed(0.123, 2), "0.12");
  EXPECT_EQ(FormatFixed(12.345, 1), "12.3");
  EXPECT_EQ(FormatFixed(-0.007, 2), "-0.01");
}

}  // namespace
}  // namespace plimsoll::policy
