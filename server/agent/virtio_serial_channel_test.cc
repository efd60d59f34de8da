// Both ends of the virtio-serial agent channel in one process: the real Reporter (agent side,
// --server=virtio-serial:..., no token) opens its "port", a pty standing for the guest's
// character device, and FakeQemu joins the pty's other side to a unix socket where QEMU would
// listen; the real ingest with its virtio-serial connector (daemon side) finds that socket
// through the FakeHypervisor and connects. What QEMU does that matters here is mimicked: one
// host client at a time, and when the host client leaves, the guest's port hangs up (here: the
// pty is replaced by a new one).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/dial.h"
#include "agent/guest_reader.h"
#include "agent/reporter.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/agent_store.h"
#include "server/agent/testing/guest_proc_tree.h"
#include "server/agent/testing/test_reports.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers
using ::plimsoll::agent::GuestReader;
using ::plimsoll::agent::ParseServerAddress;
using ::plimsoll::agent::Reporter;
using ::plimsoll::agent::ReporterOptions;

// A guest /proc tree from this machine's captures, and an empty /dev/virtio-ports.
std::string MakeProcTree() {
  const std::string root = testing::MakeProcTree("virtio_root");
  mkdir((root + "/dev").c_str(), 0755);
  mkdir((root + "/dev/virtio-ports").c_str(), 0755);
  return root;
}

