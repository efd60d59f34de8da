// Why the agent's reclaimer does what it does (reclaim_decision.h), and the names its reports
// carry. The host shows only these names (server/agent/reclaim_names.h), so this list is the one
// both sides read.
#ifndef PLIMSOLL_AGENT_RECLAIM_REASON_H_
#define PLIMSOLL_AGENT_RECLAIM_REASON_H_

#include <array>

#include "absl/strings/string_view.h"

namespace plimsoll::agent {

// Why the reclaimer asks for nothing now; kStep when it asks. In order of precedence: the first
// that applies is the answer.
enum class ReclaimReason {
  kStep = 0,
  kOffDisabled,     // --reclaim=off
  kOffUnsupported,  // no writable memory.reclaim
  kNoBounds,        // the host has sent no bounds (yet)
  kBoundsExpired,   // no bounds for longer than the agent's bounds TTL
  kBoundsInvalid,   // the host's last bounds carry a value no host would mean (NaN, negative)
  kHostDisabled,    // the host's bounds say enabled = false, or give no step or rate
  kAfterError,      // a write failed (not EAGAIN) a short while ago
  kAfterPartial,    // the kernel answered EAGAIN (it could not reclaim all) a short while ago
  kNoSample,        // meminfo lacks MemTotal, MemFree, Active(file) or Inactive(file)
  kNoBaseline,      // no refault rate yet: the first sample after idling
  kPressure,        // PSI or the refault rate over its stop
  kBelowKeep,       // the headroom is under min_step_bytes
  kRateLimit,       // the rate allows less than min_step_bytes since the last step
};

// Every reason, in the order above.
inline constexpr std::array<ReclaimReason, 14> kAllReclaimReasons = {
    ReclaimReason::kStep,         ReclaimReason::kOffDisabled,   ReclaimReason::kOffUnsupported,
    ReclaimReason::kNoBounds,     ReclaimReason::kBoundsExpired, ReclaimReason::kBoundsInvalid,
    ReclaimReason::kHostDisabled, ReclaimReason::kAfterError,    ReclaimReason::kAfterPartial,
    ReclaimReason::kNoSample,     ReclaimReason::kNoBaseline,    ReclaimReason::kPressure,
    ReclaimReason::kBelowKeep,    ReclaimReason::kRateLimit};

// "step", "off_disabled", "off_unsupported", "no_bounds", "bounds_expired", "bounds_invalid",
// "host_disabled", "after_error", "after_partial", "no_sample", "no_baseline", "pressure",
// "below_keep", "rate_limit": what the report's ReclaimReport.reason carries.
absl::string_view ReclaimReasonName(ReclaimReason reason);

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_REASON_H_
