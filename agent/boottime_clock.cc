#include "agent/boottime_clock.h"

#include <time.h>

namespace plimsoll::agent {

int64_t BoottimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

absl::Time BoottimeClock::Now() const { return absl::FromUnixNanos(BoottimeNanos()); }

void BoottimeClock::SleepFor(absl::Duration d) { absl::SleepFor(d); }

}  // namespace plimsoll::agent
