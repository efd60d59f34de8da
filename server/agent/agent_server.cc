#include "server/agent/agent_server.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "openssl/err.h"
#include "openssl/pem.h"
#include "openssl/x509.h"

namespace plimsoll::server::agent {
namespace {

absl::Status TlsFieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("config field \"", field, "\": ", message));
}

// The whole file (a PEM is a few KiB; anything above 1 MiB is not one).
absl::StatusOr<std::string> ReadPemFile(absl::string_view field, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return TlsFieldError(field, absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return TlsFieldError(field, absl::StrCat("cannot read ", path));
  if (text.size() > (1 << 20)) return TlsFieldError(field, absl::StrCat(path, " is too large for a PEM file"));
  return text;
}

}  // namespace

absl::StatusOr<AgentTlsPem> LoadAgentTlsFiles(const std::string& cert_file, const std::string& key_file) {
  constexpr absl::string_view kCertField = "agent.agent_tls_cert_file";
  constexpr absl::string_view kKeyField = "agent.agent_tls_key_file";
  AgentTlsPem pem;
  absl::StatusOr<std::string> cert = ReadPemFile(kCertField, cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(kKeyField, key_file);
  if (!key.ok()) return key.status();
  pem.cert_pem = *std::move(cert);
  pem.key_pem = *std::move(key);

  BIO* cert_bio = BIO_new_mem_buf(pem.cert_pem.data(), static_cast<int>(pem.cert_pem.size()));
  X509* leaf = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  BIO_free(cert_bio);
  if (leaf == nullptr) {
    ERR_clear_error();
    return TlsFieldError(kCertField, absl::StrCat(cert_file, " holds no PEM certificate"));
  }
  BIO* key_bio = BIO_new_mem_buf(pem.key_pem.data(), static_cast<int>(pem.key_pem.size()));
  EVP_PKEY* private_key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  absl::Status result = absl::OkStatus();
  if (private_key == nullptr) {
    result = TlsFieldError(kKeyField, absl::StrCat(key_file, " holds no unencrypted PEM private key"));
  } else if (X509_check_private_key(leaf, private_key) != 1) {
    result = TlsFieldError(kKeyField, absl::StrCat(key_file, " does not match the certificate in ", cert_file));
  }
  ERR_clear_error();
  EVP_PKEY_free(private_key);
  X509_free(leaf);
  if (!result.ok()) return result;
  return pem;
}

absl::StatusOr<AgentServer> StartAgentServer(const AgentServerOptions& options, grpc::Service* service) {
  AgentServer out;
  grpc::ServerBuilder builder;
  int port = 0;
  if (!options.listen.empty()) {
    // Identity is proven inside every report either way (docs/security.md). TLS adds
    // confidentiality and lets guests verify the host; it is server-authenticated only, so no
    // client certificate is requested. Without it the config only allows a loopback address.
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
      // Checked here, not only at config time: the PEMs must parse and the key must match.
      absl::StatusOr<AgentTlsPem> pem = LoadAgentTlsFiles(options.tls_cert_file, options.tls_key_file);
      if (!pem.ok()) return pem.status();
      grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      ssl.pem_key_cert_pairs.push_back({pem->key_pem, pem->cert_pem});
      credentials = grpc::SslServerCredentials(ssl);
      out.tls = true;
    }
    builder.AddListeningPort(options.listen, credentials, &port);
  }
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kAgentMaxReceiveMessageBytes);
  builder.SetMaxSendMessageSize(kAgentMaxSendMessageBytes);
  // An agent needs one stream per connection (it dials afresh for every stream); two leaves
  // room for a reconnect racing its old stream without letting one connection hog the limit.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 2);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 8 * 1024);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  // Idle connections (no stream) are closed after 60 s.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  // Agents ping every 30 s; tolerate pings down to 20 s apart.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 20'000);
  grpc::ResourceQuota quota("plimsoll-agent-listener");
  quota.Resize(static_cast<size_t>(options.memory_quota_bytes));
  builder.SetResourceQuota(quota);
  out.server = builder.BuildAndStart();
  if (options.listen.empty()) {
    if (out.server == nullptr) return absl::InternalError("agent ingest: cannot start the agent gRPC server");
    return out;
  }
  if (out.server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("agent.agent_listen: agent listener: cannot listen on ", options.listen));
  }
  out.address = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", port);
  return out;
}

}  // namespace plimsoll::server::agent
