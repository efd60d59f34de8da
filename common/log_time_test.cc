// A log line's time reads as absl::FormatTime would print it, whatever the second's cache holds.
#include "common/log_time.h"

#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace plimsoll {
namespace {

std::string Expected(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()); }

std::string Got(absl::Time t) {
  std::string out = "x";
  AppendLogTime(t, &out);
  return out.substr(1);
}

TEST(LogTest, LineTimeIsFormatTimesInUtc) {
  const absl::Time base = absl::FromUnixSeconds(1796500000);
  // Within one second (cached), across seconds, back again, and sub-microsecond parts truncated.
  for (absl::Duration d : {absl::ZeroDuration(), absl::Microseconds(1), absl::Microseconds(999999),
                           absl::Nanoseconds(1999999999), absl::Seconds(1), absl::ZeroDuration(),
                           absl::Hours(24 * 400) + absl::Microseconds(123456), absl::Nanoseconds(999)}) {
    EXPECT_EQ(Got(base + d), Expected(base + d)) << d;
  }
  EXPECT_EQ(Got(absl::UnixEpoch()), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(Got(absl::UnixEpoch() - absl::Microseconds(1)), Expected(absl::UnixEpoch() - absl::Microseconds(1)));
  EXPECT_EQ(Got(absl::UnixEpoch() - absl::Seconds(1)), Expected(absl::UnixEpoch() - absl::Seconds(1)));
}

}  // namespace
}  // namespace plimsoll
