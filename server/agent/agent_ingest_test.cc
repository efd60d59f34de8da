// AgentIngest: one server, one service and one sweeper for every transport. Connections are
// handed over here as a connector does (socketpairs bound through the ingest's ConnectionSink,
// vouched for by a fake connector), or come through the real connectors (fake QEMU sockets,
// injected vsock connections) and the TCP listener; a real gRPC client plays each guest.
#include "server/agent/agent_ingest.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/agent/testing/fake_guest.h"
#include "server/agent/testing/fake_qemu_socket.h"
#include "server/agent/testing/fake_vsock_listener.h"
#include "server/agent/testing/guest_proc_tree.h"
#include "server/agent/testing/test_reports.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

// A connector as the ingest sees one: it vouches for its bindings while `vouch` is set.
class FakeConnector final : public Connector {
 public:
  void Wake() override {}
  void Stop() override {}
  bool Vouches(const ConnectionBinding& binding) const override { return vouch.load(); }
  std::atomic<bool> vouch{true};
};

class AgentIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hv_.AddDomain(kVictim, "victim", kGiB, kGiB);
    hv_.AddDomain(kAttacker, "attacker", kGiB, kGiB);
    ASSERT_TRUE(hv_.Connect().ok());
    store_.SetKnownGuests(
        {{kVictim, GuestLimits{kGiB}}, {kAttacker, GuestLimits{kGiB}}, {kStranger, GuestLimits{kGiB}}});
  }
  void TearDown() override {
    if (ingest_) ingest_->Shutdown();
    for (int fd : guest_ends_) close(fd);
  }

  void StartIngest(AgentIngestOptions options, Clock* clock = RealClock::Get(),
                   std::unique_ptr<VsockListener> vsock = nullptr) {
    ingest_ = std::make_unique<AgentIngest>(options, &store_, clock);
    const absl::Status started = ingest_->Start(&hv_, std::move(vsock));
    ASSERT_TRUE(started.ok()) << started;
  }

  // Hands the ingest a connection bound to `uuid`, as a connector would; the guest's end, for a
  // FakeGuest (which takes it over). *grpc_fd: the end the ingest serves.
  int ServeAs(const std::string& uuid, Transport transport = Transport::kVirtioSerial, int* grpc_fd = nullptr,
              uint64_t* generation = nullptr) {
    int pair[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
    ConnectionBinding binding;
    binding.transport = transport;
    binding.uuid = uuid;
    binding.connector = &connector_;
    const uint64_t g = ingest_->Serve(pair[0], binding);
    if (grpc_fd != nullptr) *grpc_fd = pair[0];
    if (generation != nullptr) *generation = g;
    return pair[1];
  }

  static AgentIngestOptions Tcp() {
    AgentIngestOptions o;
    o.tcp_listen = "127.0.0.1:0";
    return o;
  }

  hypervisor::FakeHypervisor hv_;
  ReportValidator validator_{TestHostKey()};
  AgentStore store_{&validator_, RealClock::Get()};
  FakeConnector connector_;
  std::unique_ptr<AgentIngest> ingest_;
  std::vector<int> guest_ends_;  // closed at the end when no FakeGuest took them
};

// What every connector's connections rely on: the binding, not the report, says whose the
// reports are.
TEST_F(AgentIngestTest, AConnectionIsItsBoundGuestsAndNoOneElses) {
  StartIngest({});
  FakeGuest victim;
  FakeGuest attacker;
  ASSERT_TRUE(victim.Open(ServeAs(kVictim), kVictim)) << "no hello on a bound connection";
  ASSERT_TRUE(attacker.Open(ServeAs(kAttacker, Transport::kVsock), kAttacker));
  std::optional<v1::AgentReportAck> ack = victim.Report();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted()) << ack->reject_reason();
  const AgentSignals before = *store_.Signals(kVictim);
  EXPECT_EQ(before.reports_accepted, 1u);

  // The attacker's own report is fine; one naming the victim is rejected, counted, ends the
  // stream and changes nothing of the victim.
  ASSERT_TRUE(attacker.Report().value_or(v1::AgentReportAck()).accepted());
  EXPECT_FALSE(attacker.Report(kVictim).has_value()) << "the lying stream must be ended";
  EXPECT_EQ(attacker.End().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kChannelIdentityMismatch), 1u);
  const AgentSignals after = *store_.Signals(kVictim);
  EXPECT_EQ(after.reports_accepted, before.reports_accepted);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.received, before.received);
  EXPECT_EQ(after.last_reject_reason, "");
  EXPECT_EQ(store_.Signals(kAttacker)->last_reject_reason, "channel_identity_mismatch");
  // The victim's own stream goes on; a fresh stream on the attacker's connection is still the
  // attacker's.
  EXPECT_TRUE(victim.Report().value_or(v1::AgentReportAck()).accepted());
  ASSERT_TRUE(attacker.Restart());
  EXPECT_TRUE(attacker.Report().value_or(v1::AgentReportAck()).accepted());
}

