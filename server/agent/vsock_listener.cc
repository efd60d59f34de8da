#include "server/agent/vsock_listener.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
// After sys/socket.h: it needs sa_family_t.
#include <linux/vm_sockets.h>

#include <atomic>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::server::agent {
namespace {

class AfVsockListener final : public VsockListener {
 public:
  AfVsockListener(int listen_fd, int wake_fd, uint32_t port) : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port) {}
  ~AfVsockListener() override {
    close(listen_fd_);
    close(wake_fd_);
  }

  absl::StatusOr<VsockConnection> Accept() override {
    while (true) {
      if (shut_down_.load()) return absl::CancelledError("vsock listener shut down");
      // The eventfd, not close() of the listening socket, wakes a blocked accept: closing a
      // descriptor another thread waits on is a race (the number may be reused meanwhile).
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return absl::InternalError(absl::StrCat("vsock listener: poll: ", strerror(errno)));
      }
      if (p[1].revents != 0 || shut_down_.load()) return absl::CancelledError("vsock listener shut down");
      sockaddr_vm peer{};
      socklen_t len = sizeof(peer);
      const int fd =
          accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        // A peer that gave up before we took it, or a spurious wake: nothing to report.
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
        const int error = errno;
        if (error == EMFILE || error == ENFILE) {
          return absl::ResourceExhaustedError(absl::StrCat("vsock accept: ", strerror(error)));
        }
        return absl::UnavailableError(absl::StrCat("vsock accept: ", strerror(error)));
      }
      if (len < static_cast<socklen_t>(sizeof(peer)) || peer.svm_family != AF_VSOCK) {
        // Cannot happen on an AF_VSOCK socket; without a CID there is no identity.
        close(fd);
        return absl::InternalError("vsock accept: the peer address is not a sockaddr_vm");
      }
      return VsockConnection{fd, peer.svm_cid};
    }
  }

  void Shutdown() override {
    shut_down_.store(true);
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

  uint32_t port() const override { return port_; }

 private:
  const int listen_fd_;
  const int wake_fd_;
  const uint32_t port_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<VsockListener>> ListenVsock(uint32_t cid, uint32_t port) {
  const int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("vsock socket: ", strerror(errno)));
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = cid;
  addr.svm_port = port;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("vsock bind cid=", cid, " port=", port, ": ", strerror(error)));
  }
  if (listen(fd, 128) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("vsock listen: ", strerror(error)));
  }
  sockaddr_vm bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("vsock getsockname: ", strerror(error)));
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("eventfd: ", strerror(error)));
  }
  return std::unique_ptr<VsockListener>(new AfVsockListener(fd, wake, bound.svm_port));
}

}  // namespace plimsoll::server::agent
