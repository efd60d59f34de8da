// The virtio-serial connector, run by the ingest, against fake guest ends: for each domain a unix
// socket that listens where QEMU's channel socket would (the FakeHypervisor's XML answer names
// it), and on the accepted connection a real gRPC client, as the guest's agent runs one over its
// virtio-serial port.
#include "server/agent/virtio_serial_connector.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "plimsoll/v1/agent.grpc.pb.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/testing/fake_guest.h"
#include "server/agent/testing/fake_qemu_socket.h"
#include "server/agent/testing/guest_proc_tree.h"
#include "server/agent/testing/test_reports.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

class VirtioSerialConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: a unix socket path has 107 bytes at most, and Bazel's temporary folder is deep.
    dir_ = absl::StrCat("/tmp/plimsoll-channels-", getpid(), "-", counter_++);
    std::string cmd = "mkdir -p " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
    hv_.AddDomain(kVictim, "victim", kGiB, kGiB);
    hv_.AddDomain(kAttacker, "attacker", kGiB, kGiB);
    ASSERT_TRUE(hv_.Connect().ok());
    ValidatorOptions vo;
    vo.reports_per_second = 1000;  // the flood test measures the channel, not the report budget
    vo.burst = 1000;
    validator_ = std::make_unique<ReportValidator>(TestHostKey(), vo);
    store_ = std::make_unique<AgentStore>(validator_.get(), &clock_);
    store_->SetKnownGuests({{kVictim, GuestLimits{kGiB}}, {kAttacker, GuestLimits{kGiB}}});
  }
  void TearDown() override {
    if (ingest_) ingest_->Shutdown();
    std::string cmd = "rm -rf " + dir_;
    (void)!system(cmd.c_str());
  }

  std::string PathOf(const std::string& uuid) { return absl::StrCat(dir_, "/", uuid.substr(0, 8), ".sock"); }

  void GiveChannel(const std::string& uuid) {
    hypervisor::AgentChannelInfo info;
    info.found = true;
    info.socket_path = PathOf(uuid);
    info.has_virtio_serial_controller = true;
    hv_.SetAgentChannel(uuid, kDefaultChannelName, info);
  }

  void StartChannels(VirtioSerialOptions options = {}) {
    options.rescan_every = absl::Milliseconds(100);
    options.initial_backoff = absl::Milliseconds(50);
    options.max_backoff = absl::Milliseconds(400);
    AgentIngestOptions io;
    io.virtio_serial = options;
    ingest_ = std::make_unique<AgentIngest>(io, store_.get(), &clock_);
    const absl::Status started = ingest_->Start(&hv_);
    ASSERT_TRUE(started.ok()) << started;
  }

  VirtioSerialCounters counters() const { return ingest_->counters().virtio_serial; }
  AgentServiceCounters stream_counters() const { return ingest_->counters().streams; }

  std::string StateOf(const std::string& uuid) {
    for (const ChannelState& s : ingest_->virtio_serial()->channels()) {
      if (s.uuid == uuid) return s.state;
    }
    return "";
  }

  static inline int counter_ = 0;
  std::string dir_;
  RealClock clock_;
  hypervisor::FakeHypervisor hv_;
  std::unique_ptr<ReportValidator> validator_;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<AgentIngest> ingest_;
};

TEST_F(VirtioSerialConnectorTest, ReportsFlowWithoutTokenAndAreTheDomains) {
  GiveChannel(kVictim);
  FakeQemuSocket qemu(PathOf(kVictim));
  StartChannels();
  const int fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0) << "plimsolld never connected to the channel socket";
  // The socket is accepted before the connector has finished its side of the connect.
  EXPECT_TRUE(WaitUntil([&] { return StateOf(kVictim) == "connected"; }, absl::Seconds(5))) << StateOf(kVictim);
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(fd, kVictim));
  EXPECT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
  EXPECT_TRUE(store_->IsConnected(kVictim)) << "the channel's stream is not its domain's";
  EXPECT_EQ(store_->Signals(kVictim)->mem_total_bytes, 1000 * kMiB);
  EXPECT_EQ(counters().connects, 1u);
  EXPECT_EQ(counters().connected, 1);
  // The attacker has no channel in its XML: nothing connects, and it is counted as such.
  EXPECT_TRUE(WaitUntil([&] { return StateOf(kAttacker) == "no_channel"; }, absl::Seconds(5))) << StateOf(kAttacker);
  EXPECT_EQ(counters().without_channel, 1);
}