// Where a stream comes from, by its peer, with and without a TCP listener.
TEST_F(AgentIngestTest, OriginOfEachKindOfPeer) {
  for (const bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "with a TCP listener" : "without");
    StartIngest(tcp ? Tcp() : AgentIngestOptions());
    int vouched_fd = -1;
    int unvouched_fd = -1;
    int unbound_fd = -1;
    uint64_t unbound_generation = 0;
    guest_ends_.push_back(ServeAs(kVictim, Transport::kVirtioSerial, &vouched_fd));
    guest_ends_.push_back(ServeAs(kAttacker, Transport::kVsock, &unbound_fd, &unbound_generation));
    ingest_->Unbind(unbound_fd, unbound_generation);
    FakeConnector doubting;
    doubting.vouch = false;
    {
      int pair[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
      ConnectionBinding b;
      b.transport = Transport::kVsock;
      b.uuid = kStranger;
      b.connector = &doubting;
      ingest_->Serve(pair[0], b);
      unvouched_fd = pair[0];
      guest_ends_.push_back(pair[1]);
    }
    const struct {
      std::string peer;
      std::optional<Transport> transport;  // nullopt: refused
      std::string uuid;
    } rows[] = {
        {FdPeer(vouched_fd), Transport::kVirtioSerial, kVictim},
        {FdPeer(unbound_fd), std::nullopt, ""},    // its connector unbound it
        {FdPeer(unvouched_fd), std::nullopt, ""},  // its connector no longer vouches for it
        {"fd:99999", std::nullopt, ""},            // never handed over
        {"ipv4:127.0.0.1:5555", tcp ? std::optional<Transport>(Transport::kTcp) : std::nullopt, ""},
        {"ipv6:[::1]:5555", tcp ? std::optional<Transport>(Transport::kTcp) : std::nullopt, ""},
    };
    for (const auto& row : rows) {
      const std::optional<StreamOrigin> origin = ingest_->Origin(row.peer);
      ASSERT_EQ(origin.has_value(), row.transport.has_value()) << row.peer;
      if (!origin.has_value()) continue;
      EXPECT_EQ(origin->transport, *row.transport) << row.peer;
      EXPECT_EQ(origin->channel_uuid, row.uuid) << row.peer;
    }
    ingest_->Shutdown();
    ingest_.reset();
  }
}

TEST_F(AgentIngestTest, AConnectionItsConnectorNoLongerVouchesForOpensNoStream) {
  StartIngest({});
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(ServeAs(kVictim), kVictim));
  ASSERT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
  connector_.vouch = false;
  guest.context->TryCancel();
  guest.stream->Finish();
  guest.finished = true;
  EXPECT_FALSE(guest.Restart()) << "a stream opened on a connection its connector disowned";
  EXPECT_EQ(ingest_->counters().streams.streams_denied, 1u);
}

