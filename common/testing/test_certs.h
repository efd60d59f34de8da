// A throwaway PKI for tests, made with the openssl command line (Debian's
// `openssl`): a CA, a server certificate for 127.0.0.1/localhost, client
// certificates for each role, and a second CA with a client that claims the
// admin OU but is signed by the wrong CA. EC P-256 keys, valid for 2 days.
#ifndef PLIMSOLL_COMMON_TESTING_TEST_CERTS_H_
#define PLIMSOLL_COMMON_TESTING_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace plimsoll::testing {

struct TestPki {
  std::string dir;
  // PEM file paths.
  std::string ca_cert;
  std::string server_cert, server_key;
  std::string admin_cert, admin_key;    // CN=ops-admin, OU=plimsoll-admin
  std::string reader_cert, reader_key;  // CN=dashboard, OU=plimsoll-reader
  std::string norole_cert, norole_key;  // CN=nobody, OU=elsewhere
  std::string cn_cert, cn_key;          // CN=control-plane-1, no OU (for CN-list rules)
  std::string other_ca_cert;            // a CA the server does not trust
  std::string rogue_cert, rogue_key;    // CN=rogue, OU=plimsoll-admin, signed by the other CA
};

// Reads a whole file (empty when unreadable).
std::string ReadFileForTest(const std::string& path);

// Creates the PKI under `dir` (which must exist). Fails with the openssl
// command and its output when a step fails.
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

}  // namespace plimsoll::testing

#endif  // PLIMSOLL_COMMON_TESTING_TEST_CERTS_H_
