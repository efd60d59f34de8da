#include "agent/reclaim_reason.h"

#include <cstddef>

namespace plimsoll::agent {

// A reason added to the enum must be added to the list (and named below).
static_assert(kAllReclaimReasons.size() == static_cast<size_t>(ReclaimReason::kRateLimit) + 1);

absl::string_view ReclaimReasonName(ReclaimReason reason) {
  switch (reason) {
    case ReclaimReason::kStep: return "step";
    case ReclaimReason::kOffDisabled: return "off_disabled";
    case ReclaimReason::kOffUnsupported: return "off_unsupported";
    case ReclaimReason::kNoBounds: return "no_bounds";
    case ReclaimReason::kBoundsExpired: return "bounds_expired";
    case ReclaimReason::kBoundsInvalid: return "bounds_invalid";
    case ReclaimReason::kHostDisabled: return "host_disabled";
    case ReclaimReason::kAfterError: return "after_error";
    case ReclaimReason::kAfterPartial: return "after_partial";
    case ReclaimReason::kNoSample: return "no_sample";
    case ReclaimReason::kNoBaseline: return "no_baseline";
    case ReclaimReason::kPressure: return "pressure";
    case ReclaimReason::kBelowKeep: return "below_keep";
    case ReclaimReason::kRateLimit: return "rate_limit";
  }
  return "unknown";
}

}  // namespace plimsoll::agent
