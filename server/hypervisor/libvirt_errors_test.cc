#include "server/hypervisor/libvirt_errors.h"

#include <libvirt/virterror.h>

#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

TEST(LibvirtErrorsTest, OnlyErrorsOfTheConnectionMarkItLost) {
  struct Case {
    const char* what;
    int code, domain;
    bool connection;
    absl::StatusCode status;
  };
  const Case cases[] = {
      {"no connection", VIR_ERR_NO_CONNECT, VIR_FROM_NONE, true, absl::StatusCode::kUnavailable},
      {"invalid connection", VIR_ERR_INVALID_CONN, VIR_FROM_NONE, true, absl::StatusCode::kUnavailable},
      {"RPC failure", VIR_ERR_RPC, VIR_FROM_RPC, true, absl::StatusCode::kUnavailable},
      {"socket recv failed", VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC, true, absl::StatusCode::kUnavailable},
      {"remote driver I/O", VIR_ERR_SYSTEM_ERROR, VIR_FROM_REMOTE, true, absl::StatusCode::kUnavailable},
      // A hot-plug whose socket path libvirt could not stat: the QEMU driver's errno, one domain's.
      {"cannot stat '' from QEMU", VIR_ERR_SYSTEM_ERROR, VIR_FROM_QEMU, false, absl::StatusCode::kInternal},
      {"errno from the security driver", VIR_ERR_SYSTEM_ERROR, VIR_FROM_SECURITY, false,
       absl::StatusCode::kInternal},
      {"errno without a domain", VIR_ERR_SYSTEM_ERROR, VIR_FROM_NONE, false, absl::StatusCode::kInternal},
      {"domain gone", VIR_ERR_NO_DOMAIN, VIR_FROM_QEMU, false, absl::StatusCode::kNotFound},
      {"not running", VIR_ERR_OPERATION_INVALID, VIR_FROM_QEMU, false, absl::StatusCode::kFailedPrecondition},
      {"busy in a job", VIR_ERR_OPERATION_TIMEOUT, VIR_FROM_QEMU, false, absl::StatusCode::kDeadlineExceeded},
      {"unsupported", VIR_ERR_NO_SUPPORT, VIR_FROM_TEST, false, absl::StatusCode::kUnimplemented},
      {"bad device XML", VIR_ERR_XML_ERROR, VIR_FROM_DOMAIN, false, absl::StatusCode::kInvalidArgument},
      {"denied", VIR_ERR_ACCESS_DENIED, VIR_FROM_ACCESS, false, absl::StatusCode::kPermissionDenied},
      {"internal error", VIR_ERR_INTERNAL_ERROR, VIR_FROM_QEMU, false, absl::StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(IsConnectionError(c.code, c.domain), c.connection) << c.what;
    EXPECT_EQ(MapErrorCode(c.code, c.domain), c.status) << c.what;
  }
}

}  // namespace
}  // namespace plimsoll::hypervisor
