// common/: small pieces every folder shares (clock, log, /proc parsers, bounded file reads, the
// MiB formatter) and, in testing/, test helpers. It must not depend on any other plimsoll folder.
//
// The daemon's only source of time. Logic takes a Clock& so tests can move
// time by hand (FakeClock) instead of sleeping.
#ifndef PLIMSOLL_COMMON_CLOCK_H_
#define PLIMSOLL_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace plimsoll {

// Thread-safe. Now() is wall time (used for stats ages and logs).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks for `d` of this clock's time. FakeClock returns at once after advancing.
  virtual void SleepFor(absl::Duration d) = 0;
};

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  // A process-wide instance for production wiring.
  static RealClock* Get();
};

// Time moves only when a test says so. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration d) override { Advance(d); }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll

#endif  // PLIMSOLL_COMMON_CLOCK_H_
