// Both ends of the agent channel in one process, over real gRPC on loopback: the real Reporter
// (agent side, reading a captured /proc tree) against the real ingest's TCP listener and the
// store (daemon side).
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/boottime_clock.h"
#include "agent/dial.h"
#include "agent/guest_reader.h"
#include "agent/psi_trigger.h"
#include "agent/reclaimer.h"
#include "agent/reporter.h"
#include "agent/testing/fake_reclaim.h"
#include "common/clock.h"
#include "common/testing/test_certs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/agent_server.h"
#include "server/agent/agent_store.h"
#include "server/agent/reclaim_bounds_provider.h"
#include "server/agent/testing/guest_proc_tree.h"
#include "server/agent/testing/test_reports.h"

namespace plimsoll::server::agent {
namespace {

using ::plimsoll::testing::MakeTestPki;
using ::plimsoll::testing::ReadFileForTest;
using ::plimsoll::testing::TestPki;
using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers
using ::plimsoll::agent::AgentTls;
using ::plimsoll::agent::GuestReader;
using ::plimsoll::agent::ParseServerAddress;
using ::plimsoll::agent::PsiTrigger;
using ::plimsoll::agent::Reporter;
using ::plimsoll::agent::ReporterOptions;
using ::plimsoll::agent::SampleSource;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Optional;

constexpr uint64_t kKiB = 1024;

// A guest /proc tree from this machine's captures, with PSI.
std::string MakeProcTree() { return testing::MakeProcTree("channel_root"); }

// Everything plimsolld owns for the agent channel; a "restart" builds a new one.
struct Daemon {
  // `tls_cert_file` and `tls_key_file`: TLS on the listener.
  explicit Daemon(const std::string& listen, const std::string& tls_cert_file = "",
                  const std::string& tls_key_file = "", ReclaimBoundsProvider* reclaim_bounds = nullptr) {
    ValidatorOptions vo;
    vo.reports_per_second = 100;  // the test agents report every 100 ms
    vo.burst = 100;
    validator = std::make_unique<ReportValidator>(TestHostKey(), vo);
    store = std::make_unique<AgentStore>(validator.get(), RealClock::Get());
    // The captured host has 24 GiB; these "guests" may be that large.
    store->SetKnownGuests({{kVictim, GuestLimits{32 * kGiB}}, {kAttacker, GuestLimits{32 * kGiB}}});
    AgentIngestOptions io;
    io.tcp_listen = listen;
    io.tls_cert_file = tls_cert_file;
    io.tls_key_file = tls_key_file;
    io.streams.reclaim_bounds = reclaim_bounds;
    ingest = std::make_unique<AgentIngest>(io, store.get(), RealClock::Get());
    const absl::Status s = ingest->Start(/*hypervisor=*/nullptr);
    EXPECT_TRUE(s.ok()) << s;
    started = s.ok();
  }
  ~Daemon() { ingest->Shutdown(absl::Milliseconds(100)); }
  const std::string& address() const { return ingest->tcp_address(); }
  std::unique_ptr<ReportValidator> validator;
  std::unique_ptr<AgentStore> store;
  std::unique_ptr<AgentIngest> ingest;
  bool started = false;
};

// A guest stalled on memory all the time (its PSI "some" total grows with wall time, as on a
// thrashing guest) whose agent, on one read, stalls for `stall` after reading PSI, as an agent in a thrashing guest
// does (docs/agent.md, "What the agent sends": a sample and its stamp are at most 250 ms apart).
class StallingSource : public SampleSource {
 public:
  StallingSource(const std::string& proc_root, int stall_on_read, absl::Duration stall)
      : reader_(proc_root), stall_on_read_(stall_on_read), stall_(stall) {}
  absl::Status Read(v1::AgentReport* report) override {
    if (absl::Status s = reader_.Read(report); !s.ok()) return s;
    timespec now{};
    clock_gettime(CLOCK_BOOTTIME, &now);
    report->mutable_memory_pressure()->mutable_some()->set_total_us(static_cast<uint64_t>(now.tv_sec) * 1'000'000 +
                                                                    static_cast<uint64_t>(now.tv_nsec) / 1000);
    if (++reads_ == stall_on_read_) absl::SleepFor(stall_);
    return absl::OkStatus();
  }
  int reads() const { return reads_.load(); }

