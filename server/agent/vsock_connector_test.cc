// The vsock connector's accept and identity path, run by the ingest, with injected connections:
// FakeVsockListener gives socketpairs "from" CIDs the test chooses, FakeHypervisor gives domains
// those CIDs in their XML, and a real gRPC client (FakeGuest) plays each guest's agent. The
// AF_VSOCK listener itself is tested in vsock_listener_test.
#include "server/agent/vsock_connector.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/testing/fake_guest.h"
#include "server/agent/testing/fake_vsock_listener.h"
#include "server/agent/testing/guest_proc_tree.h"
#include "server/agent/testing/test_reports.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

constexpr uint32_t kVictimCid = 5;
constexpr uint32_t kAttackerCid = 6;

// True when the peer closed `fd` before sending a single byte (what a refused connection sees).
bool ClosedWithoutAByte(int fd, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    char c;
    const ssize_t n = read(fd, &c, 1);
    if (n == 0) return true;
    if (n > 0) return false;
    if (errno != EAGAIN && errno != EINTR) return errno == ECONNRESET;
  }
  return false;
}

// Lends the connector a listener the test keeps.
class BorrowedListener final : public VsockListener {
 public:
  explicit BorrowedListener(VsockListener* listener) : listener_(listener) {}
  absl::StatusOr<VsockConnection> Accept() override { return listener_->Accept(); }
  void Shutdown() override { listener_->Shutdown(); }
  uint32_t port() const override { return listener_->port(); }

 private:
  VsockListener* const listener_;
};

class VsockConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hv_.AddDomain(kVictim, "victim", kGiB, kGiB);
    hv_.AddDomain(kAttacker, "attacker", kGiB, kGiB);
    hv_.SetVsockCid(kVictim, kVictimCid);
    hv_.SetVsockCid(kAttacker, kAttackerCid);
    ASSERT_TRUE(hv_.Connect().ok());
    validator_ = std::make_unique<ReportValidator>(TestHostKey());
    store_ = std::make_unique<AgentStore>(validator_.get(), &clock_);
    store_->SetKnownGuests({{kVictim, GuestLimits{kGiB}}, {kAttacker, GuestLimits{kGiB}}});
  }
  void TearDown() override {
    if (ingest_) ingest_->Shutdown();
  }

  void StartVsock(VsockOptions options = {}) {
    options.rescan_every = absl::Milliseconds(50);
    options.min_refresh_interval = absl::Milliseconds(50);
    listener_ = std::make_unique<FakeVsockListener>();
    auto listener = std::make_unique<BorrowedListener>(listener_.get());
    AgentIngestOptions io;
    io.vsock = options;
    ingest_ = std::make_unique<AgentIngest>(io, store_.get(), &clock_);
    const absl::Status started = ingest_->Start(&hv_, std::move(listener));
    ASSERT_TRUE(started.ok()) << started;
    vsock_ = ingest_->vsock();
  }

  VsockCounters counters() const { return ingest_->counters().vsock; }
  AgentServiceCounters stream_counters() const { return ingest_->counters().streams; }

  RealClock clock_;
  hypervisor::FakeHypervisor hv_;
  std::unique_ptr<ReportValidator> validator_;
  std::unique_ptr<AgentStore> store_;
  // The test's, lent to the connector (which goes away at Shutdown) and outliving it.
  std::unique_ptr<FakeVsockListener> listener_;
  std::unique_ptr<AgentIngest> ingest_;
  const VsockConnector* vsock_ = nullptr;  // ingest_'s
};

TEST_F(VsockConnectorTest, ReportsFromADomainsCidAreThatDomainsWithoutToken) {
  StartVsock();
  EXPECT_EQ(counters().domains_with_cid, 2);
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(listener_->Connect(kVictimCid), kVictim)) << "no hello on an accepted connection";
  std::optional<v1::AgentReportAck> ack = guest.Report();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted()) << ack->reject_reason();
  std::optional<AgentSignals> s = store_->Signals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->reports_accepted, 1u);
  EXPECT_EQ(s->mem_total_bytes, 1000 * kMiB);
  EXPECT_EQ(counters().accepted, 1u);
  EXPECT_EQ(counters().unknown_cid, 0u);
  EXPECT_EQ(stream_counters().streams_opened, 1u);
}

TEST_F(VsockConnectorTest, UnknownCidIsClosedBeforeGrpcAndCounted) {
  StartVsock();
  const int fd = listener_->Connect(77);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ClosedWithoutAByte(fd, absl::Seconds(5))) << "a stranger's connection must be closed unanswered";
  close(fd);
  EXPECT_TRUE(WaitUntil([&] { return counters().unknown_cid == 1; }, absl::Seconds(5)));
  EXPECT_EQ(counters().accepted, 0u);
  EXPECT_EQ(stream_counters().streams_opened, 0u);
  // Reserved CIDs are nobody's either: the host's own (2), loopback (1).
  for (uint32_t cid : {1u, 2u}) {
    const int other = listener_->Connect(cid);
    EXPECT_TRUE(ClosedWithoutAByte(other, absl::Seconds(5))) << cid;
    close(other);
  }
  EXPECT_TRUE(WaitUntil([&] { return counters().unknown_cid == 3; }, absl::Seconds(5)));
}

