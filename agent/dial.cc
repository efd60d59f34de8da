#include "agent/dial.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

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

absl::Status WaitReady(grpc::Channel* channel, absl::Duration timeout, absl::string_view what) {
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", what));
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
    return absl::InvalidArgumentError(absl::StrCat("--server ", text, ": want host:port or vsock:CID:PORT"));
  }
  address.kind = ServerAddress::Kind::kTcp;
  address.tcp_target = std::string(text);
  return address;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const ServerAddress& address,
                                                    absl::Duration connect_timeout) {
  std::shared_ptr<grpc::Channel> channel;
  std::string what;
  if (address.kind == ServerAddress::Kind::kVsock) {
    what = absl::StrCat("vsock:", address.vsock_cid, ":", address.vsock_port);
    absl::StatusOr<int> fd = ConnectVsock(address.vsock_cid, address.vsock_port, connect_timeout);
    if (!fd.ok()) return absl::Status(fd.status().code(), absl::StrCat(what, ": ", fd.status().message()));
    // gRPC owns the descriptor from here on.
    channel = grpc::CreateCustomInsecureChannelFromFd(what, *fd, AgentChannelArguments());
  } else {
    what = address.tcp_target;
    channel = grpc::CreateCustomChannel(address.tcp_target, grpc::InsecureChannelCredentials(),
                                        AgentChannelArguments());
  }
  if (absl::Status s = WaitReady(channel.get(), connect_timeout, what); !s.ok()) return s;
  return channel;
}

}  // namespace plimsoll::agent