 private:
  GuestReader reader_;
  const int stall_on_read_;
  const absl::Duration stall_;
  std::atomic<int> reads_{0};
};

// A reporter running on its own thread.
class Agent {
 public:
  Agent(const std::string& proc_root, const std::string& server, const std::string& uuid, const std::string& token,
        absl::Duration interval = absl::Milliseconds(100), std::unique_ptr<PsiTrigger> trigger = nullptr,
        const AgentTls& tls = {})
      : own_reader_(std::make_unique<GuestReader>(proc_root)) {
    Start(own_reader_.get(), server, uuid, token, interval, std::move(trigger), tls);
  }
  Agent(SampleSource* source, const std::string& server, const std::string& uuid, const std::string& token,
        ::plimsoll::agent::ReclaimPeer* reclaim = nullptr) {
    Start(source, server, uuid, token, absl::Milliseconds(100), nullptr, {}, reclaim);
  }
  ~Agent() { Stop(); }
  void Stop() {
    reporter_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  Reporter& reporter() { return *reporter_; }

 private:
  void Start(SampleSource* source, const std::string& server, const std::string& uuid, const std::string& token,
             absl::Duration interval, std::unique_ptr<PsiTrigger> trigger, const AgentTls& tls,
             ::plimsoll::agent::ReclaimPeer* reclaim = nullptr) {
    ReporterOptions o;
    o.reclaim = reclaim;
    o.server = *ParseServerAddress(server);
    o.tls = tls;
    o.server_text = server;
    o.guest_uuid = uuid;
    o.token = token;
    o.boot_id = kBootA;
    o.interval = interval;
    o.initial_backoff = absl::Milliseconds(100);
    o.max_backoff = absl::Milliseconds(400);
    o.connect_timeout = absl::Seconds(2);
    absl::StatusOr<std::unique_ptr<Reporter>> r = Reporter::Create(o, source, std::move(trigger));
    EXPECT_TRUE(r.ok()) << r.status();
    reporter_ = *std::move(r);
    thread_ = std::thread([this] { reporter_->Run(); });
  }

  std::unique_ptr<GuestReader> own_reader_;
  std::unique_ptr<Reporter> reporter_;
  std::thread thread_;
};

class AgentChannelTest : public ::testing::Test {
 protected:
  std::string proc_root_ = MakeProcTree();
};

TEST_F(AgentChannelTest, ReportArrivesAndTheAgentSurvivesADaemonRestart) {
  auto daemon = std::make_unique<Daemon>("127.0.0.1:0");
  const std::string address = daemon->address();
  Agent agent(proc_root_, address, kVictim, TokenFor(kVictim));

  ASSERT_TRUE(WaitUntil([&] { return daemon->store->FreshSignals(kVictim).has_value(); }));
  std::optional<AgentSignals> s = daemon->store->FreshSignals(kVictim);
  EXPECT_EQ(s->mem_total_bytes, static_cast<int64_t>(24684092 * kKiB));
  EXPECT_EQ(s->active_file_bytes, static_cast<int64_t>(112920 * kKiB));
  EXPECT_THAT(s->psi_some_avg10, Optional(12.5));
  EXPECT_EQ(s->boot_id, kBootA);
  // The service ingests a stream's first report before it marks the stream open
  // (AgentService: Ingest, then StreamOpened): a reader may see the report first.
  EXPECT_TRUE(WaitUntil([&] { return daemon->store->FreshSignals(kVictim)->connected; }));
  // Counters of the captured file do not move: a rate of zero once two samples span 1 s.
  ASSERT_TRUE(WaitUntil([&] { return daemon->store->FreshSignals(kVictim)->refaults_per_second.has_value(); }));
  EXPECT_THAT(daemon->store->FreshSignals(kVictim)->refaults_per_second, Optional(0.0));

  // plimsolld restarts on the same port: the agent reconnects by itself.
  daemon.reset();
  EXPECT_TRUE(WaitUntil([&] { return !agent.reporter().stats().connected; }));
  // A short outage, long enough for a failed attempt against the absent daemon.
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(agent.reporter().stats().last_disconnect, "cannot connect"); }))
      << agent.reporter().stats().last_disconnect;
  const absl::Time restarted = absl::Now();
  daemon = std::make_unique<Daemon>(address);
  ASSERT_TRUE(daemon->started);
  ASSERT_TRUE(WaitUntil([&] { return daemon->store->FreshSignals(kVictim).has_value(); }));
  const absl::Duration reconnect = absl::Now() - restarted;
  std::cout << "reconnected and reporting " << absl::FormatDuration(reconnect) << " after the restart\n";
  EXPECT_LT(reconnect, absl::Seconds(5));
  EXPECT_GE(agent.reporter().stats().connections, 2u);
  // As above: the first report of the new stream may be seen before the stream is marked open
  // (a race that shows under ASan).
  EXPECT_TRUE(WaitUntil([&] { return daemon->store->IsConnected(kVictim); }));
}

