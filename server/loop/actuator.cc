#include "server/loop/actuator.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace plimsoll::server {

absl::Status HypervisorActuator::SetTarget(const std::string& uuid, const std::string& name,
                                           int64_t bytes) {
  absl::StatusOr<std::string> job = hv_->ActiveJob(uuid);
  if (job.ok() && !job->empty()) {
    return absl::AbortedError(absl::StrCat("the domain has an active libvirt job (", *job, ")"));
  }
  // An error asking (no job info in this driver, a vanished domain) says nothing about jobs:
  // the call itself reports what is really wrong.
  return hv_->SetBalloonTarget(uuid, bytes);
}

absl::Status DryRunActuator::SetTarget(const std::string& uuid, const std::string& name,
                                       int64_t bytes) {
  PLOG_INFO << "dry-run: would set guest=" << name << " uuid=" << uuid << " target_bytes=" << bytes;
  return absl::OkStatus();
}

}  // namespace plimsoll::server
