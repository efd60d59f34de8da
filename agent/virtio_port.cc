#include "agent/virtio_port.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/small_file.h"

namespace plimsoll::agent {
namespace {

// The type URL of the payload that marks "the host end is not connected" (IsHostEndAbsent).
constexpr char kHostEndAbsentPayload[] = "plimsoll.agent/host_end_absent";

// One direction's bytes in flight.
struct Pending {
  std::string bytes;
  size_t sent = 0;
  bool empty() const { return sent == bytes.size(); }
};

// Writes what it can of `p` to `fd` (non-blocking). False on a hard error. On the socket,
// MSG_NOSIGNAL: gRPC closing its end must end the bridge, not kill the agent with SIGPIPE.
bool WriteSome(int fd, Pending& p, bool socket) {
  while (!p.empty()) {
    const char* data = p.bytes.data() + p.sent;
    const size_t size = p.bytes.size() - p.sent;
    const ssize_t n = socket ? send(fd, data, size, MSG_NOSIGNAL) : write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    p.sent += static_cast<size_t>(n);
  }
  p.bytes.clear();
  p.sent = 0;
  return true;
}

// Reads what is there into `p`. False at end of stream or on an error (a pty's EIO when its
// master closed counts as the end, as a port's hangup does).
bool ReadSome(int fd, Pending& p) {
  char buf[16 * 1024];
  const ssize_t n = read(fd, buf, sizeof(buf));
  if (n > 0) {
    p.bytes.append(buf, static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  return false;
}

// Moves bytes until either side ends, then closes both.
void Bridge(int port, int sock, std::shared_ptr<std::atomic<bool>> alive) {
  Pending to_sock;  // from the host, for gRPC
  Pending to_port;  // from gRPC, for the host
  constexpr size_t kMaxPending = 256 * 1024;
  while (true) {
    pollfd p[2] = {{port, 0, 0}, {sock, 0, 0}};
    if (to_sock.bytes.size() < kMaxPending) p[0].events |= POLLIN;
    if (!to_port.empty()) p[0].events |= POLLOUT;
    if (to_port.bytes.size() < kMaxPending) p[1].events |= POLLIN;
    if (!to_sock.empty()) p[1].events |= POLLOUT;
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    // The port: a hangup with nothing left to read makes read() return 0.
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !ReadSome(port, to_sock)) break;
    if ((p[0].revents & POLLOUT) != 0 && !WriteSome(port, to_port, false)) break;
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !ReadSome(sock, to_port)) break;
    if (!to_sock.empty() && !WriteSome(sock, to_sock, true)) break;
    if ((p[0].revents & POLLNVAL) != 0 || (p[1].revents & POLLNVAL) != 0) break;
  }
  close(port);
  close(sock);
  if (alive != nullptr) alive->store(false);
}

}  // namespace

absl::StatusOr<std::string> FindVirtioPort(absl::string_view root, absl::string_view name) {
  const std::string link = absl::StrCat(root, "/dev/virtio-ports/", name);
  struct stat st{};
  if (stat(link.c_str(), &st) == 0) return link;
  const std::string sys = absl::StrCat(root, "/sys/class/virtio-ports");
  DIR* dir = opendir(sys.c_str());
  if (dir != nullptr) {
    std::string found;
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      absl::StatusOr<std::string> text = ReadSmallFile(absl::StrCat(sys, "/", e->d_name, "/name"), 4096);
      if (text.ok() && absl::StripAsciiWhitespace(*text) == name) {
        found = absl::StrCat(root, "/dev/", e->d_name);
        break;
      }
    }
    closedir(dir);
    if (!found.empty()) return found;
  }
  return absl::NotFoundError(absl::StrCat("no virtio-serial port named ", name, " (neither ", link, " nor a ", sys,
                                          "/*/name holding it; is the virtio_console module loaded and does "
                                          "the domain have the channel?)"));
}

absl::Status HostEndAbsentError(const std::string& device) {
  absl::Status absent = absl::FailedPreconditionError(absl::StrCat(
      device, ": the host end is not connected (plimsolld not running, or not connected to this guest's "
              "channel yet)"));
  absent.SetPayload(kHostEndAbsentPayload, absl::Cord("1"));
  return absent;
}

bool IsHostEndAbsent(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && status.GetPayload(kHostEndAbsentPayload).has_value();
}

absl::StatusOr<int> OpenVirtioPortBridge(const std::string& device, absl::Duration timeout,
                                         std::shared_ptr<std::atomic<bool>> alive) {
  const absl::Time deadline = absl::Now() + timeout;
  int port = -1;
  int last_errno = 0;
  while (true) {
    port = open(device.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (port >= 0) break;
    last_errno = errno;
    // EBUSY: the previous connection's bridge still holds the port for a moment.
    if (last_errno != EBUSY || absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("open ", device, ": ", strerror(last_errno)));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  // The host end: no client connected shows as POLLHUP (level-triggered), so wait by polling.
  while (true) {
    pollfd p{port, POLLOUT, 0};
    const int n = poll(&p, 1, 0);
    if (n >= 0 && (p.revents & POLLHUP) == 0) break;  // no events at all: connected, just full
    if (absl::Now() >= deadline) {
      close(port);
      return HostEndAbsentError(device);
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  int pair[2];
  // Non-blocking both: the bridge polls, and gRPC's endpoint expects it (a blocking descriptor
  // stalls its reads).
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    const int error = errno;
    close(port);
    return absl::UnavailableError(absl::StrCat("socketpair: ", strerror(error)));
  }
  if (alive != nullptr) alive->store(true);
  std::thread(Bridge, port, pair[0], std::move(alive)).detach();
  return pair[1];
}

}  // namespace plimsoll::agent
