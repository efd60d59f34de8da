#include "server/agent/channel_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

// A link between two socketpairs: the test holds the far ends (`guest`, as QEMU's side would
// be, and `daemon`, as gRPC's would be). Declared before the pump, so the pump (whose thread
// may call on_end when a closed end hangs the link up) is destroyed first.
struct TestLink {
  int guest = -1;
  int daemon = -1;
  uint64_t id = 0;
  absl::Notification ended;
  LinkEnd why = LinkEnd::kError;
  ~TestLink() {
    if (guest >= 0) close(guest);
    if (daemon >= 0) close(daemon);
  }
};

void Connect(ChannelPump& pump, TestLink& link, PumpLinkOptions options = {}) {
  int g[2];
  int d[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, d), 0);
  link.guest = g[0];
  link.daemon = d[0];
  link.id = pump.Add(g[1], d[1], options, [&link](LinkEnd why, const std::string&) {
    link.why = why;
    link.ended.Notify();
  });
}

// Reads exactly `n` bytes from `fd` within `timeout`; what arrived.
std::string ReadN(int fd, size_t n, absl::Duration timeout) {
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[65536];
  while (out.size() < n && absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    const ssize_t got = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

bool SeesEof(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  char byte;
  return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 && read(fd, &byte, 1) == 0;
}

TEST(ChannelPump, CarriesBytesBothWays) {
  TestLink link;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  Connect(**pump, link);
  ASSERT_EQ(write(link.guest, "report", 6), 6);
  EXPECT_EQ(ReadN(link.daemon, 6, absl::Seconds(2)), "report");
  ASSERT_EQ(write(link.daemon, "ack", 3), 3);
  EXPECT_EQ(ReadN(link.guest, 3, absl::Seconds(2)), "ack");
  const PumpCounters c = (*pump)->counters();
  EXPECT_EQ(c.bytes_from_guests, 6u);
  EXPECT_EQ(c.bytes_to_guests, 3u);
}

TEST(ChannelPump, GuestHangupEndsTheLinkAndClosesTheDaemonSide) {
  TestLink link;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  Connect(**pump, link);
  close(link.guest);
  link.guest = -1;
  ASSERT_TRUE(link.ended.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_EQ(link.why, LinkEnd::kGuestClosed);
  EXPECT_TRUE(SeesEof(link.daemon, absl::Seconds(2)));
  EXPECT_EQ((*pump)->links(), 0u);
}

TEST(ChannelPump, DaemonCloseEndsTheLinkAndClosesTheGuestSide) {
  TestLink link;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  Connect(**pump, link);
  close(link.daemon);
  link.daemon = -1;
  ASSERT_TRUE(link.ended.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_EQ(link.why, LinkEnd::kDaemonClosed);
  EXPECT_TRUE(SeesEof(link.guest, absl::Seconds(2)));
}

TEST(ChannelPump, RemoveClosesWithoutCallback) {
  TestLink link;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  Connect(**pump, link);
  (*pump)->Remove(link.id);
  EXPECT_TRUE(SeesEof(link.guest, absl::Seconds(2)));
  EXPECT_TRUE(SeesEof(link.daemon, absl::Seconds(2)));
  EXPECT_FALSE(link.ended.HasBeenNotified());
}

TEST(ChannelPump, GuestBytesAreHeldToTheirBudget) {
  TestLink link;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  PumpLinkOptions o;
  o.guest_bytes_per_second = 64 * 1024;
  o.guest_burst_bytes = 32 * 1024;
  Connect(**pump, link, o);
  // 32 KiB burst + 128 KiB at 64 KiB/s: at least ~2 s.
  const size_t total = 160 * 1024;
  std::thread writer([&] {
    std::string chunk(4096, 'x');
    size_t sent = 0;
    while (sent < total) {
      const ssize_t n = send(link.guest, chunk.data(), std::min(chunk.size(), total - sent), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  });
  const absl::Time start = absl::Now();
  const std::string got = ReadN(link.daemon, total, absl::Seconds(10));
  const absl::Duration took = absl::Now() - start;
  writer.join();
  EXPECT_EQ(got.size(), total);
  std::printf("160 KiB through a 64 KiB/s (32 KiB burst) budget in %s\n", absl::FormatDuration(took).c_str());
  EXPECT_GE(took, absl::Milliseconds(1700));
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_GT((*pump)->counters().throttled, 0u);
}

TEST(ChannelPump, AFloodingLinkDoesNotDelayAnother) {
  TestLink flood;
  TestLink quiet;
  auto pump = ChannelPump::Start(RealClock::Get());
  ASSERT_TRUE(pump.ok());
  PumpLinkOptions unlimited;
  unlimited.guest_bytes_per_second = 1e12;  // no budget: only the pump's round-robin protects
  unlimited.guest_burst_bytes = 1e12;
  Connect(**pump, flood, unlimited);
  Connect(**pump, quiet);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::string chunk(65536, 'f');
    while (!stop.load()) {
      if (send(flood.guest, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
    }
  });
  std::thread reader([&] {
    char buf[65536];
    while (!stop.load()) {
      pollfd p{flood.daemon, POLLIN, 0};
      if (poll(&p, 1, 50) == 1 && read(flood.daemon, buf, sizeof(buf)) <= 0) break;
    }
  });
  absl::SleepFor(absl::Milliseconds(200));
  absl::Duration worst;
  for (int i = 0; i < 50; ++i) {
    const absl::Time sent = absl::Now();
    ASSERT_EQ(write(quiet.guest, "r", 1), 1);
    ASSERT_EQ(ReadN(quiet.daemon, 1, absl::Seconds(2)), "r");
    worst = std::max(worst, absl::Now() - sent);
  }
  stop.store(true);
  shutdown(flood.guest, SHUT_RDWR);
  writer.join();
  reader.join();
  std::printf("quiet link's worst latency under a flood: %s (flood moved %lu bytes)\n",
              absl::FormatDuration(worst).c_str(), static_cast<unsigned long>((*pump)->counters().bytes_from_guests));
  EXPECT_LT(worst, absl::Milliseconds(250));  // generous: a loaded 2-core machine, sanitizers
}

}  // namespace
}  // namespace plimsoll::server::agent
