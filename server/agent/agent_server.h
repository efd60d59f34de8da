// The agent listener: a grpc::Server of its own (separate from the control API, because its
// clients are untrusted guests) serving only AgentChannel, with the transport limits the agent
// channel needs, and a thread that runs AgentService::Sweep every second.
//
// Anyone building their own server for AgentService must apply ConfigureAgentServerBuilder
// (above all the receive limit kAgentMaxReceiveMessageBytes) and call Sweep() periodically.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/agent/agent_service.h"

namespace plimsoll::server::agent {

// Largest frame the transport accepts. Above ValidatorOptions::max_report_bytes (4 KiB) so that
// a frame between the two is still read and counted as "oversized"; frames above this are
// refused by gRPC itself (the stream ends with RESOURCE_EXHAUSTED, not counted per reason).
inline constexpr int kAgentMaxReceiveMessageBytes = 16 * 1024;
// Acks are ~20 bytes.
inline constexpr int kAgentMaxSendMessageBytes = 1024;

// Applies the agent listener's limits: message sizes, at most 2 streams per connection,
// 8 KiB of metadata, a 10 s handshake deadline, idle connections (no stream) closed after
// 60 s, keepalive (the server pings every 60 s; agents may ping every 20 s or slower), and a
// 64 MiB memory quota for the transport.
void ConfigureAgentServerBuilder(grpc::ServerBuilder* builder);

struct AgentServerOptions {
  // "127.0.0.1:9588" (QEMU user networking reaches it as 10.0.2.2:9588), a bridge address, or
  // port 0 for any free port (tests).
  std::string listen = "127.0.0.1:9588";
  absl::Duration sweep_every = absl::Seconds(1);
  // TLS (both set): the server's certificate chain and private key, PEM text. The listener then
  // speaks TLS only and asks for no client certificate (guests prove who they are with their
  // token, inside every report). Both empty: plaintext, which the config allows on loopback
  // only (server/config/config.cc). One without the other is INVALID_ARGUMENT at Start.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

// The PEM text of the agent listener's certificate and key, read from the files named by
// agent.agent_tls_cert_file / agent.agent_tls_key_file, after checking that the certificate
// parses, the key parses (unencrypted) and matches it. Errors name the config field and file.
struct AgentTlsPem {
  std::string cert_pem;
  std::string key_pem;
};
absl::StatusOr<AgentTlsPem> LoadAgentTlsFiles(const std::string& cert_file, const std::string& key_file);

class AgentServer {
 public:
  // Builds and starts the server. `service` must outlive the AgentServer. UNAVAILABLE when the
  // address cannot be bound; INVALID_ARGUMENT for half a TLS pair.
  static absl::StatusOr<std::unique_ptr<AgentServer>> Start(const AgentServerOptions& options,
                                                            AgentService* service);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  bool tls() const { return tls_; }

  // Stops accepting, gives open streams `grace` to end, then cancels them, and waits. After
  // it returns no service method runs. Idempotent; the destructor calls it.
  void Shutdown(absl::Duration grace = absl::Milliseconds(500));

 private:
  AgentServer() = default;
  void SweepLoop(absl::Duration every);

  AgentService* service_ = nullptr;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  bool tls_ = false;
  std::thread sweeper_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ = false;  // Shutdown() has run (called from the owner's thread only)
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_SERVER_H_
