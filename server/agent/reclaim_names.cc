#include "server/agent/reclaim_names.h"

namespace plimsoll::server::agent {

absl::string_view ReclaimStateName(v1::ReclaimState state) {
  switch (state) {
    case v1::RECLAIM_STATE_OFF_DISABLED: return "off_disabled";
    case v1::RECLAIM_STATE_OFF_UNSUPPORTED: return "off_unsupported";
    case v1::RECLAIM_STATE_IDLE: return "idle";
    case v1::RECLAIM_STATE_ACTIVE: return "active";
    case v1::RECLAIM_STATE_STOPPED_PRESSURE: return "stopped_pressure";
    case v1::RECLAIM_STATE_FAILED: return "failed";
    default: return "unknown";
  }
}

const std::array<absl::string_view, 6>& AllReclaimStateNames() {
  static constexpr std::array<absl::string_view, 6> kNames = {"off_disabled", "off_unsupported", "idle",
                                                              "active",       "stopped_pressure", "failed"};
  return kNames;
}

absl::string_view DocumentedReclaimReason(absl::string_view reason) {
  // agent/reclaim_decision.cc's names, in docs/agent.md's order of precedence.
  static constexpr absl::string_view kReasons[] = {
      "step",        "off_disabled",  "off_unsupported", "no_bounds",  "bounds_expired",
      "bounds_invalid", "host_disabled", "after_error",  "after_partial", "no_sample",
      "no_baseline", "pressure",      "below_keep",      "rate_limit"};
  for (absl::string_view r : kReasons) {
    if (r == reason) return r;
  }
  return "unknown";
}

}  // namespace plimsoll::server::agent
