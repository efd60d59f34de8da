#include "server/hypervisor/testing/test_driver_control.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "absl/strings/str_cat.h"

namespace plimsoll::hypervisor::testing {
namespace {

std::string LastError() {
  virErrorPtr e = virGetLastError();
  return e != nullptr && e->message != nullptr ? e->message : "unknown libvirt error";
}

}  // namespace

ConnectionOpener TestDriverControl::Opener() {
  return [this](const std::string& uri) -> virConnectPtr {
    // The hypervisor owns the one reference and closes it; this only remembers the pointer.
    conn_ = virConnectOpen(uri.empty() ? nullptr : uri.c_str());
    return conn_;
  };
}

absl::Status TestDriverControl::DestroyDomain(const std::string& uuid) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("the hypervisor has not connected");
  virDomainPtr dom = virDomainLookupByUUIDString(conn_, uuid.c_str());
  if (dom == nullptr) {
    virErrorPtr e = virGetLastError();
    if (e != nullptr && e->code == VIR_ERR_NO_DOMAIN) {
      return absl::NotFoundError(absl::StrCat("no domain ", uuid, ": ", LastError()));
    }
    return absl::InternalError(absl::StrCat("lookup ", uuid, ": ", LastError()));
  }
  const int rc = virDomainDestroy(dom);
  const std::string error = rc < 0 ? LastError() : "";
  virDomainFree(dom);
  if (rc < 0) return absl::InternalError(absl::StrCat("virDomainDestroy ", uuid, ": ", error));
  return absl::OkStatus();
}

absl::Status TestDriverControl::StartDomain(const std::string& uuid) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("the hypervisor has not connected");
  virDomainPtr dom = virDomainLookupByUUIDString(conn_, uuid.c_str());
  if (dom == nullptr) return absl::NotFoundError(absl::StrCat("no domain ", uuid, ": ", LastError()));
  const int rc = virDomainCreate(dom);
  const std::string error = rc < 0 ? LastError() : "";
  virDomainFree(dom);
  if (rc < 0) return absl::InternalError(absl::StrCat("virDomainCreate ", uuid, ": ", error));
  return absl::OkStatus();
}

absl::Status TestDriverControl::DefineDomain(const std::string& xml) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("the hypervisor has not connected");
  virDomainPtr dom = virDomainDefineXML(conn_, xml.c_str());
  if (dom == nullptr) return absl::InvalidArgumentError(absl::StrCat("virDomainDefineXML: ", LastError()));
  virDomainFree(dom);
  return absl::OkStatus();
}

}  // namespace plimsoll::hypervisor::testing
