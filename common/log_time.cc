#include "common/log_time.h"

#include <cstdint>
#include <cstdio>
#include <limits>

namespace plimsoll {

// The part up to the second is formatted once a second per thread: FormatTime's time-zone work
// was most of a line's cost when a tick logs a thousand balloon moves.
void AppendLogTime(absl::Time t, std::string* out) {
  thread_local int64_t cached_second = std::numeric_limits<int64_t>::min();
  thread_local std::string cached;
  const int64_t micros = absl::ToUnixMicros(t);  // rounded down, as %E6S truncates
  int64_t second = micros / 1000000;
  if (micros % 1000000 < 0) --second;
  if (second != cached_second) {
    cached = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(second), absl::UTCTimeZone());
    cached_second = second;
  }
  char fraction[16];
  snprintf(fraction, sizeof(fraction), ".%06dZ", static_cast<int>(micros - second * 1000000));
  out->append(cached);
  out->append(fraction);
}

}  // namespace plimsoll
