// When an early tick may start, and whom it serves first.
//
// The loop ticks every `tick`. Wake() (a guest started or stopped, an API call, a reload, a
// reclaim) and Spike() (a guest agent's PSI spike report) ask for an early tick. An early tick
// starts no sooner than `min_interval` after the previous tick started; every wake in between
// coalesces into that one tick. Without this, each spike report bought a full tick: one guest
// within its report budget (2/s) drove two ticks a second and a log line each. The guests that spiked are handed to the coalesced tick in the order they first
// spiked, so the tick applies their decisions before anyone else's.
//
// Spike log lines are limited per guest: the first spike after a quiet `log_every` is logged at
// once (so a spike's arrival time stays visible, as bench/spike_latency.py reads it); the
// following ones are counted and their number goes in the guest's next line.
//
// Times are passed in: the loop schedules in real time, tests pass a FakeClock's. Thread-compatible:
// the loop guards it with its own mutex.
#ifndef PLIMSOLL_SERVER_LOOP_WAKE_GATE_H_
#define PLIMSOLL_SERVER_LOOP_WAKE_GATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

namespace plimsoll::server {

class WakeGate {
 public:
  explicit WakeGate(absl::Duration min_interval, absl::Duration log_every = absl::Seconds(10))
      : min_interval_(min_interval), log_every_(log_every) {}

  void set_min_interval(absl::Duration d) { min_interval_ = d; }
  absl::Duration min_interval() const { return min_interval_; }

  // An early tick is wanted.
  void Wake(absl::Time now);

  // A guest's agent sent a spike report at `now`: an early tick is wanted, serving this guest
  // first. Returns, when this spike should be logged, how many of the guest's spikes were not
  // logged since its previous line; nullopt when it should not be.
  std::optional<int64_t> Spike(const std::string& uuid, absl::Time now);

  // True while an early tick is wanted.
  bool woken() const { return woken_at_.has_value(); }

  // When the next tick starts, the previous one having started at `last_start`: the scheduled
  // last_start + tick or, when woken, the earlier of that and
  // max(the first wake, last_start + min_interval).
  absl::Time NextTickAt(absl::Time last_start, absl::Duration tick) const;

  // A tick starts: the wake is cleared and the guests that spiked since the previous tick are
  // returned, each once, in the order of their first spike.
  std::vector<std::string> StartTick();

  // A guest left: its log limit is forgotten.
  void Forget(const std::string& uuid);

 private:
  struct SpikeLog {
    absl::Time logged_at = absl::InfinitePast();
    int64_t unlogged = 0;
  };

  absl::Duration min_interval_;
  const absl::Duration log_every_;
  std::optional<absl::Time> woken_at_;  // the first wake since the last tick started
  std::vector<std::string> spiked_;     // since the last tick started, first spike first
  absl::flat_hash_set<std::string> spiked_set_;
  absl::flat_hash_map<std::string, SpikeLog> spike_log_;  // by uuid; only guests that spiked
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_WAKE_GATE_H_
