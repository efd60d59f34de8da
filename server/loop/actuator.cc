#include "server/loop/actuator.h"

#include "common/log.h"

namespace plimsoll::server {

absl::Status HypervisorActuator::SetTarget(const std::string& uuid, const std::string& name,
                                           int64_t bytes) {
  return hv_->SetBalloonTarget(uuid, bytes);
}

absl::Status DryRunActuator::SetTarget(const std::string& uuid, const std::string& name,
                                       int64_t bytes) {
  PLOG_INFO << "dry-run: would set guest=" << name << " uuid=" << uuid << " target_bytes=" << bytes;
  return absl::OkStatus();
}

}  // namespace plimsoll::server
