// The running domains as a connector's scan lists them. A listing can fail while libvirt is
// being connected (the daemon starting) or reconnected; the connector then goes on with what it
// knew, and the failure is logged once per distinct message: at INFO before the first listing
// succeeded (no alarm while the daemon starts), at WARNING after.
//
// Not thread-safe: one scanning thread calls it.
#ifndef PLIMSOLL_SERVER_AGENT_DOMAIN_LISTER_H_
#define PLIMSOLL_SERVER_AGENT_DOMAIN_LISTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server::agent {

class DomainLister {
 public:
  // `who` starts the log lines ("agent channels" gives "agent channels: cannot list domains:
  // ..."). `hypervisor` must outlive the lister.
  DomainLister(hypervisor::Hypervisor* hypervisor, std::string who);

  // Hypervisor::ListActiveDomains, with the failure logged as above.
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> List();

 private:
  hypervisor::Hypervisor* const hypervisor_;
  const std::string who_;
  bool listed_once_ = false;
  std::string last_error_;
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_DOMAIN_LISTER_H_
