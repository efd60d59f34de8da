#include "policy/reason_format.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace plimsoll::policy {
namespace {

TEST(ReasonFormatTest, Fixed) {
  EXPECT_EQ(FormatFixed(0.123, 2), "0.12");
  EXPECT_EQ(FormatFixed(12.345, 1), "12.3");
  EXPECT_EQ(FormatFixed(-0.007, 2), "-0.01");
}

}  // namespace
}  // namespace plimsoll::policy
