// The reclaimer's law (docs/agent.md, "Reclaim"): how many bytes to ask the guest kernel's
// memory.reclaim for now, or none and why. Pure: no I/O, no clock, no logging; everything it
// needs, including the time since the last step, comes in as arguments, so a test is a table of
// literal situations and expected answers.
//
// With U = MemTotal - MemFree (used), F = Active(file) + Inactive(file) (the file LRU), the
// limits L in force (the host's bounds within the agent's own, reclaim_bounds.h) and t the time
// since the last step, a step asks for
//
//   bytes = min( U - L.keep, F - L.keep_file,            (the headroom: never below a keep)
//                L.step, L.rate * t )                    (the size and rate limits)
//
// rounded down to whole pages, and only when bytes >= min_step_bytes and the guest is not under
// pressure: PSI "some" (avg10, and the share stalled over the last period) at or below
// L.psi_stop and file refaults per second at or below L.refault_stop. Everything else is a
// named reason to do nothing.
#ifndef PLIMSOLL_AGENT_RECLAIM_DECISION_H_
#define PLIMSOLL_AGENT_RECLAIM_DECISION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/reclaim_reason.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

// The report's state for a decision: kStep and kRateLimit are ACTIVE, kPressure
// STOPPED_PRESSURE, kAfterError FAILED, the two off reasons OFF_*, the rest IDLE.
v1::ReclaimState ReclaimStateFor(ReclaimReason reason);

// What the agent measured now (reclaim_sample.h). Absent: the kernel does not say.
struct ReclaimSample {
  std::optional<uint64_t> mem_total_bytes;
  std::optional<uint64_t> mem_free_bytes;
  std::optional<uint64_t> active_file_bytes;
  std::optional<uint64_t> inactive_file_bytes;
  std::optional<double> psi_some_avg10;       // percent
  std::optional<double> psi_some_recent_pct;  // percent of the last period stalled ("some")
  std::optional<double> file_refaults_per_second;  // over the last period
};

// The limits in force: the host's bounds within the agent's own (reclaim_bounds.h).
struct ReclaimLimits {
  bool enabled = false;
  uint64_t keep_bytes = 0;       // U is not taken below this
  uint64_t keep_file_bytes = 0;  // F is not taken below this
  uint64_t step_bytes = 0;
  double max_bytes_per_second = 0;
  double psi_stop_pct = 0;
  double refault_stop_per_second = 0;
};

// Where the host's bounds stand (reclaim_bounds.h).
enum class BoundsStatus { kNone, kLive, kExpired, kInvalid };

struct ReclaimSituation {
  bool enabled = true;     // --reclaim is not off
  bool supported = true;   // memory.reclaim is there and writable
  BoundsStatus bounds = BoundsStatus::kNone;
  ReclaimLimits limits;    // meaningful when bounds == kLive
  ReclaimSample sample;
  // Since the last write to memory.reclaim (any outcome), the last EAGAIN and the last failed
  // write; InfiniteDuration when there was none.
  absl::Duration since_step = absl::InfiniteDuration();
  absl::Duration since_partial = absl::InfiniteDuration();
  absl::Duration since_error = absl::InfiniteDuration();
};

// Constants of the law (the agent's, not the host's).
struct ReclaimLawOptions {
  uint64_t page_bytes = 4096;
  // Smaller steps are not worth a write (each one drains the per-CPU LRU caches).
  uint64_t min_step_bytes = uint64_t{1} << 20;
  // After EAGAIN the cache is as small as the kernel can make it now; asking again at once would
  // only scan the LRUs for nothing.
  absl::Duration partial_backoff = absl::Seconds(30);
  // After any other write error (the file became unwritable, the kernel refused the format).
  absl::Duration error_backoff = absl::Minutes(1);
};

struct ReclaimDecision {
  ReclaimReason reason = ReclaimReason::kNoBounds;
  uint64_t bytes = 0;  // > 0 only for kStep
  // The numbers behind it, key=value, for the log and the report ("used=... keep=...").
  std::string detail;
};

// The law above. Pure.
ReclaimDecision DecideReclaim(const ReclaimSituation& situation, const ReclaimLawOptions& options = {});

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_DECISION_H_