TEST_F(AgentChannelTest, SpoofingAgentIsRejectedCountedAndTheVictimUntouched) {
  Daemon daemon("127.0.0.1:0");
  const std::string address = daemon.address();
  auto victim = std::make_unique<Agent>(proc_root_, address, kVictim, TokenFor(kVictim));
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->FreshSignals(kVictim).has_value(); }));
  victim->Stop();
  const AgentSignals before = *daemon.store->Signals(kVictim);
  const uint64_t accepted_before = daemon.store->counters().accepted;

  // The attacker guest knows its own token only, and claims the victim's uuid.
  Agent spoofer(proc_root_, address, kVictim, TokenFor(kAttacker));
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->counters().rejected_for(RejectReason::kBadProof) >= 2; }));
  // Denied on every attempt; it keeps retrying with backoff but never gets in.
  EXPECT_THAT(spoofer.reporter().stats().last_disconnect, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(spoofer.reporter().stats().last_disconnect, HasSubstr("bad_proof"));
  EXPECT_EQ(spoofer.reporter().stats().acks_accepted, 0u);
  spoofer.Stop();

  const AgentSignals after = *daemon.store->Signals(kVictim);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.received, before.received);
  EXPECT_EQ(after.reports_accepted, before.reports_accepted);
  EXPECT_EQ(after.last_reject_reason, "");
  EXPECT_FALSE(after.connected);
  EXPECT_EQ(daemon.store->counters().accepted, accepted_before);
  EXPECT_GE(daemon.ingest->counters().streams.streams_denied, 2u);

  // The same agent with the right token is welcome.
  Agent honest(proc_root_, address, kVictim, TokenFor(kVictim));
  EXPECT_TRUE(WaitUntil([&] { return daemon.store->Signals(kVictim)->reports_accepted > before.reports_accepted; }));
}

// The spike path without real memory pressure: a TCP socket's urgent data raises POLLPRI just
// as a PSI trigger does.
TEST_F(AgentChannelTest, TriggerSendsASpikeReportAtOnce) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int sender = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int watched = accept(listener, nullptr, nullptr);
  ASSERT_GE(watched, 0);
  close(listener);

  Daemon daemon("127.0.0.1:0");
  // A long interval: only the first report (sent on connect) and the spike can arrive.
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim), absl::Seconds(30),
              PsiTrigger::Adopt(watched, "test 1 1"));
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->FreshSignals(kVictim).has_value(); }));
  EXPECT_FALSE(daemon.store->FreshSignals(kVictim)->spike);

  const absl::Time fired = absl::Now();
  ASSERT_EQ(send(sender, "!", 1, MSG_OOB), 1);
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->FreshSignals(kVictim)->spike; }, absl::Seconds(5)));
  const absl::Duration latency = absl::Now() - fired;
  char c;
  recv(watched, &c, 1, MSG_OOB);  // consume the "event" as the kernel does for PSI
  std::cout << "trigger -> spike report stored: " << absl::FormatDuration(latency) << "\n";
  EXPECT_LT(latency, absl::Seconds(1));
  // The reporter counts a spike after Write() returns, which can be after the daemon stored it.
  EXPECT_TRUE(WaitUntil([&] { return agent.reporter().stats().spikes_sent >= 1; }, absl::Seconds(2)));
  close(sender);
}