TEST_F(VirtioSerialConnectorTest, ReconnectsWhenTheGuestEndCloses) {
  GiveChannel(kVictim);
  FakeQemuSocket qemu(PathOf(kVictim));
  StartChannels();
  int fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0);
  const int qemu_side = dup(fd);  // gRPC owns `fd`; this one lets the test close the socket
  {
    FakeGuest guest;
    ASSERT_TRUE(guest.Open(fd, kVictim));
    ASSERT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
    // The guest end goes away: QEMU closes the host's connection (QEMU restarted, domain gone).
    shutdown(qemu_side, SHUT_RDWR);
    close(qemu_side);
  }
  const absl::Time closed = absl::Now();
  fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0) << "plimsolld did not reconnect";
  const absl::Duration took = absl::Now() - closed;
  std::printf("reconnected after the guest end closed in %s\n", absl::FormatDuration(took).c_str());
  FakeGuest again;
  again.seconds = 100;  // the same boot, later: the agent's reports go on where they were
  ASSERT_TRUE(again.Open(fd, kVictim));
  EXPECT_TRUE(again.Report().value_or(v1::AgentReportAck()).accepted());
  const VirtioSerialCounters c = counters();
  EXPECT_EQ(c.connects, 2u);
  EXPECT_EQ(c.ended_guest + c.ended_daemon, 1u);
}

TEST_F(VirtioSerialConnectorTest, ReconnectsWhenTheSessionBreaks) {
  // A restarted agent starts a new HTTP/2 session in the middle of the old one: gRPC drops the
  // connection, and plimsolld must connect again by itself.
  GiveChannel(kVictim);
  FakeQemuSocket qemu(PathOf(kVictim));
  StartChannels();
  int fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0);
  const char junk[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nthis is not a frame of the session in progress";
  for (int i = 0; i < 2; ++i) ASSERT_GT(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), 0);
  const int again = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(again, 0) << "plimsolld did not reconnect after its session broke";
  close(fd);
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(again, kVictim));
  EXPECT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
  EXPECT_GE(counters().ended_daemon, 1u);
}

TEST_F(VirtioSerialConnectorTest, ForgetsAStoppedDomainAndClosesItsSocket) {
  GiveChannel(kVictim);
  FakeQemuSocket qemu(PathOf(kVictim));
  StartChannels();
  const int fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0);
  hv_.RemoveDomain(kVictim);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline && counters().ended_gone == 0) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(counters().ended_gone, 1u);
  EXPECT_EQ(StateOf(kVictim), "");
  // QEMU's side sees the host end close.
  // The server's HTTP/2 settings may come first; then the end of the stream.
  char buf[512];
  bool eof = false;
  const absl::Time until = absl::Now() + absl::Seconds(2);
  while (!eof && absl::Now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    eof = read(fd, buf, sizeof(buf)) == 0;
  }
  EXPECT_TRUE(eof) << "the channel socket was not closed";
  close(fd);
}

// An end-to-end check of isolation between two channels, whichever limit cuts the flood (the
// service's frame budget does here, before the pump's byte budget is reached): it fails if the
// victim's reports are refused or delayed past 250 ms, or if nothing cut the flood. The byte
// budget itself is tested in channel_pump_test, where it is the only limit.
TEST_F(VirtioSerialConnectorTest, FloodOnOneChannelDoesNotDelayAnother) {
  GiveChannel(kVictim);
  GiveChannel(kAttacker);
  FakeQemuSocket victim_qemu(PathOf(kVictim));
  FakeQemuSocket attacker_qemu(PathOf(kAttacker));
  StartChannels();
  const int vfd = victim_qemu.Accept(absl::Seconds(5));
  const int afd = attacker_qemu.Accept(absl::Seconds(5));
  ASSERT_GE(vfd, 0);
  ASSERT_GE(afd, 0);
  FakeGuest victim;
  ASSERT_TRUE(victim.Open(vfd, kVictim));

  // The attacker writes as fast as its end takes bytes: first a valid session flooding reports
  // (the service cuts the stream, it opens another), all the while.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> flood_frames{0};
  std::thread flood([&] {
    FakeGuest attacker;
    if (!attacker.Open(afd, kAttacker)) return;
    while (!stop.load()) {
      for (int i = 0; i < 100 && !stop.load(); ++i) {
        if (!attacker.stream->Write(attacker.Frame(kAttacker))) break;
        flood_frames.fetch_add(1);
      }
      attacker.context->TryCancel();
      attacker.stream->Finish();
      attacker.finished = true;
      if (!attacker.Restart()) break;
    }
  });
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<double> latencies_ms;
  int accepted = 0;
  // Every 120 ms: inside the victim's own stream budget (10 frames/s), which is not what is tested.
  constexpr int kReports = 30;
  for (int i = 0; i < kReports; ++i) {
    const absl::Time sent = absl::Now();
    std::optional<v1::AgentReportAck> ack = victim.Report();
    latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - sent));
    if (ack.has_value() && ack->accepted()) {
      ++accepted;
    } else {
      std::printf("victim report %d not accepted: %s\n", i,
                  ack.has_value() ? ack->reject_reason().c_str() : "stream ended");
    }
    absl::SleepFor(absl::Milliseconds(120));
  }
  stop.store(true);
  flood.join();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const double p50 = latencies_ms[latencies_ms.size() / 2];
  const double p99 = latencies_ms[latencies_ms.size() * 99 / 100];
  const VirtioSerialCounters c = counters();
  std::printf("victim ack latency p50=%.1f ms p99=%.1f ms while the attacker sent %lu frames; "
              "attacker streams flooded=%lu, pump throttled=%lu, bytes from guests=%lu\n",
              p50, p99, static_cast<unsigned long>(flood_frames.load()),
              static_cast<unsigned long>(stream_counters().streams_flooded),
              static_cast<unsigned long>(c.pump.throttled), static_cast<unsigned long>(c.pump.bytes_from_guests));
  EXPECT_EQ(accepted, kReports);
  EXPECT_LT(p99, 250.0);
  EXPECT_GT(flood_frames.load(), 100u) << "the flood did not happen";
  EXPECT_GT(stream_counters().streams_flooded + c.pump.throttled, 0u);
}

