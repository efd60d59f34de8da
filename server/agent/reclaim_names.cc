#include "server/agent/reclaim_names.h"

#include "agent/reclaim_reason.h"

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
  for (plimsoll::agent::ReclaimReason r : plimsoll::agent::kAllReclaimReasons) {
    if (plimsoll::agent::ReclaimReasonName(r) == reason) return plimsoll::agent::ReclaimReasonName(r);
  }
  return "unknown";
}

}  // namespace plimsoll::server::agent