// The daemon rejects PSI stall time that grows faster than the reports' boottime stamps (plus
// 1 s). An agent stalled between reading PSI and stamping the sample would send a stamp 1.5 s too
// late; the reports after it, measured against it, would then be rejected for about 5 s. The
// reporter reads such a slow sample again instead.
TEST_F(AgentChannelTest, AStallWhileSamplingIsReadAgainNotRejected) {
  Daemon daemon("127.0.0.1:0");
  StallingSource source(proc_root_, /*stall_on_read=*/3, absl::Milliseconds(1500));
  Agent agent(&source, daemon.address(), kVictim, TokenFor(kVictim));
  ASSERT_TRUE(WaitUntil([&] { return source.reads() >= 3; }));
  const uint64_t accepted_at_stall = daemon.store->counters().accepted;
  // Reports go on every 100 ms after the stall. Had the slow sample been sent, the ones after it
  // would be rejected for ~5 s (counted below) before any was accepted again.
  EXPECT_TRUE(WaitUntil([&] { return daemon.store->counters().accepted >= accepted_at_stall + 5; }));
  EXPECT_EQ(daemon.store->counters().rejected_for(RejectReason::kImplausibleRate), 0u);
  EXPECT_GE(agent.reporter().stats().slow_samples, 1u);
}