TEST_F(VsockConnectorTest, CidMapFollowsLifecycleChanges) {
  StartVsock();
  FakeGuest old_session;
  ASSERT_TRUE(old_session.Open(listener_->Connect(kVictimCid), kVictim));
  ASSERT_TRUE(old_session.Report().value_or(v1::AgentReportAck()).accepted());

  // The victim restarts and libvirt gives it another CID; the attacker restarts into the
  // victim's old one. The daemon hears of the lifecycle change.
  hv_.SetVsockCid(kVictim, 9);
  hv_.SetVsockCid(kAttacker, kVictimCid);
  ingest_->Wake();
  ASSERT_TRUE(WaitUntil([&] { return vsock_->DomainOfCid(9) == std::optional<std::string>(kVictim); },
                        absl::Seconds(5)));
  EXPECT_EQ(vsock_->DomainOfCid(kVictimCid), std::optional<std::string>(kAttacker));
  EXPECT_FALSE(vsock_->DomainOfCid(kAttackerCid).has_value());

  // The old connection (CID 5, bound to the victim) binds no new stream: CID 5 is not the
  // victim's any more.
  old_session.context->TryCancel();
  old_session.stream->Finish();
  old_session.finished = true;
  EXPECT_FALSE(old_session.Restart()) << "a stream on a connection whose CID changed owner was opened";
  EXPECT_GE(stream_counters().streams_denied, 1u);

  // New connections: CID 9 is the victim, CID 5 the attacker, and a report there naming the
  // victim is refused.
  FakeGuest victim;
  victim.seconds = 100;
  ASSERT_TRUE(victim.Open(listener_->Connect(9), kVictim));
  EXPECT_TRUE(victim.Report().value_or(v1::AgentReportAck()).accepted());
  FakeGuest attacker;
  ASSERT_TRUE(attacker.Open(listener_->Connect(kVictimCid), kAttacker));
  EXPECT_FALSE(attacker.Report(kVictim).has_value());
  EXPECT_EQ(store_->counters().rejected_for(RejectReason::kChannelIdentityMismatch), 1u);

  // A domain that starts later is found by the periodic scan, without a Wake.
  hv_.AddDomain(kStranger, "late", kGiB, kGiB);
  hv_.SetVsockCid(kStranger, 12);
  EXPECT_TRUE(WaitUntil([&] { return vsock_->DomainOfCid(12) == std::optional<std::string>(kStranger); },
                        absl::Seconds(5)));
  // A domain that stops is forgotten.
  hv_.RemoveDomain(kStranger);
  EXPECT_TRUE(WaitUntil([&] { return !vsock_->DomainOfCid(12).has_value(); }, absl::Seconds(5)));
}

TEST_F(VsockConnectorTest, ACidTwoDomainsClaimIsNeithersUntilSettled) {
  hv_.SetVsockCid(kAttacker, kVictimCid);  // a stale read: both say 5
  StartVsock();
  EXPECT_FALSE(vsock_->DomainOfCid(kVictimCid).has_value());
  const int fd = listener_->Connect(kVictimCid);
  EXPECT_TRUE(ClosedWithoutAByte(fd, absl::Seconds(5)));
  close(fd);
  EXPECT_TRUE(WaitUntil([&] { return counters().unknown_cid == 1; }, absl::Seconds(5)));
  // Settled by the next read: the victim's again.
  hv_.SetVsockCid(kAttacker, kAttackerCid);
  ingest_->Wake();
  EXPECT_TRUE(WaitUntil([&] { return vsock_->DomainOfCid(kVictimCid) == std::optional<std::string>(kVictim); },
                        absl::Seconds(5)));
}

TEST_F(VsockConnectorTest, NoVsockDeviceOrUnreadableXmlGivesNoIdentity) {
  hv_.SetVsockCid(kAttacker, 0);
  // Both domains' first reads fail: neither has a CID until its XML is read, which the next
  // scan tries again.
  hv_.FailNext(hypervisor::FakeHypervisor::Method::kGetAgentChannel, absl::InternalError("fake: xml"), 2);
  StartVsock();
  EXPECT_TRUE(WaitUntil([&] { return counters().domains_with_cid == 1; }, absl::Seconds(5)));
  EXPECT_GE(hv_.call_count(hypervisor::FakeHypervisor::Method::kGetAgentChannel), 4);
  EXPECT_EQ(vsock_->DomainOfCid(kVictimCid), std::optional<std::string>(kVictim));
  EXPECT_FALSE(vsock_->DomainOfCid(kAttackerCid).has_value());
  const int fd = listener_->Connect(kAttackerCid);
  EXPECT_TRUE(ClosedWithoutAByte(fd, absl::Seconds(5)));
  close(fd);
}

TEST_F(VsockConnectorTest, AcceptErrorsAreCountedAndAcceptingGoesOn) {
  StartVsock();
  listener_->FailNextAccept(absl::ResourceExhaustedError("vsock accept: Too many open files"));
  EXPECT_TRUE(WaitUntil([&] { return counters().accept_errors == 1; }, absl::Seconds(5)));
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(listener_->Connect(kVictimCid), kVictim));
  EXPECT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
}

TEST_F(VsockConnectorTest, ShutdownEndsStreamsAndStopsAccepting) {
  StartVsock();
  FakeGuest guest;
  ASSERT_TRUE(guest.Open(listener_->Connect(kVictimCid), kVictim));
  ASSERT_TRUE(guest.Report().value_or(v1::AgentReportAck()).accepted());
  ingest_->Shutdown();
  EXPECT_FALSE(guest.Report().has_value());
  const int fd = listener_->Connect(kVictimCid);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(listener_->pending(), 1) << "accepted after Shutdown";
  close(fd);
}

}  // namespace
}  // namespace plimsoll::server::agent
