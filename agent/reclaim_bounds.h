// What the host's reclaim bounds (ReclaimBounds in agent.proto, carried by its acks) mean to
// the agent at a given time: the limits in force, within the agent's own hard limits, or why
// there are none. The agent is safe whatever the host sends:
//
// - Own limits first. The step, the rate and the pressure stops in force are the smaller of the
//   host's and the agent's own (flags); the file keep is the larger of the host's and the
//   agent's floor. No bounds can make the agent reclaim in larger steps, faster, under more
//   pressure, or further into the file cache than its flags allow.
// - A keep holds. Each keep the host names (keep_bytes, keep_file_bytes) stays in force for
//   keep_hold after the bounds that named it arrived: the keep in force is the largest named
//   within the last keep_hold, so a host (or whoever speaks for it) that names a lower keep gets
//   it only once every higher one is keep_hold old. A higher keep applies at once, and the
//   newest keep named always applies (also with a hold of zero, also after expiry). The hold
//   lives as long as the agent process; a restarted agent reclaims nothing before the host
//   names bounds again.
// - Bounds expire. Bounds older than bounds_ttl (no ack carried any since) give no limits: the
//   agent stops until the host speaks again. Disconnected agents therefore stop within the TTL.
// - Nonsense stops. Bounds whose PSI or refault stop is negative, NaN or infinite are
//   "invalid" and give no limits until valid bounds arrive (their keeps still count: a keep
//   only ever makes the agent do less).
//
// Times come from the reclaimer's clock, which in the agent is CLOCK_BOOTTIME (boottime_clock.h):
// a wall clock stepped back would otherwise keep expired bounds alive.
//
// Thread-compatible: the reclaimer guards it with its own lock.
#ifndef PLIMSOLL_AGENT_RECLAIM_BOUNDS_H_
#define PLIMSOLL_AGENT_RECLAIM_BOUNDS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/time/time.h"
#include "agent/reclaim_decision.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

// The agent's own hard limits (its --reclaim_* flags).
struct ReclaimOwnLimits {
  uint64_t min_file_bytes = uint64_t{64} << 20;   // never take the file LRU below this
  uint64_t max_step_bytes = uint64_t{128} << 20;  // one write asks for at most this
  double max_bytes_per_second = 64.0 * (1 << 20);
  double psi_stop_pct = 5;                  // PSI "some" stop, percent
  double refault_stop_per_second = 1000;    // file refaults per second stop (4 KiB pages: ~4 MiB/s)
  absl::Duration bounds_ttl = absl::Seconds(20);  // four default report intervals
  absl::Duration keep_hold = absl::Minutes(5);
};

// The largest value recorded within a sliding window of time, and never less than the newest
// value recorded (however old: a window of zero still holds the last word). Values recorded
// later that are at least as large make earlier ones irrelevant, so it keeps a short
// decreasing run.
class WindowMax {
 public:
  explicit WindowMax(absl::Duration window) : window_(window) {}
  void Record(uint64_t value, absl::Time at);
  // The largest of the values recorded in (now - window, now] and the newest; 0 when none.
  uint64_t Max(absl::Time now) const;

 private:
  absl::Duration window_;
  std::deque<std::pair<absl::Time, uint64_t>> run_;  // times rising, values falling
};

class ReclaimBoundsKeeper {
 public:
  explicit ReclaimBoundsKeeper(ReclaimOwnLimits own);

  // Bounds from an ack, received at `now`.
  void Update(const v1::ReclaimBounds& bounds, absl::Time now);

  // A file keep the agent learned itself (pressure right after its own steps: the reclaimer),
  // held exactly like one the host named: the larger wins, for keep_hold.
  void HoldFileKeep(uint64_t keep_file_bytes, absl::Time now) { keep_file_.Record(keep_file_bytes, now); }

  // The bounds' status at `now`, and the limits in force when kLive. The keeps in force are
  // filled whatever the status (the report shows them).
  BoundsStatus Effective(absl::Time now, ReclaimLimits* limits) const;

  const ReclaimOwnLimits& own() const { return own_; }

 private:
  const ReclaimOwnLimits own_;
  std::optional<v1::ReclaimBounds> last_;
  absl::Time received_ = absl::InfinitePast();
  bool valid_ = false;
  WindowMax keep_;
  WindowMax keep_file_;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_BOUNDS_H_
