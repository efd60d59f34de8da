// What a libvirt error means for plimsolld: the whole connection is gone (every guest is held
// until it is back), or only this call failed (the domain it was about carries the error, and
// the connection and every other guest carry on). Decided from the error's code and the part of
// libvirt that raised it (virErrorDomain), as plain ints so the table can be tested without a
// connection.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_ERRORS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_ERRORS_H_

#include "absl/status/status.h"

namespace plimsoll::hypervisor {

// True when the error (virErrorPtr->code, ->domain) means the connection itself is unusable:
// no connection or an invalid one, an RPC failure, or an operating-system error raised by the
// RPC or remote layers (the socket to libvirtd failed). The same operating-system error code
// raised by a driver about one domain ("cannot stat ''" from the QEMU driver) is that call's.
bool IsConnectionError(int code, int domain);

// The absl code for a libvirt error: UNAVAILABLE for connection errors, NOT_FOUND for an
// unknown domain, and so on; INTERNAL for what has no closer meaning.
absl::StatusCode MapErrorCode(int code, int domain);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_ERRORS_H_
