// Changes the state of libvirt's in-process test driver behind a LibvirtHypervisor, for tests of
// the libvirt seam: stopping a domain, as a guest that shuts down or crashes would, starting it
// again (each emits a lifecycle event), and changing its definition.
//
// The test driver (test:///path/node.xml) keeps its domains per connection, so only the
// hypervisor's own connection can change them. A TestDriverControl hands the hypervisor an opener
// that remembers the connection it opened. It takes no reference of its own, so the
// connection's lifetime (and when libvirt frees what it registered in the event loop) is exactly
// the hypervisor's: use it only while that hypervisor is alive and connected. One per hypervisor;
// its calls may come from another thread than the hypervisor's (libvirt connections are
// thread-safe), but only after Opener()'s connection was made.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_TESTING_TEST_DRIVER_CONTROL_H_
#define PLIMSOLL_SERVER_HYPERVISOR_TESTING_TEST_DRIVER_CONTROL_H_

#include <string>

#include "absl/status/status.h"
#include "server/hypervisor/libvirt_hypervisor.h"

namespace plimsoll::hypervisor::testing {

class TestDriverControl {
 public:
  TestDriverControl() = default;
  TestDriverControl(const TestDriverControl&) = delete;
  TestDriverControl& operator=(const TestDriverControl&) = delete;

  // For LibvirtHypervisor's constructor. Each open replaces the connection this controls.
  ConnectionOpener Opener();

  // Hard-stops the domain (virDomainDestroy) on the hypervisor's connection. NOT_FOUND for an
  // unknown uuid, FAILED_PRECONDITION before the hypervisor connected.
  absl::Status DestroyDomain(const std::string& uuid);
  // Starts a stopped domain again (virDomainCreate), as a guest started by an operator would.
  // The test driver's domains from the node XML are persistent, so a destroyed one can be started.
  absl::Status StartDomain(const std::string& uuid);
  // Defines a domain from `xml` (virDomainDefineXML), or changes the definition of the domain of
  // its uuid: a running one takes it when it next starts, as a real domain edited with virsh does.
  absl::Status DefineDomain(const std::string& xml);

 private:
  _virConnect* conn_ = nullptr;  // borrowed from the hypervisor that opened it
};

}  // namespace plimsoll::hypervisor::testing

#endif  // PLIMSOLL_SERVER_HYPERVISOR_TESTING_TEST_DRIVER_CONTROL_H_