// One domain's channel as QEMU runs it: a listening unix socket (the host end) and the guest's
// port (a pty slave, reached through ROOT/dev/virtio-ports/NAME).
class FakeQemu {
 public:
  FakeQemu(const std::string& socket_path, const std::string& port_link)
      : socket_path_(socket_path), port_link_(port_link) {
    NewPort();
    unlink(socket_path.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeQemu() {
    stop_.store(true);
    thread_.join();
    close(listen_fd_);
    if (master_ >= 0) close(master_);
    unlink(socket_path_.c_str());
  }
  int host_connections() const { return host_connections_.load(); }

 private:
  // A fresh port: what the guest sees after the host end went away and came back.
  void NewPort() {
    if (master_ >= 0) close(master_);
    master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    grantpt(master_);
    unlockpt(master_);
    const std::string slave = ptsname(master_);
    const int s = open(slave.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    termios t{};
    tcgetattr(s, &t);
    cfmakeraw(&t);
    tcsetattr(s, TCSANOW, &t);
    close(s);
    unlink(port_link_.c_str());
    EXPECT_EQ(symlink(slave.c_str(), port_link_.c_str()), 0);
  }

  void Run() {
    while (!stop_.load()) {
      pollfd l{listen_fd_, POLLIN, 0};
      if (poll(&l, 1, 50) != 1) continue;
      const int host = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (host < 0) continue;
      host_connections_.fetch_add(1);
      Pump(host);
      close(host);
      NewPort();  // the guest's port hung up with the host end
    }
  }

  // Moves bytes until the host end closes. The guest side closing (agent restart) is not the
  // end: QEMU keeps the host connection and stops reading it until the guest opens the port.
  void Pump(int host) {
    char buf[16384];
    while (!stop_.load()) {
      pollfd p[2] = {{host, POLLIN, 0}, {master_, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        const ssize_t n = read(host, buf, sizeof(buf));
        if (n <= 0) return;
        WriteAll(master_, buf, static_cast<size_t>(n), false);
      }
      if ((p[1].revents & POLLIN) != 0) {
        const ssize_t n = read(master_, buf, sizeof(buf));
        if (n > 0) WriteAll(host, buf, static_cast<size_t>(n), true);
      } else if ((p[1].revents & POLLHUP) != 0) {
        absl::SleepFor(absl::Milliseconds(20));  // no guest opener right now
      }
    }
  }
  static void WriteAll(int fd, const char* data, size_t n, bool socket) {
    while (n > 0) {
      const ssize_t w = socket ? send(fd, data, n, MSG_NOSIGNAL) : write(fd, data, n);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        absl::SleepFor(absl::Milliseconds(1));
        continue;
      }
      if (w <= 0) return;
      data += w;
      n -= static_cast<size_t>(w);
    }
  }

  const std::string socket_path_;
  const std::string port_link_;
  int listen_fd_ = -1;
  int master_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> host_connections_{0};
  std::thread thread_;
};

class VirtioSerialChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeProcTree();
    socket_path_ = absl::StrCat("/tmp/plimsoll-vs-", getpid(), ".sock");
    ValidatorOptions vo;
    vo.reports_per_second = 100;  // the agent reports every 100 ms
    vo.burst = 100;
    validator_ = std::make_unique<ReportValidator>(std::string(), vo);  // no key: no tokens here
    store_ = std::make_unique<AgentStore>(validator_.get(), RealClock::Get());
    store_->SetKnownGuests({{kVictim, GuestLimits{32 * kGiB}}, {kAttacker, GuestLimits{32 * kGiB}}});
    hv_.AddDomain(kVictim, "victim", 32 * kGiB, 32 * kGiB);
    hv_.AddDomain(kAttacker, "attacker", 32 * kGiB, 32 * kGiB);
    ASSERT_TRUE(hv_.Connect().ok());
  }
  void TearDown() override {
    if (reporter_) reporter_->Stop();
    if (agent_thread_.joinable()) agent_thread_.join();
    if (ingest_) ingest_->Shutdown();
  }

  void StartDaemon() {
    VirtioSerialOptions o;
    o.rescan_every = absl::Milliseconds(200);
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Milliseconds(500);
    // The test gives the domain its channel after the daemon side may have looked once.
    o.recheck_without_channel = absl::Milliseconds(200);
    AgentIngestOptions io;
    io.virtio_serial = o;
    ingest_ = std::make_unique<AgentIngest>(io, store_.get(), RealClock::Get());
    const absl::Status started = ingest_->Start(&hv_);
    ASSERT_TRUE(started.ok()) << started;
  }

  // The domain `owner` owns the port; its agent claims to be `claimed`.
  void StartAgent(const std::string& owner, const std::string& claimed) {
    hypervisor::AgentChannelInfo info;
    info.found = true;
    info.socket_path = socket_path_;
    hv_.SetAgentChannel(owner, kDefaultChannelName, info);
    qemu_ = std::make_unique<FakeQemu>(socket_path_, root_ + "/dev/virtio-ports/" + kDefaultChannelName);
    ReporterOptions o;
    absl::StatusOr<::plimsoll::agent::ServerAddress> server = ParseServerAddress(::plimsoll::agent::kDefaultServer);
    ASSERT_TRUE(server.ok());
    o.server = *server;
    o.server.virtio_root = root_;
    o.server_text = ::plimsoll::agent::kDefaultServer;
    o.guest_uuid = claimed;
    o.boot_id = kBootA;
    o.interval = absl::Milliseconds(100);
    o.connect_timeout = absl::Seconds(2);
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Milliseconds(400);
    reader_ = std::make_unique<GuestReader>(root_);
    absl::StatusOr<std::unique_ptr<Reporter>> r = Reporter::Create(o, reader_.get(), nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    reporter_ = *std::move(r);
    agent_thread_ = std::thread([this] { reporter_->Run(); });
  }

  uint64_t Accepted(const std::string& uuid) {
    std::optional<AgentSignals> s = store_->Signals(uuid);
    return s.has_value() ? s->reports_accepted : 0;
  }

  std::string root_;
  std::string socket_path_;
  hypervisor::FakeHypervisor hv_;
  std::unique_ptr<ReportValidator> validator_;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<AgentIngest> ingest_;
  std::unique_ptr<FakeQemu> qemu_;
  std::unique_ptr<GuestReader> reader_;
  std::unique_ptr<Reporter> reporter_;
  std::thread agent_thread_;
};

TEST_F(VirtioSerialChannelTest, ReportsFlowAndBothSidesRecoverFromADaemonRestart) {
  StartDaemon();
  StartAgent(kVictim, kVictim);
  ASSERT_TRUE(WaitUntil([&] { return Accepted(kVictim) >= 3; })) << reporter_->stats().last_disconnect;
  EXPECT_TRUE(store_->IsConnected(kVictim));
  EXPECT_EQ(reporter_->stats().acks_rejected, 0u);

  // plimsolld restarts: its end closes (the guest's port hangs up), a new one connects.
  ingest_->Shutdown();
  ingest_.reset();
  const uint64_t before = Accepted(kVictim);
  const absl::Time restarted = absl::Now();
  StartDaemon();
  ASSERT_TRUE(WaitUntil([&] { return Accepted(kVictim) > before; }))
      << "no report after the restart; agent: " << reporter_->stats().last_disconnect;
  std::printf("reports again %s after the daemon side restarted (host connections: %d)\n",
              absl::FormatDuration(absl::Now() - restarted).c_str(), qemu_->host_connections());
  EXPECT_GE(qemu_->host_connections(), 2);
  EXPECT_GE(reporter_->stats().connections, 2u);
}

TEST_F(VirtioSerialChannelTest, AnAgentClaimingAnotherGuestIsRejectedAndTheOtherIsUntouched) {
  StartDaemon();
  StartAgent(kAttacker, kVictim);  // the attacker's port, the victim's uuid
  ASSERT_TRUE(WaitUntil([&] {
    return store_->counters().rejected_for(RejectReason::kChannelIdentityMismatch) >= 2;
  })) << reporter_->stats().last_disconnect;
  EXPECT_EQ(Accepted(kVictim), 0u);
  EXPECT_FALSE(store_->Signals(kVictim).has_value());
  EXPECT_FALSE(store_->IsConnected(kVictim));
  EXPECT_EQ(reporter_->stats().acks_accepted, 0u);
}

}  // namespace
}  // namespace plimsoll::server::agent