// One sweeper ends the silent streams of every transport (the fake clock past auth_timeout).
TEST_F(AgentIngestTest, OneSweeperEndsSilentStreamsOfEveryTransport) {
  FakeClock clock;
  AgentIngestOptions o = Tcp();
  o.sweep_every = absl::Milliseconds(20);
  StartIngest(o, &clock);
  FakeGuest tcp;
  ASSERT_TRUE(tcp.OpenTcp(ingest_->tcp_address(), kAttacker));
  FakeGuest channel;
  ASSERT_TRUE(channel.Open(ServeAs(kVictim), kVictim));
  ASSERT_TRUE(WaitUntil([&] { return ingest_->counters().streams.active_streams == 2; }));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(ingest_->counters().streams.streams_timed_out, 0u) << "swept before its time";
  clock.Advance(absl::Seconds(11));  // past auth_timeout (10 s): neither proved anything
  ASSERT_TRUE(WaitUntil([&] { return ingest_->counters().streams.streams_timed_out == 2; }));
  EXPECT_EQ(tcp.End().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(channel.End().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitUntil([&] { return ingest_->counters().streams.active_streams == 0; }));
}

// One counters() reads every transport: the TCP listener, a virtio-serial channel and a vsock
// connection, each with a guest reporting, in one ingest.
TEST_F(AgentIngestTest, OneCountersSourceSumsEveryTransport) {
  const std::string dir = absl::StrCat("/tmp/plimsoll-ingest-", getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  const std::string path = dir + "/victim.sock";
  hypervisor::AgentChannelInfo info;
  info.found = true;
  info.socket_path = path;
  info.has_virtio_serial_controller = true;
  hv_.SetAgentChannel(kVictim, kDefaultChannelName, info);
  hv_.SetVsockCid(kAttacker, 6);
  FakeQemuSocket qemu(path);
  auto listener = std::make_unique<FakeVsockListener>();
  FakeVsockListener* vsock = listener.get();
  AgentIngestOptions o = Tcp();
  o.virtio_serial.emplace();
  o.vsock.emplace();
  StartIngest(o, RealClock::Get(), std::move(listener));

  FakeGuest stranger;
  ASSERT_TRUE(stranger.OpenTcp(ingest_->tcp_address(), kStranger));
  EXPECT_TRUE(stranger.Report().value_or(v1::AgentReportAck()).accepted());
  FakeGuest victim;
  const int channel_fd = qemu.Accept(absl::Seconds(5));
  ASSERT_GE(channel_fd, 0) << "the virtio-serial connector never connected";
  ASSERT_TRUE(victim.Open(channel_fd, kVictim));
  EXPECT_TRUE(victim.Report().value_or(v1::AgentReportAck()).accepted());
  FakeGuest attacker;
  ASSERT_TRUE(attacker.Open(vsock->Connect(6), kAttacker));
  EXPECT_TRUE(attacker.Report().value_or(v1::AgentReportAck()).accepted());

  const AgentIngestCounters c = ingest_->counters();
  EXPECT_EQ(c.streams.streams_opened, 3u);
  EXPECT_EQ(c.streams.active_streams, 3);
  EXPECT_EQ(c.virtio_serial.connects, 1u);
  EXPECT_EQ(c.virtio_serial.connected, 1);
  EXPECT_GT(c.virtio_serial.pump.bytes_from_guests, 0u);
  EXPECT_EQ(c.vsock.accepted, 1u);
  EXPECT_EQ(c.vsock.domains_with_cid, 1);
  EXPECT_EQ(store_.counters().accepted, 3u);
  for (const char* uuid : {kStranger, kVictim, kAttacker}) EXPECT_TRUE(store_.IsConnected(uuid)) << uuid;
  ingest_->Shutdown();
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

// The stream limit is per transport: a transport at its limit leaves another's room alone.
TEST_F(AgentIngestTest, StreamLimitsArePerTransport) {
  AgentIngestOptions o = Tcp();
  o.streams.max_streams = 1;
  StartIngest(o);
  FakeGuest first;
  ASSERT_TRUE(first.OpenTcp(ingest_->tcp_address(), kAttacker));
  FakeGuest second;
  EXPECT_FALSE(second.OpenTcp(ingest_->tcp_address(), kStranger));
  EXPECT_EQ(second.End().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  FakeGuest channel;
  EXPECT_TRUE(channel.Open(ServeAs(kVictim), kVictim)) << "the TCP listener's streams took the channel's room";
  EXPECT_EQ(ingest_->counters().streams.streams_refused, 1u);
  EXPECT_EQ(ingest_->counters().streams.active_streams, 2);
}

TEST_F(AgentIngestTest, StartErrorsNameTheConfigField) {
  AgentIngestOptions unbindable;
  unbindable.tcp_listen = "192.0.2.1:9588";  // TEST-NET-1: no address of this machine
  AgentIngestOptions half_tls = Tcp();
  half_tls.tls_cert_file = "/nonexistent/cert.pem";
  AgentIngestOptions no_name;
  no_name.virtio_serial.emplace();
  no_name.virtio_serial->channel_name = "";
  const struct {
    AgentIngestOptions options;
    std::string field;
  } rows[] = {
      {unbindable, "agent.agent_listen: "},
      {half_tls, "agent.agent_tls_cert_file"},
      {no_name, "agent.channel_name: "},
  };
  for (const auto& row : rows) {
    AgentIngest ingest(row.options, &store_, RealClock::Get());
    const absl::Status s = ingest.Start(&hv_);
    EXPECT_FALSE(s.ok()) << row.field;
    EXPECT_NE(s.message().find(row.field), absl::string_view::npos) << s;
  }
}

TEST_F(AgentIngestTest, DescribeSaysWhatIsOn) {
  EXPECT_EQ(DescribeAgentIngest(nullptr), "agent=off agent_channels=off agent_vsock=off");
  StartIngest(Tcp());
  EXPECT_EQ(DescribeAgentIngest(ingest_.get()),
            absl::StrCat("agent=", ingest_->tcp_address(),
                         " agent_transport=plaintext agent_channels=off agent_vsock=off"));
  ingest_->Shutdown();
  AgentIngestOptions o;
  o.virtio_serial.emplace();
  o.virtio_serial->autoattach = true;
  o.virtio_serial->socket_dir = "";
  o.vsock.emplace();
  StartIngest(o, RealClock::Get(), std::make_unique<FakeVsockListener>());
  EXPECT_EQ(DescribeAgentIngest(ingest_.get()),
            "agent=off agent_channels=virtio-serial:org.plimsoll.agent.0 autoattach agent_vsock=port:9588");
}

}  // namespace
}  // namespace plimsoll::server::agent
