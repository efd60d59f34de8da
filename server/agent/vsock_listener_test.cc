// The AF_VSOCK listener on real sockets. Where the kernel has no vsock at all the tests skip
// saying so; the accept test needs vsock_loopback (CID 1), which hosts often lack (a guest with
// only virtio-vsock, like the development VM, cannot bind CID 1: EADDRNOTAVAIL).
#include "server/agent/vsock_listener.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
// After sys/socket.h: it needs sa_family_t.
#include <linux/vm_sockets.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

bool KernelHasVsock() {
  const int fd = socket(AF_VSOCK, SOCK_STREAM, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

TEST(VsockListenerTest, ListensOnAnyCidAndShutdownWakesAccept) {
  if (!KernelHasVsock()) GTEST_SKIP() << "this kernel has no AF_VSOCK (socket: " << strerror(errno) << ")";
  absl::StatusOr<std::unique_ptr<VsockListener>> listener = ListenVsock(VMADDR_CID_ANY, VMADDR_PORT_ANY);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const uint32_t port = (*listener)->port();
  EXPECT_NE(port, static_cast<uint32_t>(VMADDR_PORT_ANY)) << "the kernel's chosen port was not read back";
  // A second listener on the same port is refused, naming why.
  absl::StatusOr<std::unique_ptr<VsockListener>> again = ListenVsock(VMADDR_CID_ANY, port);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsUnavailable(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("bind"), std::string::npos) << again.status();

  absl::Status accepted;
  std::thread t([&] { accepted = (*listener)->Accept().status(); });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time shut = absl::Now();
  (*listener)->Shutdown();
  t.join();
  EXPECT_LT(absl::Now() - shut, absl::Seconds(2));
  EXPECT_TRUE(absl::IsCancelled(accepted)) << accepted;
  EXPECT_TRUE(absl::IsCancelled((*listener)->Accept().status())) << "Accept after Shutdown must not block";
}

TEST(VsockListenerTest, LoopbackAcceptGivesThePeersCid) {
  if (!KernelHasVsock()) GTEST_SKIP() << "this kernel has no AF_VSOCK";
  absl::StatusOr<std::unique_ptr<VsockListener>> listener = ListenVsock(VMADDR_CID_LOCAL, VMADDR_PORT_ANY);
  if (!listener.ok() && listener.status().message().find("Cannot assign requested address") != std::string::npos) {
    GTEST_SKIP() << "no vsock_loopback transport here (bind to CID 1: " << listener.status().message()
                 << "); the accept path is covered with injected sockets in agent_vsock_test";
  }
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int client = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0) << strerror(errno);
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_LOCAL;
  addr.svm_port = (*listener)->port();
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  absl::StatusOr<VsockConnection> c = (*listener)->Accept();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cid, static_cast<uint32_t>(VMADDR_CID_LOCAL));
  // Non-blocking, as gRPC wants it, and connected to the client.
  EXPECT_EQ(read(c->fd, &addr, 1), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(write(client, "x", 1), 1);
  pollfd p{c->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  char byte = 0;
  EXPECT_EQ(read(c->fd, &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  close(c->fd);
  close(client);
}

}  // namespace
}  // namespace plimsoll::server::agent
