#include "server/api/security/authz.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc_security_constants.h"

namespace plimsoll::server {
namespace {

bool Contains(const std::vector<std::string>& v, absl::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  for (const grpc::string_ref& v : auth.FindPropertyValues(name)) return std::string(v.data(), v.size());
  return "";
}

}  // namespace

RoleRules RoleRules::Defaults() {
  RoleRules r;
  r.admin_organizational_units = {"plimsoll-admin"};
  r.reader_organizational_units = {"plimsoll-reader"};
  return r;
}

std::vector<std::string> SubjectAttribute(absl::string_view subject, absl::string_view key) {
  // Split on unescaped ',' (and '+' of multi-valued RDNs), undo backslash escapes.
  std::vector<std::string> out;
  std::string part;
  auto flush = [&] {
    const size_t eq = part.find('=');
    if (eq != std::string::npos) {
      std::string k(absl::StripAsciiWhitespace(part.substr(0, eq)));
      if (absl::EqualsIgnoreCase(k, key)) out.push_back(part.substr(eq + 1));
    }
    part.clear();
  };
  for (size_t i = 0; i < subject.size(); ++i) {
    const char c = subject[i];
    if (c == '\\' && i + 1 < subject.size()) {
      part += subject[++i];
    } else if (c == ',' || c == '+') {
      flush();
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

Role RoleFor(const RoleRules& rules, absl::string_view cn, const std::vector<std::string>& units) {
  auto any_unit_in = [&units](const std::vector<std::string>& allowed) {
    for (const std::string& u : units) {
      if (Contains(allowed, u)) return true;
    }
    return false;
  };
  if ((!cn.empty() && Contains(rules.admin_common_names, cn)) || any_unit_in(rules.admin_organizational_units)) {
    return Role::kAdmin;
  }
  if ((!cn.empty() && Contains(rules.reader_common_names, cn)) || any_unit_in(rules.reader_organizational_units)) {
    return Role::kReader;
  }
  return Role::kNone;
}

Role RequiredRole(absl::string_view method) {
  const size_t slash = method.rfind('/');
  if (slash != absl::string_view::npos) method.remove_prefix(slash + 1);
  static const char* const kReads[] = {"ListGuests", "GetGuest", "GetHostStatus", "GetHostLine",
                                       "ListGuestPolicies", "Watch"};
  for (const char* m : kReads) {
    if (method == m) return Role::kReader;
  }
  return Role::kAdmin;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kReader:
      return "reader";
    default:
      return "none";
  }
}

Authorizer::Authorizer(RoleRules rules) : rules_(std::move(rules)) {}

void Authorizer::SetRules(RoleRules rules) {
  absl::MutexLock l(&mu_);
  rules_ = std::move(rules);
}

Caller Authorizer::Identify(const grpc::ServerContext& context) const {
  Caller caller;
  const std::string peer = context.peer();
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  // "ssl" from SslServerCredentials, "tls" from TlsServerCredentials; both
  // only report an authenticated peer after verifying its certificate.
  const std::string security = auth ? FirstProperty(*auth, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME) : "";
  const bool tls = auth != nullptr && auth->IsPeerAuthenticated() && (security == "ssl" || security == "tls");
  if (tls) {
    const std::string cn = FirstProperty(*auth, GRPC_X509_CN_PROPERTY_NAME);
    const std::string subject = FirstProperty(*auth, GRPC_X509_SUBJECT_PROPERTY_NAME);
    caller.identity = subject.empty() ? absl::StrCat("CN=", cn) : subject;
    caller.authenticated = true;
    absl::MutexLock l(&mu_);
    caller.role = RoleFor(rules_, cn, SubjectAttribute(subject, "OU"));
    return caller;
  }
  if (absl::StartsWith(peer, "unix:")) {
    caller.identity = "unix";
    caller.authenticated = true;
    caller.role = Role::kAdmin;
    return caller;
  }
  caller.identity = absl::StrCat("unauthenticated peer ", peer);
  caller.role = Role::kNone;
  return caller;
}

grpc::Status Authorizer::Check(const grpc::ServerContext& context, absl::string_view method, Caller* caller) const {
  *caller = Identify(context);
  const Role need = RequiredRole(method);
  if (!caller->authenticated) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(method, ": the control API over TCP needs a verified client certificate (",
                                     caller->identity, ")"));
  }
  if (static_cast<int>(caller->role) < static_cast<int>(need)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(method, " needs the ", RoleName(need), " role; \"", caller->identity,
                                     "\" has ", caller->role == Role::kNone ? "no role" : RoleName(caller->role),
                                     " (docs/security.md, \"Control API\")"));
  }
  return grpc::Status::OK;
}

}  // namespace plimsoll::server
