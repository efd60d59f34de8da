#include "server/agent/agent_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"

namespace plimsoll::server::agent {

void ConfigureAgentServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kAgentMaxReceiveMessageBytes);
  builder->SetMaxSendMessageSize(kAgentMaxSendMessageBytes);
  // An agent needs one stream per connection (it dials afresh for every stream); two leaves
  // room for a reconnect racing its old stream without letting one connection hog the limit.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 2);
  builder->AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 8 * 1024);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 60'000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  // Agents ping every 30 s; tolerate pings down to 20 s apart.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 20'000);
  grpc::ResourceQuota quota("plimsoll-agent-listener");
  quota.Resize(64 << 20);
  builder->SetResourceQuota(quota);
}

absl::StatusOr<std::unique_ptr<AgentServer>> AgentServer::Start(const AgentServerOptions& options,
                                                                AgentService* service) {
  std::unique_ptr<AgentServer> s(new AgentServer());
  s->service_ = service;
  grpc::ServerBuilder builder;
  // No TLS: the identity proof is inside every report (docs/security.md); the listener is on
  // loopback or a host-only bridge.
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(service);
  ConfigureAgentServerBuilder(&builder);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("agent listener: cannot listen on ", options.listen));
  }
  s->address_ = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", s->port_);
  const absl::Duration every = options.sweep_every;
  s->sweeper_ = std::thread([server = s.get(), every] { server->SweepLoop(every); });
  return s;
}

AgentServer::~AgentServer() { Shutdown(); }

void AgentServer::SweepLoop(absl::Duration every) {
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), every)) {
    mu_.Unlock();
    service_->Sweep();
    mu_.Lock();
  }
}

void AgentServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    server_->Wait();
  }
}

}  // namespace plimsoll::server::agent
