// The guest's CLOCK_BOOTTIME: monotonic, and counting time the guest spent suspended. The
// agent stamps its reports with it (the daemon checks rates against it), and the reclaimer keeps
// its time with it: a wall clock stepped back by NTP would keep expired bounds alive and a step
// forward would hurry the rate limit.
#ifndef PLIMSOLL_AGENT_BOOTTIME_CLOCK_H_
#define PLIMSOLL_AGENT_BOOTTIME_CLOCK_H_

#include <cstdint>

#include "common/clock.h"

namespace plimsoll::agent {

// CLOCK_BOOTTIME now, nanoseconds.
int64_t BoottimeNanos();

// A Clock whose Now() is CLOCK_BOOTTIME read as nanoseconds after the Unix epoch: only
// differences between its times mean anything. Thread-safe.
class BoottimeClock : public Clock {
 public:
  absl::Time Now() const override;
  void SleepFor(absl::Duration d) override;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_BOOTTIME_CLOCK_H_
