// The offer gate: what the Plimsoll line offers to schedulers, from its headroom over time.
// Slow to offer, fast to withdraw: the offer is the largest value the headroom has stayed at or
// above for the whole of the last `hold` (the minimum of the headroom over that window), never
// below 0. A drop in headroom lowers the offer at once; a rise reaches the offer only once it has
// lasted `hold`, so a guest that shrank for a moment, or a host back from stale data, does not
// draw new guests onto memory it may want back.
//
// The headroom is a step function sampled at each Update: a sample holds until the next one. The
// time before the first sample counts as zero headroom, so a freshly started daemon offers
// nothing for `hold`. A clock that goes back (now before the last sample) starts the gate over.
//
// Time is passed in; the gate reads no clock. Not thread-safe: the loop thread owns it.
#ifndef PLIMSOLL_SERVER_LOOP_OFFER_GATE_H_
#define PLIMSOLL_SERVER_LOOP_OFFER_GATE_H_

#include <cstdint>
#include <deque>
#include <utility>

#include "absl/time/time.h"

namespace plimsoll::server {

class OfferGate {
 public:
  explicit OfferGate(absl::Duration hold) : hold_(hold) {}

  // Takes the headroom at `now` and returns the offer: max(0, min of the headroom over
  // [now - hold, now]). Callers pass 0 when the line is stale, which withdraws the offer at once
  // and makes it wait `hold` after the data is good again.
  int64_t Update(int64_t headroom_bytes, absl::Time now);

  // A new hold applies from the next Update (a longer one lowers nothing already offered until
  // then: the window simply reaches further back).
  void set_hold(absl::Duration hold) { hold_ = hold; }
  absl::Duration hold() const { return hold_; }

 private:
  absl::Duration hold_;
  // (time, headroom) samples, oldest first: the one in force at now - hold, then every later one.
  std::deque<std::pair<absl::Time, int64_t>> samples_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_OFFER_GATE_H_
