#include "common/mib_format.h"

#include <cstdint>
#include <optional>

#include "gtest/gtest.h"

namespace plimsoll {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;

TEST(MibFormatTest, WholeAndTenths) {
  EXPECT_EQ(FormatMib(int64_t{1024} * kMib), "1024MiB");
  EXPECT_EQ(FormatMib(int64_t{0}), "0MiB");
  EXPECT_EQ(FormatMib(972.8 * kMib), "972.8MiB");
  EXPECT_EQ(FormatMib(1023.96 * kMib), "1024MiB");
  EXPECT_EQ(FormatMib(int64_t{-1024} * kMib), "-1024MiB");
  EXPECT_EQ(FormatMib(-0.5 * kMib), "-0.5MiB");
  EXPECT_EQ(FormatMib(-1234.5 * kMib), "-1234.5MiB");
  EXPECT_EQ(FormatMib(10.04 * kMib), "10MiB");
  EXPECT_EQ(FormatMib(1048576.2 * kMib), "1048576.2MiB");
  EXPECT_EQ(FormatMib(int64_t{1}), "0MiB");
}

TEST(MibFormatTest, AbsentIsADash) {
  EXPECT_EQ(FormatMib(std::optional<int64_t>()), "-");
  EXPECT_EQ(FormatMib(std::optional<int64_t>(int64_t{512} * kMib)), "512MiB");
}

}  // namespace
}  // namespace plimsoll