// A loopback port where something accepts TCP connections and closes them at once: no daemon
// speaks there, and every connection attempt an agent makes is counted, with its time.
class CountingListener {
 public:
  CountingListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CountingListener() {
    stop_.store(true);
    thread_.join();
    close(fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::vector<absl::Time> accepted() const {
    absl::MutexLock l(&mu_);
    return accepted_;
  }

 private:
  void Serve() {
    while (!stop_.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      {
        absl::MutexLock l(&mu_);
        accepted_.push_back(absl::Now());
      }
      close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<absl::Time> accepted_ ABSL_GUARDED_BY(mu_);
};

// Counts the connection attempts themselves: "no stream was opened" alone would also hold for
// an agent that retried in a hot loop.
// The daemon's reclaim bounds, per guest, set by the test.
class TestBoundsProvider : public ReclaimBoundsProvider {
 public:
  std::optional<v1::ReclaimBounds> BoundsFor(const std::string& uuid) override {
    absl::MutexLock l(&mu_);
    auto it = bounds_.find(uuid);
    if (it == bounds_.end()) return std::nullopt;
    return it->second;
  }
  void Set(const std::string& uuid, v1::ReclaimBounds b) {
    absl::MutexLock l(&mu_);
    bounds_[uuid] = std::move(b);
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, v1::ReclaimBounds> bounds_ ABSL_GUARDED_BY(mu_);
};

// The whole loop over a real stream: the daemon's bounds reach the agent in its acks, the agent
// reclaims within them (a fake executor taking from a fake guest's cache), and what it did
// reaches the daemon in its reports, which the daemon validates and stores.
TEST_F(AgentChannelTest, ReclaimBoundsReachTheAgentAndItsReclaimReachesTheDaemon) {
  using ::plimsoll::agent::Reclaimer;
  using ::plimsoll::agent::ReclaimerOptions;
  using ::plimsoll::agent::testing::FakeGuestMemory;
  using ::plimsoll::agent::testing::FakeReclaimExecutor;
  TestBoundsProvider provider;
  v1::ReclaimBounds bounds;
  bounds.set_enabled(true);
  bounds.set_keep_bytes(600 * kMiB);  // the fake guest uses 974 MiB: 374 MiB may go
  bounds.set_step_bytes(64 * kMiB);
  bounds.set_max_bytes_per_second(256 * kMiB);
  provider.Set(kVictim, bounds);
  Daemon daemon("127.0.0.1:0", "", "", &provider);
  ASSERT_TRUE(daemon.started);

  FakeGuestMemory guest;
  auto executor = std::make_unique<FakeReclaimExecutor>(&guest);
  FakeReclaimExecutor* requests = executor.get();
  ReclaimerOptions ro;
  ro.period = absl::Milliseconds(20);
  ro.own.max_bytes_per_second = 1024.0 * kMiB;  // the host's rate is the one in force
  ro.series_start_boottime_ns = ::plimsoll::agent::BoottimeNanos();
  // CLOCK_BOOTTIME, as in the agent: the daemon checks the reclaim rate against the reports'
  // boottime stamps.
  ::plimsoll::agent::BoottimeClock boottime;
  Reclaimer reclaimer(ro, std::move(executor), &guest, &boottime);
  std::thread reclaim_loop([&] { reclaimer.Run(); });
  GuestReader reader(proc_root_);
  Agent agent(&reader, daemon.address(), kVictim, TokenFor(kVictim), &reclaimer);

  // The agent stepped down to the keep, and the daemon saw it.
  ASSERT_TRUE(WaitUntil([&] {
    std::optional<AgentSignals> s = daemon.store->Signals(kVictim);
    return s.has_value() && s->reclaim_reason == "below_keep";
  })) << daemon.store->Signals(kVictim)->reclaim_reason;
  // Within the smallest step (1 MiB) above the keep: the last steps halve what is left.
  const uint64_t taken = 877 * kMiB - guest.file();
  EXPECT_LE(taken, 374 * kMiB);
  EXPECT_GT(taken, 373 * kMiB);
  ASSERT_TRUE(WaitUntil([&] {
    return daemon.store->Signals(kVictim)->reclaim_requested_total_bytes == taken;
  })) << daemon.store->Signals(kVictim)->reclaim_requested_total_bytes;
  std::optional<AgentSignals> s = daemon.store->Signals(kVictim);
  EXPECT_EQ(s->reclaim_achieved_total_bytes, taken);
  EXPECT_THAT(s->reclaim_keep_bytes, Optional(uint64_t{600 * kMiB}));
  EXPECT_THAT(s->reclaim_state, Optional(v1::RECLAIM_STATE_IDLE));
  EXPECT_TRUE(s->reclaim_file_only);
  EXPECT_EQ(daemon.store->counters().rejected_total(), 0u);
  const std::vector<uint64_t> steps = requests->requests();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front(), 64 * kMiB);

  // The daemon says stop: the agent stops at once and says why.
  bounds.set_enabled(false);
  provider.Set(kVictim, bounds);
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->Signals(kVictim)->reclaim_reason == "host_disabled"; }))
      << daemon.store->Signals(kVictim)->reclaim_reason;
  // The cache refills; nothing may be taken now.
  guest.SetFile(100 * kMiB, 800 * kMiB);
  guest.SetFree(50 * kMiB);
  const size_t before = requests->requests().size();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(requests->requests().size(), before);

  agent.Stop();
  reclaimer.Stop();
  reclaim_loop.join();
}

TEST_F(AgentChannelTest, NoDaemonMeansBackoffNotASpin) {
  CountingListener port;
  Agent agent(proc_root_, port.address(), kVictim, TokenFor(kVictim));
  ASSERT_TRUE(WaitUntil([&] { return port.accepted().size() >= 5; })) << port.accepted().size() << " attempts";
  const std::vector<absl::Time> at = port.accepted();
  // The test agent backs off 100 ms doubling to 400 ms, each delay scaled by [0.75, 1.25]: the
  // fifth attempt comes at least 75 + 150 + 300 + 300 = 825 ms after the first (100 ms of slack
  // for when the listener thread saw them). Without backoff the five come within milliseconds.
  EXPECT_GE(at[4] - at[0], absl::Milliseconds(725)) << absl::FormatDuration(at[4] - at[0]);
  for (size_t i = 1; i < at.size() && i < 5; ++i) {
    EXPECT_GE(at[i] - at[i - 1], absl::Milliseconds(50)) << "attempt " << i + 1;
  }
  const plimsoll::agent::ReporterStats stats = agent.reporter().stats();
  EXPECT_EQ(stats.connections, 0u);
  EXPECT_EQ(stats.reports_sent, 0u);  // nothing is sampled or queued while disconnected
  EXPECT_FALSE(stats.last_disconnect.empty());
}

// ---- TLS on the agent channel: server-authenticated, the reporter verifies the daemon ----

class AgentChannelTlsTest : public AgentChannelTest {
 protected:
  static void SetUpTestSuite() {
    std::string dir = ::testing::TempDir() + "/agent_pki_XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    absl::StatusOr<TestPki> made = MakeTestPki(dir);
    ASSERT_TRUE(made.ok()) << made.status();
    pki_ = new TestPki(*std::move(made));
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(pki_, nullptr); }

