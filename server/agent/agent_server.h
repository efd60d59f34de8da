// The agent side's one grpc::Server (separate from the control API, because its clients are
// untrusted guests): it serves only AgentChannel, with the transport limits the agent channel
// needs, on the TCP listener when there is one and on every connection the connectors hand it
// as a descriptor (grpc::AddInsecureChannelFromFd). AgentIngest starts it.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace plimsoll::server::agent {

// Largest frame the transport accepts. Above ValidatorOptions::max_report_bytes (4 KiB) so that
// a frame between the two is still read and counted as "oversized"; frames above this are
// refused by gRPC itself (the stream ends with RESOURCE_EXHAUSTED, not counted per reason).
inline constexpr int kAgentMaxReceiveMessageBytes = 16 * 1024;
// Acks are ~20 bytes.
inline constexpr int kAgentMaxSendMessageBytes = 1024;

// The transport's memory for one transport's connections. The ingest gives its server this
// much per transport it serves.
inline constexpr int64_t kAgentMemoryQuotaPerTransport = 64 << 20;

struct AgentServerOptions {
  // The TCP listener: "127.0.0.1:9588" (QEMU user networking reaches it as 10.0.2.2:9588), a
  // bridge address, or port 0 for any free port (tests). Empty: no listening port.
  std::string listen;
  // TLS on the TCP listener (both set): the files named by agent.agent_tls_cert_file and
  // agent.agent_tls_key_file, checked by LoadAgentTlsFiles. The listener then speaks TLS only
  // and asks for no client certificate (guests prove who they are with their token, inside
  // every report). Both empty: plaintext, which the config allows on loopback only
  // (server/config/config.cc).
  std::string tls_cert_file;
  std::string tls_key_file;
  int64_t memory_quota_bytes = kAgentMemoryQuotaPerTransport;
};

// The PEM text of the agent listener's certificate and key, read from the files named by
// agent.agent_tls_cert_file / agent.agent_tls_key_file, after checking that the certificate
// parses, the key parses (unencrypted) and matches it. Errors name the config field and file.
struct AgentTlsPem {
  std::string cert_pem;
  std::string key_pem;
};
absl::StatusOr<AgentTlsPem> LoadAgentTlsFiles(const std::string& cert_file, const std::string& key_file);

// A started agent server.
struct AgentServer {
  std::unique_ptr<grpc::Server> server;
  // "host:port" of the TCP listener with the port actually bound; empty without one.
  std::string address;
  bool tls = false;
};

// Builds and starts the server serving `service`, which must outlive it. With a listener:
// UNAVAILABLE when the address cannot be bound; the TLS files' errors name their config field.
// Without one: INTERNAL if gRPC cannot start the server.
absl::StatusOr<AgentServer> StartAgentServer(const AgentServerOptions& options, grpc::Service* service);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_