TEST_F(VirtioSerialConnectorTest, AutoattachHotPlugsOrSaysWhyNot) {
  // Victim: a controller, no channel -> attached. Attacker: no controller -> counted, reason.
  hypervisor::AgentChannelInfo controller_only;
  controller_only.has_virtio_serial_controller = true;
  hv_.SetAgentChannel(kVictim, "some.other.port", controller_only);
  VirtioSerialOptions o;
  o.autoattach = true;
  o.socket_dir = dir_;
  StartChannels(o);
  const std::string path = absl::StrCat(dir_, "/", kVictim, ".sock");
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline && (counters().attached == 0 || StateOf(kAttacker) != "no_controller")) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  // One hot-plug, into the victim; the attacker's XML already says it cannot take one.
  std::vector<hypervisor::FakeHypervisor::AttachCall> calls = hv_.attach_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].uuid, kVictim);
  EXPECT_TRUE(calls[0].result.ok()) << calls[0].result;
  EXPECT_EQ(calls[0].name, kDefaultChannelName);
  EXPECT_EQ(calls[0].socket_path, path);
  EXPECT_EQ(StateOf(kAttacker), "no_controller");
  const VirtioSerialCounters c = counters();
  EXPECT_EQ(c.attached, 1u);
  EXPECT_EQ(c.attach_no_controller, 1u);
  EXPECT_EQ(c.without_controller, 1);
  // The hot-plugged channel is then connected like any other (QEMU listening at the path).
  FakeQemuSocket qemu(path);
  const int fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(fd, 0) << "the attached channel was never connected";
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(fd, kVictim));
  EXPECT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
}

// A hot-plug libvirt refuses is that domain's alone: retried with a backoff of its own (doubling
// from attach_retry), counted, and shown on that guest; with no socket directory the path is
// left to libvirt.
TEST_F(VirtioSerialConnectorTest, AFailedHotPlugIsRetriedWithBackoffAndShownOnThatGuestOnly) {
  hypervisor::AgentChannelInfo controller_only;
  controller_only.has_virtio_serial_controller = true;
  hv_.SetAgentChannel(kVictim, "some.other.port", controller_only);
  GiveChannel(kAttacker);
  FakeQemuSocket attacker_qemu(PathOf(kAttacker));
  hv_.FailNext(hypervisor::FakeHypervisor::Method::kAttachAgentChannel,
               absl::InternalError("cannot stat '': No such file or directory"), 3);
  VirtioSerialOptions o;
  o.autoattach = true;
  o.socket_dir = "";
  o.attach_retry = absl::Milliseconds(300);
  o.attach_retry_max = absl::Milliseconds(1200);
  StartChannels(o);
  ASSERT_GE(attacker_qemu.Accept(absl::Seconds(5)), 0);
  // Each failure in turn, with the next wait doubled, shown on the victim.
  for (const char* want : {"attempt 1, next in 300ms", "attempt 2, next in 600ms", "attempt 3, next in 1.2s"}) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline && store_->ChannelProblem(kVictim).find(want) == std::string::npos) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    const std::string problem = store_->ChannelProblem(kVictim);
    EXPECT_NE(problem.find(want), std::string::npos) << problem;
    EXPECT_NE(problem.find("cannot stat ''"), std::string::npos) << problem;
    EXPECT_EQ(store_->ChannelProblem(kAttacker), "") << "another guest's failure is not this one's";
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline && counters().attached == 0) absl::SleepFor(absl::Milliseconds(20));
  const std::vector<hypervisor::FakeHypervisor::AttachCall> calls = hv_.attach_calls();
  ASSERT_EQ(calls.size(), 4u);
  for (const auto& c : calls) EXPECT_EQ(c.socket_path, "") << "libvirt chooses";
  EXPECT_TRUE(calls[3].result.ok()) << calls[3].result;
  const VirtioSerialCounters c = counters();
  EXPECT_EQ(c.attach_failed, 3u);
  EXPECT_EQ(c.attached, 1u);
}

}  // namespace
}  // namespace plimsoll::server::agent