  static AgentTls TrustingCa(const std::string& ca_file, const std::string& server_name = "") {
    AgentTls tls;
    tls.ca_pem = ReadFileForTest(ca_file);
    tls.server_name = server_name;
    return tls;
  }

  static TestPki* pki_;
};
TestPki* AgentChannelTlsTest::pki_ = nullptr;

TEST_F(AgentChannelTlsTest, ReportArrivesOverTls) {
  // The test PKI's server certificate names 127.0.0.1 and localhost.
  Daemon daemon("127.0.0.1:0", pki_->server_cert, pki_->server_key);
  ASSERT_TRUE(daemon.started);
  EXPECT_TRUE(daemon.ingest->tls());
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim), absl::Milliseconds(100), nullptr,
              TrustingCa(pki_->ca_cert));
  ASSERT_TRUE(WaitUntil([&] { return daemon.store->FreshSignals(kVictim).has_value(); }));
  EXPECT_EQ(daemon.store->FreshSignals(kVictim)->mem_total_bytes, static_cast<int64_t>(24684092 * kKiB));
  EXPECT_TRUE(WaitUntil([&] { return agent.reporter().stats().acks_accepted >= 2; }));

  // --tls_server_name: dialled by address, verified against another name the certificate holds.
  Agent named(proc_root_, daemon.address(), kAttacker, TokenFor(kAttacker), absl::Milliseconds(100),
              nullptr, TrustingCa(pki_->ca_cert, "localhost"));
  EXPECT_TRUE(WaitUntil([&] { return daemon.store->FreshSignals(kAttacker).has_value(); }));
}

TEST_F(AgentChannelTlsTest, AgentTrustingAnotherCaDoesNotConnectAndSaysWhy) {
  Daemon daemon("127.0.0.1:0", pki_->server_cert, pki_->server_key);
  ASSERT_TRUE(daemon.started);
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim), absl::Milliseconds(100), nullptr,
              TrustingCa(pki_->other_ca_cert));
  ASSERT_TRUE(WaitUntil([&] { return agent.reporter().stats().attempts >= 3; }));  // a few attempts
  const plimsoll::agent::ReporterStats stats = agent.reporter().stats();
  std::cout << "wrong CA: " << stats.last_disconnect << "\n";
  EXPECT_EQ(stats.connections, 0u);
  EXPECT_EQ(stats.reports_sent, 0u);
  EXPECT_THAT(stats.last_disconnect, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(stats.last_disconnect, HasSubstr("(TLS)"));
  EXPECT_THAT(stats.last_disconnect, AnyOf(HasSubstr("CERTIFICATE_VERIFY_FAILED"), HasSubstr("andshake")));
  EXPECT_FALSE(daemon.store->Signals(kVictim).has_value());
  EXPECT_EQ(daemon.ingest->counters().streams.streams_opened, 0u);
}

TEST_F(AgentChannelTlsTest, AgentCheckingAnotherServerNameDoesNotConnect) {
  Daemon daemon("127.0.0.1:0", pki_->server_cert, pki_->server_key);
  ASSERT_TRUE(daemon.started);
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim), absl::Milliseconds(100), nullptr,
              TrustingCa(pki_->ca_cert, "plimsoll-host.example"));
  ASSERT_TRUE(WaitUntil([&] { return agent.reporter().stats().attempts >= 3; }));  // a few attempts
  std::cout << "wrong name: " << agent.reporter().stats().last_disconnect << "\n";
  EXPECT_EQ(agent.reporter().stats().connections, 0u);
  EXPECT_FALSE(daemon.store->Signals(kVictim).has_value());
}

TEST_F(AgentChannelTlsTest, PlaintextAgentCannotTalkToATlsListener) {
  Daemon daemon("127.0.0.1:0", pki_->server_cert, pki_->server_key);
  ASSERT_TRUE(daemon.started);
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim));
  ASSERT_TRUE(WaitUntil([&] { return agent.reporter().stats().attempts >= 3; }));  // a few attempts
  const plimsoll::agent::ReporterStats stats = agent.reporter().stats();
  std::cout << "plaintext agent, TLS listener: " << stats.last_disconnect << "\n";
  EXPECT_EQ(stats.acks_accepted, 0u);
  EXPECT_FALSE(stats.connected);
  EXPECT_THAT(stats.last_disconnect, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(stats.last_disconnect, HasSubstr("--tls_ca_file"));
  EXPECT_FALSE(daemon.store->Signals(kVictim).has_value());
  EXPECT_EQ(daemon.ingest->counters().streams.streams_opened, 0u);
}

