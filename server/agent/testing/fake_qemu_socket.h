// Where QEMU would listen for the host end of one domain's virtio-serial channel
// (<channel type='unix'><source mode='bind' path=.../>): a listening unix socket at the path a
// FakeHypervisor's channel XML names, for the daemon-side channel tests and benchmarks. What
// the virtio-serial connector connects to it is the guest end of the channel (FakeGuest speaks
// on it).
#ifndef PLIMSOLL_SERVER_AGENT_TESTING_FAKE_QEMU_SOCKET_H_
#define PLIMSOLL_SERVER_AGENT_TESTING_FAKE_QEMU_SOCKET_H_

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace plimsoll::server::agent::testing {

// Not thread-safe; one owner.
class FakeQemuSocket {
 public:
  // Listens at `path` (an old file there is removed first). A failure is printed to stderr and
  // kept in error(); Accept then returns -1, so a test fails where it waits for the daemon.
  explicit FakeQemuSocket(const std::string& path, int backlog = 4) : path_(path) {
    unlink(path.c_str());
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path)) {
      Fail(absl::StrCat("path is ", path.size(), " bytes, above the unix limit"));
      return;
    }
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      Fail(absl::StrCat("socket: ", strerror(errno)));
      return;
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Fail(absl::StrCat("bind: ", strerror(errno)));
    } else if (listen(fd_, backlog) != 0) {
      Fail(absl::StrCat("listen: ", strerror(errno)));
    }
  }
  ~FakeQemuSocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  FakeQemuSocket(const FakeQemuSocket&) = delete;
  FakeQemuSocket& operator=(const FakeQemuSocket&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // The listening socket, for a caller that polls many of them at once (then Accept(zero)).
  int fd() const { return fd_; }

  // The host's next connection (the guest end of the channel), non-blocking as gRPC wants it,
  // or -1 after `timeout` (or when not listening).
  int Accept(absl::Duration timeout) {
    if (!ok()) return -1;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) return -1;
    return accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  }

 private:
  void Fail(const std::string& why) {
    error_ = absl::StrCat("fake QEMU socket ", path_, ": ", why);
    std::fprintf(stderr, "%s\n", error_.c_str());
  }

  std::string path_;
  std::string error_;
  int fd_ = -1;
};

}  // namespace plimsoll::server::agent::testing

#endif  // PLIMSOLL_SERVER_AGENT_TESTING_FAKE_QEMU_SOCKET_H_
