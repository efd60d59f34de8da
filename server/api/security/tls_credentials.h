// Security of the control API listener: the validated `control` block of the
// config, the gRPC server credentials it calls for, and the unix socket's
// access mode. Wiring (server/daemon.cc):
//
//   auto api = ResolveControlApi(config);                  // at config time
//   auto creds = BuildControlServerCredentials(*api);      // before BuildAndStart
//   builder.AddListeningPort(listen, *creds, ...);
//   Authorizer authz(api->roles);                          // ControlService option
//   ... BuildAndStart() under umask(0177) as today ...
//   ApplyUnixSocketAccess(socket_path, *api);              // after BuildAndStart
//
// TCP: TLS with a client certificate required and verified against
// client_ca_file (mTLS). Certificate, key and CA are re-read from their files
// every tls_reload_interval (gRPC's FileWatcherCertificateProvider), so a
// renewed certificate is picked up without a restart or a SIGHUP; a broken
// renewal (unreadable file, key not matching the certificate) is logged by
// gRPC and the previous material stays in use.
#ifndef PLIMSOLL_SERVER_API_SECURITY_TLS_CREDENTIALS_H_
#define PLIMSOLL_SERVER_API_SECURITY_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "plimsoll/v1/config.pb.h"
#include "server/api/security/authz.h"

namespace plimsoll::server {

inline constexpr char kDefaultStateFile[] = "/var/lib/plimsoll/control-state.textproto";

struct ControlApiOptions {
  // The listener: a unix socket (no TLS) or TCP (mTLS).
  bool unix_socket = true;
  // Unix socket: give it to this group with mode 0660; empty: 0600.
  std::string socket_group;
  // TCP: PEM files.
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  absl::Duration tls_reload_interval = absl::Seconds(10);
  RoleRules roles = RoleRules::Defaults();
  std::string state_file = kDefaultStateFile;
};

// Validates config.control() against config.grpc_listen() (set, as after
// WithDefaults). INVALID_ARGUMENT names the field: a TCP grpc_listen without
// control.tls files, TLS files on a unix socket, a bad reload interval, a
// socket_group on TCP, an unknown group.
absl::StatusOr<ControlApiOptions> ResolveControlApi(const plimsoll::v1::DaemonConfig& config);

// Checks that the TLS files exist, parse as PEM and that the key matches the
// certificate, so a mistake is a clear startup error rather than failing
// handshakes. Errors name the config field and the file.
absl::Status CheckTlsFiles(const ControlApiOptions& options);

// Insecure credentials for a unix socket; for TCP, TLS credentials that
// require and verify a client certificate and reload the files (after
// CheckTlsFiles).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> BuildControlServerCredentials(
    const ControlApiOptions& options);

// With a socket_group: chgrp the socket to it and chmod 0660. Without: makes
// sure the socket is 0600. Call right after the server started listening.
absl::Status ApplyUnixSocketAccess(const std::string& socket_path, const ControlApiOptions& options);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_SECURITY_TLS_CREDENTIALS_H_