TEST_F(AgentChannelTlsTest, TlsAgentCannotTalkToAPlaintextListener) {
  Daemon daemon("127.0.0.1:0");
  ASSERT_TRUE(daemon.started);
  EXPECT_FALSE(daemon.ingest->tls());
  Agent agent(proc_root_, daemon.address(), kVictim, TokenFor(kVictim), absl::Milliseconds(100), nullptr,
              TrustingCa(pki_->ca_cert));
  ASSERT_TRUE(WaitUntil([&] { return agent.reporter().stats().attempts >= 3; }));  // a few attempts
  std::cout << "TLS agent, plaintext listener: " << agent.reporter().stats().last_disconnect << "\n";
  EXPECT_EQ(agent.reporter().stats().connections, 0u);
  EXPECT_FALSE(daemon.store->Signals(kVictim).has_value());
}

TEST_F(AgentChannelTlsTest, TlsFilesAreCheckedAndErrorsNameTheField) {
  EXPECT_TRUE(LoadAgentTlsFiles(pki_->server_cert, pki_->server_key).ok());
  const std::string missing = pki_->dir + "/missing.pem";
  const struct {
    std::string cert, key, field;
  } bad[] = {
      {missing, pki_->server_key, "agent.agent_tls_cert_file"},
      {pki_->server_cert, missing, "agent.agent_tls_key_file"},
      {pki_->server_key, pki_->server_key, "agent.agent_tls_cert_file"},   // a key is not a certificate
      {pki_->server_cert, pki_->server_cert, "agent.agent_tls_key_file"},  // nor the reverse
      {pki_->server_cert, pki_->admin_key, "agent.agent_tls_key_file"},    // another certificate's key
  };
  for (const auto& b : bad) {
    absl::StatusOr<AgentTlsPem> pem = LoadAgentTlsFiles(b.cert, b.key);
    ASSERT_FALSE(pem.ok()) << b.cert << " " << b.key;
    EXPECT_EQ(pem.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(pem.status().message()), HasSubstr(b.field)) << pem.status();
  }
  // Half a pair is refused when the listener starts, naming the missing half.
  ReportValidator validator(TestHostKey());
  AgentStore store(&validator, RealClock::Get());
  AgentIngestOptions half;
  half.tcp_listen = "127.0.0.1:0";
  half.tls_cert_file = pki_->server_cert;
  AgentIngest ingest(half, &store, RealClock::Get());
  const absl::Status s = ingest.Start(/*hypervisor=*/nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("agent.agent_tls_key_file")) << s;
}

// Who carries a token: TCP proves every report with one; on virtio-serial and vsock the host
// knows the guest (its port, its CID), so the agent refuses to be given one there.
TEST(ReporterTokenTest, VsockAndVirtioSerialTakeNoTokenAndTcpNeedsOne) {
  ReporterOptions o;
  o.guest_uuid = kVictim;
  o.boot_id = kBootA;
  o.interval = absl::Seconds(1);
  for (const char* server : {"vsock:2:9588", "virtio-serial:org.plimsoll.agent.0"}) {
    o.server = *ParseServerAddress(server);
    o.token.clear();
    EXPECT_TRUE(Reporter::Create(o, nullptr, nullptr).ok()) << server;
    o.token = TokenFor(kVictim);
    absl::StatusOr<std::unique_ptr<Reporter>> with_token = Reporter::Create(o, nullptr, nullptr);
    ASSERT_FALSE(with_token.ok()) << server;
    EXPECT_THAT(std::string(with_token.status().message()), HasSubstr("no token")) << server;
  }
  o.server = *ParseServerAddress("127.0.0.1:9588");
  o.token = TokenFor(kVictim);
  EXPECT_TRUE(Reporter::Create(o, nullptr, nullptr).ok());
  o.token.clear();
  EXPECT_FALSE(Reporter::Create(o, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace plimsoll::server::agent
