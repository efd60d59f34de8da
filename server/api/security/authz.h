// server/api/security/: who may call the control API (authz) and its listener's TLS
// (tls_credentials). Nothing here knows about guests or policies.
//
// Who may call which Control RPC.
//
// Two kinds of peers reach the control API:
//   - the local unix socket: whoever can open the socket file (mode 0600,
//     or 0660 with a configured group) is trusted as admin; the file mode is
//     the access control;
//   - TCP, only with mTLS (tls_credentials.h): the TLS handshake has already
//     verified the client certificate against the configured CA; its subject
//     decides the role. CN in admin_common_names or an OU in
//     admin_organizational_units: admin. Otherwise CN in reader_common_names
//     or an OU in reader_organizational_units: reader. Otherwise: none.
// Anything else (TCP without a verified certificate) is refused with
// UNAUTHENTICATED: a mis-wired insecure TCP listener never grants access.
//
// Reader RPCs: ListGuests, GetGuest, GetHostStatus, GetHostLine, ListGuestPolicies, Watch.
// Every other RPC, including ones added later, needs admin.
//
// Thread-safety: Check/Identify are thread-safe and may run concurrently
// with SetRules (used to reload the rules on SIGHUP).
#ifndef PLIMSOLL_SERVER_API_SECURITY_AUTHZ_H_
#define PLIMSOLL_SERVER_API_SECURITY_AUTHZ_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/api/control_core.h"

namespace plimsoll::server {

struct RoleRules {
  std::vector<std::string> admin_common_names;
  std::vector<std::string> admin_organizational_units;
  std::vector<std::string> reader_common_names;
  std::vector<std::string> reader_organizational_units;

  // OU "plimsoll-admin" is admin, OU "plimsoll-reader" is reader.
  static RoleRules Defaults();
};

// The values of attribute `key` ("CN", "OU", ...) in an RFC 2253 subject
// string such as "CN=ops,OU=plimsoll-admin,O=Example\, Inc." (escapes
// undone), in order.
std::vector<std::string> SubjectAttribute(absl::string_view subject, absl::string_view key);

// The role the rules give a certificate with this CN and these OUs.
Role RoleFor(const RoleRules& rules, absl::string_view common_name, const std::vector<std::string>& units);

// The role an RPC needs, by method name ("ListGuests" or the full
// "/plimsoll.v1.Control/ListGuests").
Role RequiredRole(absl::string_view method);

const char* RoleName(Role role);

class Authorizer {
 public:
  explicit Authorizer(RoleRules rules = RoleRules::Defaults());

  void SetRules(RoleRules rules);

  // Who the peer of `context` is (see above).
  Caller Identify(const grpc::ServerContext& context) const;

  // OK and `*caller` filled when the peer may call `method`; otherwise
  // UNAUTHENTICATED (no verified identity) or PERMISSION_DENIED naming the
  // caller, its role and the role needed.
  grpc::Status Check(const grpc::ServerContext& context, absl::string_view method, Caller* caller) const;

 private:
  mutable absl::Mutex mu_;
  RoleRules rules_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_SECURITY_AUTHZ_H_
