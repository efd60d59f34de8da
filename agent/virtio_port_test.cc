// The virtio-serial bridge on a pty, which behaves like a port where it matters here: a
// character device (no sendmsg), bytes both ways, and a hangup when the other end (the pty
// master, standing for the host) goes away.
#include "agent/virtio_port.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

std::string ReadSome(int fd, size_t n, absl::Duration timeout) {
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (out.size() < n && absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    const ssize_t got = read(fd, buf, sizeof(buf));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

class Pty {
 public:
  Pty() {
    master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    EXPECT_GE(master_, 0);
    EXPECT_EQ(grantpt(master_), 0);
    EXPECT_EQ(unlockpt(master_), 0);
    slave_path_ = ptsname(master_);
    // Raw: the line discipline must pass bytes unchanged, as a virtio port does.
    const int slave = open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    termios t{};
    tcgetattr(slave, &t);
    cfmakeraw(&t);
    tcsetattr(slave, TCSANOW, &t);
    close(slave);
  }
  ~Pty() { CloseMaster(); }
  void CloseMaster() {
    if (master_ >= 0) close(master_);
    master_ = -1;
  }
  int master() const { return master_; }
  const std::string& slave_path() const { return slave_path_; }

 private:
  int master_ = -1;
  std::string slave_path_;
};

TEST(FindVirtioPort, UdevLinkThenSysfsName) {
  const std::string root = absl::StrCat(::testing::TempDir(), "/virtio-root-", getpid());
  ASSERT_EQ(system(absl::StrCat("rm -rf ", root, " && mkdir -p ", root, "/dev/virtio-ports ", root,
                                "/sys/class/virtio-ports/vport1p1 ", root, "/sys/class/virtio-ports/vport1p2")
                       .c_str()),
            0);
  std::ofstream(root + "/sys/class/virtio-ports/vport1p1/name") << "org.qemu.guest_agent.0\n";
  std::ofstream(root + "/sys/class/virtio-ports/vport1p2/name") << "org.plimsoll.agent.0\n";
  absl::StatusOr<std::string> by_sysfs = FindVirtioPort(root, "org.plimsoll.agent.0");
  ASSERT_TRUE(by_sysfs.ok()) << by_sysfs.status();
  EXPECT_EQ(*by_sysfs, root + "/dev/vport1p2");

  std::ofstream(root + "/dev/virtio-ports/org.plimsoll.agent.0") << "";
  absl::StatusOr<std::string> by_link = FindVirtioPort(root, "org.plimsoll.agent.0");
  ASSERT_TRUE(by_link.ok());
  EXPECT_EQ(*by_link, root + "/dev/virtio-ports/org.plimsoll.agent.0");

  absl::StatusOr<std::string> missing = FindVirtioPort(root, "org.plimsoll.agent.9");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("virtio_console"), absl::string_view::npos);
}

TEST(VirtioPortBridge, CarriesBytesAndEndsOnHangup) {
  Pty pty;
  absl::StatusOr<int> fd = OpenVirtioPortBridge(pty.slave_path(), absl::Seconds(2));
  ASSERT_TRUE(fd.ok()) << fd.status();
  // gRPC's side is a socket: sendmsg works on it (it would not on the device itself).
  const char hello[] = "PRI * HTTP/2.0";
  ASSERT_EQ(send(*fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello) - 1));
  EXPECT_EQ(ReadSome(pty.master(), sizeof(hello) - 1, absl::Seconds(2)), hello);
  ASSERT_EQ(write(pty.master(), "settings", 8), 8);
  EXPECT_EQ(ReadSome(*fd, 8, absl::Seconds(2)), "settings");

  // The host end goes away: the bridge ends, and gRPC's side sees the connection close.
  pty.CloseMaster();
  pollfd p{*fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  char byte;
  EXPECT_EQ(read(*fd, &byte, 1), 0);
  close(*fd);
}

TEST(VirtioPortBridge, GrpcSideClosingReleasesThePort) {
  Pty pty;
  absl::StatusOr<int> fd = OpenVirtioPortBridge(pty.slave_path(), absl::Seconds(2));
  ASSERT_TRUE(fd.ok()) << fd.status();
  // While the bridge holds the port, the master sees no hangup.
  pollfd held{pty.master(), POLLIN, 0};
  ASSERT_EQ(poll(&held, 1, 100), 0) << "revents=" << held.revents;
  close(*fd);
  // The bridge closes its port descriptor: with no opener left, the master reads EIO/hangup.
  pollfd p{pty.master(), POLLIN, 0};
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  bool hung_up = false;
  while (absl::Now() < deadline && !hung_up) {
    if (poll(&p, 1, 50) == 1 && (p.revents & POLLHUP) != 0) hung_up = true;
  }
  EXPECT_TRUE(hung_up);
}

TEST(VirtioPortBridge, MissingDeviceIsUnavailable) {
  absl::StatusOr<int> fd = OpenVirtioPortBridge("/nonexistent/vport9p9", absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsUnavailable(fd.status()));
  EXPECT_FALSE(IsHostEndAbsent(fd.status())) << "a missing port is backed off from, not watched";
}

// The absent host end is told apart from every other failure: the agent watches on without a
// backoff only for it (a pty cannot stand for a port without its host end here: a hung-up pty
// does not open again; test_channel_e2e.py's test_1 sees the real port's wait).
TEST(VirtioPortBridge, AnAbsentHostEndIsMarkedAsSuch) {
  const absl::Status absent = HostEndAbsentError("/dev/vport1p1");
  EXPECT_TRUE(absl::IsFailedPrecondition(absent));
  EXPECT_TRUE(IsHostEndAbsent(absent));
  EXPECT_NE(std::string(absent.message()).find("the host end is not connected"), std::string::npos);
  EXPECT_FALSE(IsHostEndAbsent(absl::FailedPreconditionError(absent.message())));
  EXPECT_FALSE(IsHostEndAbsent(absl::UnavailableError("no port")));
  EXPECT_FALSE(IsHostEndAbsent(absl::OkStatus()));
}

}  // namespace
}  // namespace plimsoll::agent
