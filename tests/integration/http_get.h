// A minimal HTTP/1.0 GET over a real TCP socket, so tests read /metrics the way
// a scraper does (no client library to trust instead of the server).
#ifndef PLIMSOLL_TESTS_INTEGRATION_HTTP_GET_H_
#define PLIMSOLL_TESTS_INTEGRATION_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace plimsoll::testing {

// Returns the body of http://127.0.0.1:<port><path>; an error for a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace plimsoll::testing

#endif  // PLIMSOLL_TESTS_INTEGRATION_HTTP_GET_H_
