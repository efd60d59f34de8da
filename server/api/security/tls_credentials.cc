#include "server/api/security/tls_credentials.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "openssl/err.h"
#include "openssl/pem.h"
#include "openssl/x509.h"

namespace plimsoll::server {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("config field \"", field, "\": ", message));
}

std::string OpensslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// Opens `path` for reading; the error names the field.
absl::StatusOr<FILE*> Open(absl::string_view field, const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return FieldError(field, absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  return f;
}

absl::StatusOr<std::vector<X509*>> ReadCerts(absl::string_view field, const std::string& path) {
  auto f = Open(field, path);
  if (!f.ok()) return f.status();
  std::vector<X509*> certs;
  while (X509* c = PEM_read_X509(*f, nullptr, nullptr, nullptr)) certs.push_back(c);
  ERR_clear_error();  // the loop ends on an expected "no start line"
  fclose(*f);
  if (certs.empty()) return FieldError(field, absl::StrCat(path, " holds no PEM certificate"));
  return certs;
}

}  // namespace

absl::StatusOr<ControlApiOptions> ResolveControlApi(const plimsoll::v1::DaemonConfig& config) {
  ControlApiOptions o;
  const auto& c = config.control();
  o.unix_socket = absl::StartsWith(config.grpc_listen(), "unix:");
  o.socket_group = c.socket_group();
  o.cert_file = c.tls().cert_file();
  o.key_file = c.tls().key_file();
  o.client_ca_file = c.tls().client_ca_file();
  const bool any_tls = c.tls().has_cert_file() || c.tls().has_key_file() || c.tls().has_client_ca_file();
  if (o.unix_socket) {
    if (any_tls) {
      return FieldError("control.tls", absl::StrCat("TLS is for a TCP grpc_listen; \"", config.grpc_listen(),
                                                    "\" is a unix socket, protected by its file mode"));
    }
    if (!o.socket_group.empty() && getgrnam(o.socket_group.c_str()) == nullptr) {
      return FieldError("control.socket_group", absl::StrCat("no group named \"", o.socket_group, "\""));
    }
  } else {
    if (!o.socket_group.empty()) {
      return FieldError("control.socket_group", "only applies to a unix socket grpc_listen");
    }
    for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"cert_file", &o.cert_file},
                                      {"key_file", &o.key_file},
                                      {"client_ca_file", &o.client_ca_file}}) {
      if (value->empty()) {
        return FieldError(absl::StrCat("control.tls.", name),
                          absl::StrCat("required: grpc_listen \"", config.grpc_listen(),
                                       "\" is TCP, and the control API is only served over TCP with mutual TLS "
                                       "(set control.tls.cert_file, key_file and client_ca_file, or use "
                                       "grpc_listen: \"unix:/run/plimsoll/plimsolld.sock\")"));
      }
    }
  }
  if (c.has_tls_reload_interval()) {
    absl::Duration d;
    if (!absl::ParseDuration(c.tls_reload_interval(), &d) || d < absl::Seconds(1) || d > absl::Hours(1)) {
      return FieldError("control.tls_reload_interval",
                        absl::StrCat("\"", c.tls_reload_interval(), "\" is not a duration in [1s, 1h]"));
    }
    o.tls_reload_interval = d;
  }
  const bool any_roles = c.admin_common_names_size() + c.admin_organizational_units_size() +
                             c.reader_common_names_size() + c.reader_organizational_units_size() >
                         0;
  if (any_roles) {
    o.roles = RoleRules();
    o.roles.admin_common_names.assign(c.admin_common_names().begin(), c.admin_common_names().end());
    o.roles.admin_organizational_units.assign(c.admin_organizational_units().begin(),
                                              c.admin_organizational_units().end());
    o.roles.reader_common_names.assign(c.reader_common_names().begin(), c.reader_common_names().end());
    o.roles.reader_organizational_units.assign(c.reader_organizational_units().begin(),
                                               c.reader_organizational_units().end());
  }
  for (const auto& names : {c.admin_common_names(), c.admin_organizational_units(), c.reader_common_names(),
                            c.reader_organizational_units()}) {
    for (const std::string& n : names) {
      if (n.empty()) return FieldError("control", "an empty name in a role list would match nothing; remove it");
    }
  }
  if (c.has_state_file()) {
    if (c.state_file().empty() || c.state_file()[0] != '/') {
      return FieldError("control.state_file", absl::StrCat("\"", c.state_file(), "\" must be an absolute path"));
    }
    o.state_file = c.state_file();
  }
  return o;
}

absl::Status CheckTlsFiles(const ControlApiOptions& o) {
  auto chain = ReadCerts("control.tls.cert_file", o.cert_file);
  if (!chain.ok()) return chain.status();
  auto ca = ReadCerts("control.tls.client_ca_file", o.client_ca_file);
  if (!ca.ok()) {
    for (X509* c : *chain) X509_free(c);
    return ca.status();
  }
  for (X509* c : *ca) X509_free(c);
  absl::Status result = absl::OkStatus();
  auto kf = Open("control.tls.key_file", o.key_file);
  if (!kf.ok()) {
    result = kf.status();
  } else {
    EVP_PKEY* key = PEM_read_PrivateKey(*kf, nullptr, nullptr, nullptr);
    fclose(*kf);
    if (key == nullptr) {
      result = FieldError("control.tls.key_file",
                          absl::StrCat(o.key_file, " holds no unencrypted PEM private key (", OpensslError(), ")"));
    } else {
      if (X509_check_private_key((*chain)[0], key) != 1) {
        ERR_clear_error();
        result = FieldError("control.tls.key_file", absl::StrCat(o.key_file, " does not match the certificate in ",
                                                                 o.cert_file));
      }
      EVP_PKEY_free(key);
    }
  }
  for (X509* c : *chain) X509_free(c);
  return result;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> BuildControlServerCredentials(const ControlApiOptions& o) {
  if (o.unix_socket) return grpc::InsecureServerCredentials();
  if (absl::Status s = CheckTlsFiles(o); !s.ok()) return s;
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      o.key_file, o.cert_file, o.client_ca_file,
      static_cast<unsigned int>(absl::ToInt64Seconds(o.tls_reload_interval)));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto creds = grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS server options");
  return creds;
}

absl::Status ApplyUnixSocketAccess(const std::string& socket_path, const ControlApiOptions& o) {
  if (o.socket_group.empty()) {
    if (chmod(socket_path.c_str(), 0600) != 0) {
      return absl::UnavailableError(absl::StrCat("chmod 0600 ", socket_path, ": ", strerror(errno)));
    }
    return absl::OkStatus();
  }
  const struct group* g = getgrnam(o.socket_group.c_str());
  if (g == nullptr) {
    return FieldError("control.socket_group", absl::StrCat("no group named \"", o.socket_group, "\""));
  }
  if (chown(socket_path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("control.socket_group: cannot give ", socket_path, " to group ", o.socket_group, ": ",
                     strerror(errno)));
  }
  if (chmod(socket_path.c_str(), 0660) != 0) {
    return absl::UnavailableError(absl::StrCat("chmod 0660 ", socket_path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace plimsoll::server
