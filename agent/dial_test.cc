#include "agent/dial.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

TEST(ParseServerAddressTest, Tcp) {
  absl::StatusOr<ServerAddress> a = ParseServerAddress("10.0.2.2:9588");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ServerAddress::Kind::kTcp);
  EXPECT_EQ(a->tcp_target, "10.0.2.2:9588");
  EXPECT_TRUE(ParseServerAddress("[::1]:9588").ok());
  EXPECT_TRUE(ParseServerAddress("host.example:1").ok());
}

TEST(ParseServerAddressTest, Vsock) {
  absl::StatusOr<ServerAddress> a = ParseServerAddress("vsock:2:9588");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ServerAddress::Kind::kVsock);
  EXPECT_EQ(a->vsock_cid, 2u);
  EXPECT_EQ(a->vsock_port, 9588u);
}

TEST(ParseServerAddressTest, VirtioSerial) {
  absl::StatusOr<ServerAddress> a = ParseServerAddress(kDefaultServer);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ServerAddress::Kind::kVirtioSerial);
  EXPECT_EQ(a->port_name, "org.plimsoll.agent.0");
  EXPECT_TRUE(ParseServerAddress("virtio-serial:my_port-1").ok());
}

TEST(DialTest, VirtioSerialWithoutThePortSaysWhy) {
  absl::StatusOr<ServerAddress> a = ParseServerAddress("virtio-serial:org.plimsoll.agent.0");
  ASSERT_TRUE(a.ok());
  a->virtio_root = "/nonexistent-root";
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(*a, absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(channel.status()));
  EXPECT_NE(channel.status().message().find("virtio_console"), absl::string_view::npos) << channel.status();
  AgentTls tls;
  tls.ca_pem = "x";
  EXPECT_TRUE(absl::IsInvalidArgument(Dial(*a, absl::Seconds(1), tls).status()));
}

TEST(ParseServerAddressTest, Rejects) {
  for (const char* bad : {"", "9588", ":9588", "host:", "host:0", "host:70000", "host:x", "vsock:2", "vsock:x:1",
                          "vsock:2:1:3", "virtio-serial:", "virtio-serial:a/b", "virtio-serial:../x"}) {
    EXPECT_FALSE(ParseServerAddress(bad).ok()) << bad;
  }
}

TEST(DialTest, NothingListeningFailsFast) {
  // Port 1 on loopback: connection refused at once; the attempt must not wait for the timeout.
  absl::StatusOr<ServerAddress> a = ParseServerAddress("127.0.0.1:1");
  ASSERT_TRUE(a.ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(*a, absl::Seconds(5));
  EXPECT_FALSE(channel.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace plimsoll::agent
