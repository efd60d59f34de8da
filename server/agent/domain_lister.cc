#include "server/agent/domain_lister.h"

#include <utility>

#include "common/log.h"

namespace plimsoll::server::agent {

DomainLister::DomainLister(hypervisor::Hypervisor* hypervisor, std::string who)
    : hypervisor_(hypervisor), who_(std::move(who)) {}

absl::StatusOr<std::vector<hypervisor::DomainInfo>> DomainLister::List() {
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> listed = hypervisor_->ListActiveDomains();
  if (listed.ok()) {
    listed_once_ = true;
    last_error_.clear();
    return listed;
  }
  const std::string message(listed.status().message());
  if (message != last_error_) {
    if (listed_once_) {
      PLOG_WARNING << who_ << ": cannot list domains: " << message;
    } else {
      PLOG_INFO << who_ << ": waiting for libvirt: " << message;
    }
  }
  last_error_ = message;
  return listed;
}

}  // namespace plimsoll::server::agent
