#include "server/agent/agent_ingest.h"

#include <sys/socket.h>
// After sys/socket.h: it needs sa_family_t.
#include <linux/vm_sockets.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/server_posix.h"
#include "server/agent/agent_server.h"

namespace plimsoll::server::agent {
namespace {

// `status` with its message behind "FIELD: " (and `hint` after it).
absl::Status NameField(absl::string_view field, const absl::Status& status, absl::string_view hint = "") {
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message(), hint));
}

}  // namespace

AgentIngest::AgentIngest(AgentIngestOptions options, AgentStore* store, Clock* clock)
    : options_(std::move(options)), store_(store), clock_(clock) {
  AgentServiceOptions so = options_.streams;
  so.origin = [this](const std::string& peer) { return Origin(peer); };
  service_ = std::make_unique<AgentService>(store_, clock_, so);
}

AgentIngest::~AgentIngest() { Shutdown(); }

absl::Status AgentIngest::Start(hypervisor::Hypervisor* hypervisor, std::unique_ptr<VsockListener> vsock_listener) {
  const int transports = (options_.tcp_listen.empty() ? 0 : 1) + (options_.virtio_serial.has_value() ? 1 : 0) +
                         (options_.vsock.has_value() ? 1 : 0);
  AgentServerOptions so;
  so.listen = options_.tcp_listen;
  so.tls_cert_file = options_.tls_cert_file;
  so.tls_key_file = options_.tls_key_file;
  // What each transport had when each had a server of its own.
  so.memory_quota_bytes = kAgentMemoryQuotaPerTransport * std::max(1, transports);
  absl::StatusOr<AgentServer> server = StartAgentServer(so, service_.get());
  if (!server.ok()) return server.status();
  server_ = std::move(server->server);
  tcp_address_ = server->address;
  tls_ = server->tls;

  if (options_.virtio_serial.has_value()) {
    absl::StatusOr<std::unique_ptr<VirtioSerialConnector>> c =
        VirtioSerialConnector::Start(hypervisor, store_, clock_, this, *options_.virtio_serial);
    if (!c.ok()) return NameField("agent.channel_name", c.status());
    absl::MutexLock l(&mu_);
    virtio_serial_ = *std::move(c);
  }
  if (options_.vsock.has_value()) {
    if (vsock_listener == nullptr) {
      absl::StatusOr<std::unique_ptr<VsockListener>> listened = ListenVsock(VMADDR_CID_ANY, options_.vsock->port);
      if (!listened.ok()) {
        return NameField("agent.vsock_port", listened.status(),
                         " (vsock needs the vhost_vsock module: /dev/vhost-vsock)");
      }
      vsock_listener = *std::move(listened);
    }
    absl::StatusOr<std::unique_ptr<VsockConnector>> v =
        VsockConnector::Start(hypervisor, clock_, this, std::move(vsock_listener), *options_.vsock);
    if (!v.ok()) return NameField("agent.vsock_port", v.status());
    absl::MutexLock l(&mu_);
    vsock_ = *std::move(v);
  }
  sweeper_ = std::thread([this] { SweepLoop(); });
  return absl::OkStatus();
}

void AgentIngest::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  Connector* connectors[2] = {nullptr, nullptr};
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    connectors[0] = virtio_serial_.get();
    connectors[1] = vsock_.get();
  }
  // No connector hands the server a connection after this.
  for (Connector* c : connectors) {
    if (c != nullptr) c->Stop();
  }
  if (sweeper_.joinable()) sweeper_.join();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    server_->Wait();
  }
  // Every stream has ended: the connectors may close their sockets now.
  std::unique_ptr<VirtioSerialConnector> virtio_serial;
  std::unique_ptr<VsockConnector> vsock;
  {
    absl::MutexLock l(&mu_);
    virtio_serial = std::move(virtio_serial_);
    vsock = std::move(vsock_);
  }
  virtio_serial.reset();
  vsock.reset();
  bindings_.Clear();
}

void AgentIngest::Wake() {
  absl::MutexLock l(&mu_);
  if (virtio_serial_ != nullptr) virtio_serial_->Wake();
  if (vsock_ != nullptr) vsock_->Wake();
}

AgentIngestCounters AgentIngest::counters() const {
  AgentIngestCounters c;
  c.streams = service_->counters();
  absl::MutexLock l(&mu_);
  if (virtio_serial_ != nullptr) c.virtio_serial = virtio_serial_->counters();
  if (vsock_ != nullptr) c.vsock = vsock_->counters();
  return c;
}

std::optional<StreamOrigin> AgentIngest::Origin(const std::string& peer) const {
  const PeerLookup found = bindings_.Lookup(peer);
  switch (found.kind) {
    case PeerKind::kNetwork:
      // Only the TCP listener makes such connections.
      if (options_.tcp_listen.empty()) return std::nullopt;
      return StreamOrigin{Transport::kTcp, std::string()};
    case PeerKind::kUnbound:
      return std::nullopt;
    case PeerKind::kBound:
      // The connector outlives every stream on its connections (Shutdown).
      if (found.binding.connector != nullptr && !found.binding.connector->Vouches(found.binding)) return std::nullopt;
      return StreamOrigin{found.binding.transport, found.binding.uuid};
  }
  return std::nullopt;
}

void AgentIngest::Sweep() { service_->Sweep(); }

const VirtioSerialConnector* AgentIngest::virtio_serial() const {
  absl::MutexLock l(&mu_);
  return virtio_serial_.get();
}

const VsockConnector* AgentIngest::vsock() const {
  absl::MutexLock l(&mu_);
  return vsock_.get();
}

uint64_t AgentIngest::Serve(int fd, ConnectionBinding binding) {
  // Bound before gRPC sees the descriptor: its first stream asks for this entry.
  const uint64_t generation = bindings_.Bind(fd, std::move(binding));
  // The server is there: Start makes it before any connector, Shutdown stops every connector
  // before it shuts the server down. gRPC owns the descriptor from here on.
  grpc::AddInsecureChannelFromFd(server_.get(), fd);
  return generation;
}

void AgentIngest::Unbind(int fd, uint64_t generation) { bindings_.Unbind(fd, generation); }

void AgentIngest::SweepLoop() {
  absl::MutexLock l(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.sweep_every)) {
    mu_.Unlock();
    service_->Sweep();
    mu_.Lock();
  }
}

std::string DescribeAgentIngest(const AgentIngest* ingest) {
  if (ingest == nullptr) return "agent=off agent_channels=off agent_vsock=off";
  std::string out = ingest->tcp_address().empty()
                        ? std::string("agent=off")
                        : absl::StrCat("agent=", ingest->tcp_address(),
                                       ingest->tls() ? " agent_transport=tls" : " agent_transport=plaintext");
  const VirtioSerialConnector* serial = ingest->virtio_serial();
  absl::StrAppend(&out, " agent_channels=",
                  serial == nullptr ? std::string("off")
                                    : absl::StrCat("virtio-serial:", serial->options().channel_name,
                                                   serial->options().autoattach ? " autoattach" : ""));
  const VsockConnector* vsock = ingest->vsock();
  absl::StrAppend(&out, " agent_vsock=", vsock == nullptr ? std::string("off") : absl::StrCat("port:", vsock->port()));
  return out;
}

}  // namespace plimsoll::server::agent
