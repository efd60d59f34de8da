#include "agent/dial.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "agent/virtio_port.h"

namespace plimsoll::agent {
namespace {

grpc::ChannelArguments AgentChannelArguments() {
  grpc::ChannelArguments args;
  // Our own backoff paces attempts; a private pool keeps gRPC's global subchannel backoff out.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // A half-open connection (host rebooted, NAT state lost) is found within ~40 s even when the
  // stream is blocked; the daemon permits pings this often (server/agent/agent_server.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Acks are tiny; refuse anything large from a confused or hostile peer.
  args.SetMaxReceiveMessageSize(64 * 1024);
  return args;
}

// Why a channel in TRANSIENT_FAILURE failed. grpc::Channel does not expose the last connection
// error, but a fail-fast call on such a channel fails at once with it ("failed to connect to all
// addresses; last error: ... Ssl handshake failed ... CERTIFICATE_VERIFY_FAILED"). The call
// never leaves the process: nothing is connected. Empty when no reason came back.
std::string LastConnectError(grpc::Channel* channel) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_wait_for_ready(false);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, "/plimsoll.v1.AgentChannel/ConnectProbe", request, &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  return status.error_message();
}

absl::Status WaitReady(grpc::Channel* channel, absl::Duration timeout, absl::string_view what, bool tls) {
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      const std::string reason = state == GRPC_CHANNEL_TRANSIENT_FAILURE ? LastConnectError(channel) : "";
      // A TLS listener closes a plaintext connection without a word; say what that may mean.
      const bool maybe_tls = !tls && absl::StrContains(reason, "Socket closed");
      return absl::UnavailableError(absl::StrCat("cannot connect to ", what, tls ? " (TLS)" : " (plaintext)",
                                                 reason.empty() ? "" : ": ", reason,
                                                 maybe_tls ? " (if plimsolld's agent listener uses TLS, the "
                                                             "agent needs --tls_ca_file)"
                                                           : ""));
    }
    if (!channel->WaitForStateChange(state, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("no connection to ", what, " within ", absl::FormatDuration(timeout)));
    }
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

// Connects an AF_VSOCK stream socket within `timeout`. Returns the fd or an error.
absl::StatusOr<int> ConnectVsock(uint32_t cid, uint32_t port, absl::Duration timeout) {
  const int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("vsock socket: ", strerror(errno)));
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = cid;
  addr.svm_port = port;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      const int error = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("vsock connect: ", strerror(error)));
    }
    pollfd p{fd, POLLOUT, 0};
    const int n = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    int error = 0;
    socklen_t len = sizeof(error);
    if (n <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("vsock connect: ", n == 0 ? "timed out" : strerror(error != 0 ? error : errno)));
    }
  }
  return fd;
}

}  // namespace

