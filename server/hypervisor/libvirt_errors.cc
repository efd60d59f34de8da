#include "server/hypervisor/libvirt_errors.h"

#include <libvirt/virterror.h>

namespace plimsoll::hypervisor {

bool IsConnectionError(int code, int domain) {
  switch (code) {
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
    case VIR_ERR_RPC:
      return true;
    case VIR_ERR_SYSTEM_ERROR:
      // errno from the client's own socket to libvirtd ("Cannot recv data", "Cannot write
      // data: Broken pipe"). Every driver reports its own failed system calls with this code
      // too, and those travel back over a healthy connection.
      return domain == VIR_FROM_RPC || domain == VIR_FROM_REMOTE;
    default:
      return false;
  }
}

absl::StatusCode MapErrorCode(int code, int domain) {
  if (IsConnectionError(code, domain)) return absl::StatusCode::kUnavailable;
  switch (code) {
    case VIR_ERR_NO_DOMAIN:
      return absl::StatusCode::kNotFound;
    case VIR_ERR_INVALID_ARG:
    case VIR_ERR_OVERFLOW:
    case VIR_ERR_XML_ERROR:  // We send no XML but device XML; in practice a test:/// URI naming a bad file.
      return absl::StatusCode::kInvalidArgument;
    case VIR_ERR_OPERATION_INVALID:
      return absl::StatusCode::kFailedPrecondition;
    case VIR_ERR_NO_SUPPORT:
    case VIR_ERR_OPERATION_UNSUPPORTED:
    case VIR_ERR_ARGUMENT_UNSUPPORTED:
      return absl::StatusCode::kUnimplemented;
    case VIR_ERR_OPERATION_TIMEOUT:
    case VIR_ERR_AGENT_UNRESPONSIVE:
      return absl::StatusCode::kDeadlineExceeded;
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_OPERATION_DENIED:
    case VIR_ERR_ACCESS_DENIED:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace plimsoll::hypervisor
