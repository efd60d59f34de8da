// plimsolld with agent.vsock_port set and nothing else for agents (no TCP listener, no
// virtio-serial channels): connections come from a FakeVsockListener with chosen CIDs, the
// domains and their CIDs from a FakeHypervisor. Checks what only the daemon's wiring can break:
// reports reach the store as the CID's domain, a lie and a stranger show in /metrics, and a
// lifecycle event makes the daemon re-read the CIDs at once.
#include <poll.h>
#include <unistd.h>

#include <functional>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/agent/testing/fake_guest.h"
#include "server/agent/testing/fake_vsock_listener.h"
#include "server/agent/testing/test_reports.h"
#include "server/config/config.h"
#include "server/daemon.h"
#include "server/hypervisor/testing/fake_hypervisor.h"
#include "tests/integration/http_get.h"

namespace plimsoll {
namespace {

using server::agent::testing::FakeGuest;
using server::agent::testing::FakeVsockListener;
using server::agent::testing::kAttacker;
using server::agent::testing::kGiB;
using server::agent::testing::kVictim;

std::string TestTmp() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/plimsoll-vsock-XXXXXX";
    return new std::string(mkdtemp(tmpl));
  }();
  return *dir;
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

bool Scraped(int port, const std::string& line) {
  absl::StatusOr<std::string> body = testing::HttpGet(port, "/metrics");
  return body.ok() && body->find(line + "\n") != std::string::npos;
}

bool ClosedUnanswered(int fd) {
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (absl::Now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    char c;
    return read(fd, &c, 1) <= 0;
  }
  return false;
}

TEST(DaemonVsockTest, ReportsAreTheCidsDomainAndLiesStrangersAndRestartsShowInMetrics) {
  auto hv = std::make_unique<hypervisor::FakeHypervisor>();
  hypervisor::FakeHypervisor* fake = hv.get();
  fake->AddDomain(kVictim, "victim", kGiB, kGiB);
  fake->AddDomain(kAttacker, "attacker", kGiB, kGiB);
  fake->SetVsockCid(kVictim, 5);
  fake->SetVsockCid(kAttacker, 6);
  auto listener = std::make_unique<FakeVsockListener>();
  FakeVsockListener* vsock = listener.get();

  server::Options o = *server::Resolve(server::WithDefaults({}));
  o.libvirt_uri = "fake://";
  o.grpc_listen = absl::StrCat("unix:", TestTmp(), "/plimsolld.sock");
  o.metrics_listen = "127.0.0.1:0";
  o.agent_listen = "";
  o.agent_channel_name = "";
  o.agent_vsock_port = 9588;
  o.tick = absl::Milliseconds(100);
  o.dry_run = true;
  const std::string root = TestTmp() + "/procroot";
  std::filesystem::create_directories(root + "/proc");
  std::ofstream(root + "/proc/meminfo") << "MemTotal: 16777216 kB\nMemFree: 8388608 kB\nMemAvailable: 12582912 kB\n"
                                          "Buffers: 102400 kB\nCached: 2097152 kB\n";
  o.proc_root = root;
  server::DaemonOverrides overrides;
  overrides.hypervisor = std::move(hv);
  overrides.vsock_listener = std::move(listener);
  auto created = server::Daemon::Create(o, std::move(overrides));
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<server::Daemon> daemon = *std::move(created);
  ASSERT_TRUE(daemon->Start().ok());
  const int port = daemon->metrics_port();
  // The loop has listed the guests (the store accepts reports of managed guests only).
  ASSERT_TRUE(WaitFor([&] { return daemon->loop().ticks() >= 2; }));
  EXPECT_TRUE(WaitFor([&] { return Scraped(port, "plimsoll_agent_vsock_domains 2"); }));

  FakeGuest victim;
  ASSERT_TRUE(victim.Open(vsock->Connect(5), kVictim));
  std::optional<v1::AgentReportAck> ack = victim.Report();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted()) << ack->reject_reason();

  FakeGuest attacker;
  ASSERT_TRUE(attacker.Open(vsock->Connect(6), kAttacker));
  EXPECT_FALSE(attacker.Report(kVictim).has_value()) << "a report for another uuid must end the stream";
  EXPECT_EQ(attacker.End().error_code(), grpc::StatusCode::PERMISSION_DENIED);

  const int stranger = vsock->Connect(77);
  EXPECT_TRUE(ClosedUnanswered(stranger));
  close(stranger);

  EXPECT_TRUE(WaitFor([&] {
    return Scraped(port, "plimsoll_agent_vsock_connections_total{result=\"accepted\"} 2") &&
           Scraped(port, "plimsoll_agent_vsock_connections_total{result=\"unknown_cid\"} 1") &&
           Scraped(port, "plimsoll_agent_reports_rejected_total{reason=\"channel_identity_mismatch\"} 1") &&
           Scraped(port, "plimsoll_agent_streams_opened_total 2");
  })) << testing::HttpGet(port, "/metrics").value_or("");

  // The victim restarts with another CID. The lifecycle event makes the daemon re-read the
  // CIDs (at most once a second; the periodic refresh is a minute away): its agent's first
  // connection from the new CID is accepted, none is refused as a stranger.
  fake->SetVsockCid(kVictim, 9);
  hypervisor::DomainEvent started;
  started.kind = hypervisor::DomainEvent::Kind::kStarted;
  started.uuid = kVictim;
  started.name = "victim";
  fake->EmitEvent(started);
  absl::SleepFor(absl::Milliseconds(1500));
  FakeGuest again;
  again.seconds = 100;
  ASSERT_TRUE(again.Open(vsock->Connect(9), kVictim)) << "CID 9 was not the victim's 1.5 s after its lifecycle event";
  EXPECT_TRUE(again.Report().value_or(v1::AgentReportAck()).accepted());
  EXPECT_TRUE(Scraped(port, "plimsoll_agent_vsock_connections_total{result=\"unknown_cid\"} 1"))
      << testing::HttpGet(port, "/metrics").value_or("");
  // The old CID is nobody's now.
  const int old_cid = vsock->Connect(5);
  EXPECT_TRUE(ClosedUnanswered(old_cid));
  close(old_cid);
  daemon.reset();
}

}  // namespace
}  // namespace plimsoll