absl::StatusOr<ServerAddress> ParseServerAddress(absl::string_view text) {
  ServerAddress address;
  if (absl::StartsWith(text, "virtio-serial:")) {
    const absl::string_view name = text.substr(14);
    const bool valid = !name.empty() && name.size() <= 128 && name[0] != '.' &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
                       });
    if (!valid) {
      return absl::InvalidArgumentError(
          absl::StrCat("--server ", text, ": want virtio-serial:NAME (letters, digits, '.', '_', '-')"));
    }
    address.kind = ServerAddress::Kind::kVirtioSerial;
    address.port_name = std::string(name);
    return address;
  }
  if (absl::StartsWith(text, "vsock:")) {
    std::vector<absl::string_view> parts = absl::StrSplit(text.substr(6), ':');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &address.vsock_cid) ||
        !absl::SimpleAtoi(parts[1], &address.vsock_port)) {
      return absl::InvalidArgumentError(absl::StrCat("--server ", text, ": want vsock:CID:PORT"));
    }
    address.kind = ServerAddress::Kind::kVsock;
    return address;
  }
  const size_t colon = text.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 || !absl::SimpleAtoi(text.substr(colon + 1), &port) ||
      port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--server ", text, ": want host:port, vsock:CID:PORT or virtio-serial:NAME"));
  }
  address.kind = ServerAddress::Kind::kTcp;
  address.tcp_target = std::string(text);
  return address;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ServerAddress& address,
                                                    absl::Duration connect_timeout, const AgentTls& tls) {
  std::shared_ptr<grpc::Channel> channel;
  std::string what;
  if (address.kind == ServerAddress::Kind::kVirtioSerial) {
    if (tls.enabled()) {
      return absl::InvalidArgumentError("TLS is for TCP server addresses; a virtio-serial port is host-local");
    }
    what = absl::StrCat("virtio-serial:", address.port_name);
    absl::StatusOr<std::string> device = FindVirtioPort(address.virtio_root, address.port_name);
    if (!device.ok()) return absl::UnavailableError(device.status().message());
    // One HTTP/2 session per host connection: while the port's bridge lives, every attempt
    // gets the same channel. A new session started in the middle of the one plimsolld is
    // reading would be taken for garbage and cost both sides a reconnection.
    static absl::Mutex mu(absl::kConstInit);
    static std::string* cached_device ABSL_GUARDED_BY(mu) = nullptr;
    static std::shared_ptr<grpc::Channel>* cached ABSL_GUARDED_BY(mu) = nullptr;
    static std::shared_ptr<std::atomic<bool>>* cached_alive ABSL_GUARDED_BY(mu) = nullptr;
    absl::MutexLock l(&mu);
    if (cached != nullptr && *cached_device == *device && (*cached_alive)->load()) return *cached;
    auto alive = std::make_shared<std::atomic<bool>>(false);
    absl::StatusOr<int> fd = OpenVirtioPortBridge(*device, connect_timeout, alive);
    if (!fd.ok()) return fd.status();
    // gRPC owns the socketpair end from here on; the bridge thread owns the port. A channel on a
    // descriptor is not a client channel, so there is no connectivity state to wait for.
    std::shared_ptr<grpc::Channel> made = grpc::CreateCustomInsecureChannelFromFd(what, *fd, AgentChannelArguments());
    if (cached == nullptr) {
      cached_device = new std::string();
      cached = new std::shared_ptr<grpc::Channel>();
      cached_alive = new std::shared_ptr<std::atomic<bool>>();
    }
    *cached_device = *device;
    *cached = made;
    *cached_alive = alive;
    return made;
  }
  if (address.kind == ServerAddress::Kind::kVsock) {
    if (tls.enabled()) {
      return absl::InvalidArgumentError("TLS is for TCP server addresses; vsock is host-local and stays plaintext");
    }
    what = absl::StrCat("vsock:", address.vsock_cid, ":", address.vsock_port);
    absl::StatusOr<int> fd = ConnectVsock(address.vsock_cid, address.vsock_port, connect_timeout);
    if (!fd.ok()) return absl::Status(fd.status().code(), absl::StrCat(what, ": ", fd.status().message()));
    // gRPC owns the descriptor from here on. Like the virtio-serial channel above, a channel on
    // a descriptor has no connectivity state (gRPC answers SHUTDOWN), so WaitReady is skipped.
    return grpc::CreateCustomInsecureChannelFromFd(what, *fd, AgentChannelArguments());
  } else {
    what = address.tcp_target;
    grpc::ChannelArguments args = AgentChannelArguments();
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (tls.enabled()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = tls.ca_pem;  // only this CA, never the system's roots
      credentials = grpc::SslCredentials(ssl);
      if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
    } else {
      credentials = grpc::InsecureChannelCredentials();
    }
    channel = grpc::CreateCustomChannel(address.tcp_target, credentials, args);
  }
  if (absl::Status s = WaitReady(channel.get(), connect_timeout, what, tls.enabled()); !s.ok()) return s;
  return channel;
}

}  // namespace plimsoll::agent
