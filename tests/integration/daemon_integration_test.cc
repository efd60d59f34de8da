// plimsolld end to end in one process, with real components only: the real
// libvirt library (test driver, test:///.../host.xml), a real gRPC server on a
// real unix socket and TCP port, and /metrics read over HTTP. The host's /proc
// is a captured tree so the budget is known.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "plimsoll/v1/control.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "tests/integration/http_get.h"

namespace plimsoll {
namespace {

constexpr int64_t kMiB = 1LL << 20;

// A short private directory: unix socket paths are limited to 107 bytes, and
// Bazel's TEST_TMPDIR is longer than that.
std::string TestTmp() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/plimsoll-it-XXXXXX";
    return new std::string(mkdtemp(tmpl));
  }();
  return *dir;
}

std::string Runfile(const std::string& rel) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir && ws) return absl::StrCat(srcdir, "/", ws, "/", rel);
  return rel;
}

// A fake /proc with a 16 GiB host.
std::string MakeProcRoot() {
  const std::string root = TestTmp() + "/procroot";
  std::filesystem::create_directories(root + "/proc/pressure");
  std::ofstream(root + "/proc/meminfo") << "MemTotal:       16777216 kB\nMemFree:         8388608 kB\n"
                                          "MemAvailable:   12582912 kB\nBuffers:          102400 kB\n"
                                          "Cached:          2097152 kB\n";
  std::ofstream(root + "/proc/pressure/memory")
      << "some avg10=1.50 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=99\n";
  return root;
}

server::Options BaseOptions(const std::string& grpc_listen) {
  server::Options o = *server::Resolve(server::WithDefaults({}));
  o.libvirt_uri = "test://" + std::filesystem::absolute(Runfile("tests/integration/testdata/host.xml")).string();
  o.grpc_listen = grpc_listen;
  o.metrics_listen = "127.0.0.1:0";
  o.tick = absl::Milliseconds(100);
  o.proc_root = MakeProcRoot();
  o.host_reserve_bytes = 0;
  o.guest_memory_budget_bytes = 1024 * kMiB;  // far below the guests' 7 GiB: pressure
  o.agent_listen = "127.0.0.1:0";
  o.agent_host_key_file = TestTmp() + "/agent.key";
  return o;
}

// One daemon for the whole suite: stopping prometheus-cpp's exposer (civetweb)
// takes ~2 s, which would otherwise be paid per test.
class DaemonIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    socket_path_ = new std::string(TestTmp() + "/plimsolld.sock");
    auto d = server::Daemon::Create(BaseOptions("unix:" + *socket_path_));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
    absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = plimsoll::v1::Control::NewStub(
        grpc::CreateChannel("unix:" + *socket_path_, grpc::InsecureChannelCredentials()));
    // Wait for the first ticks to publish.
    for (int i = 0; i < 100 && daemon_->loop().ticks() < 3; ++i) absl::SleepFor(absl::Milliseconds(20));
  }

  plimsoll::v1::ListGuestsResponse List() {
    plimsoll::v1::ListGuestsResponse r;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->ListGuests(&ctx, {}, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  static std::string* socket_path_;
  static server::Daemon* daemon_;
  std::unique_ptr<plimsoll::v1::Control::Stub> stub_;
};

std::string* DaemonIntegrationTest::socket_path_ = nullptr;
server::Daemon* DaemonIntegrationTest::daemon_ = nullptr;

TEST_F(DaemonIntegrationTest, ListsEveryGuestWithLimitsAndStats) {
  auto r = List();
  ASSERT_EQ(r.guests_size(), 3);
  // Sorted by name.
  EXPECT_EQ(r.guests(0).name(), "batch");
  EXPECT_EQ(r.guests(1).name(), "db");
  EXPECT_EQ(r.guests(2).name(), "web");
  const auto& web = r.guests(2);
  EXPECT_EQ(web.uuid(), "aaaaaaaa-0000-0000-0000-000000000001");
  EXPECT_EQ(web.max_bytes(), 2048 * kMiB);
  EXPECT_EQ(web.actual_bytes(), 1536 * kMiB);
  EXPECT_EQ(web.target_bytes(), 1536 * kMiB);  // adopted, not moved
  EXPECT_EQ(web.min_bytes(), 512 * kMiB);      // 0.25 * 2 GiB
  EXPECT_EQ(web.run_state(), plimsoll::v1::GUEST_RUN_STATE_RUNNING);
  // The test driver reports usable = cur/2, disk_caches = cur/8 (real-guests.md).
  EXPECT_EQ(web.stats().usable().bytes(), 768 * kMiB);
  EXPECT_EQ(web.stats().disk_caches().bytes(), 192 * kMiB);
  EXPECT_EQ(web.stats().usable().provenance(), plimsoll::v1::PROVENANCE_LIBVIRT);
  EXPECT_EQ(r.host().guest_budget_bytes(), 1024 * kMiB);
  EXPECT_EQ(r.host().mem_total_bytes(), 16LL << 30);
  EXPECT_DOUBLE_EQ(r.host().psi_memory_some_avg10(), 1.5);
  EXPECT_TRUE(r.host().libvirt_connected());
  EXPECT_EQ(r.host().policy(), "mom");
}

TEST_F(DaemonIntegrationTest, TestDriverStatsNeverAdvanceSoNothingShrinksUnderPressure) {
  // The budget (1 GiB) is far below the guests' 7 GiB, so MoM wants to shrink,
  // but the test driver's last_update never moves: stale stats must win.
  for (int i = 0; i < 100 && daemon_->loop().ticks() < 8; ++i) absl::SleepFor(absl::Milliseconds(20));
  auto r = List();
  ASSERT_EQ(r.guests_size(), 3);
  for (const auto& g : r.guests()) {
    EXPECT_FALSE(g.stats().stats_fresh()) << g.name();
    EXPECT_EQ(g.management_state(), plimsoll::v1::MANAGEMENT_STATE_STALE_STATS) << g.name();
    EXPECT_NE(g.last_decision().direction(), plimsoll::v1::DIRECTION_INFLATE) << g.name();
  }
  EXPECT_EQ(r.guests(2).actual_bytes(), 1536 * kMiB);
}

TEST_F(DaemonIntegrationTest, GetGuestByNameOrUuidAndPreciseErrors) {
  plimsoll::v1::GetGuestRequest req;
  plimsoll::v1::Guest g;
  {
    grpc::ClientContext ctx;
    req.set_guest("db");
    ASSERT_TRUE(stub_->GetGuest(&ctx, req, &g).ok());
    EXPECT_EQ(g.max_bytes(), 4096 * kMiB);
  }
  {
    grpc::ClientContext ctx;
    req.set_guest("AAAAAAAA-0000-0000-0000-000000000003");  // UUIDs match case-insensitively
    ASSERT_TRUE(stub_->GetGuest(&ctx, req, &g).ok());
    EXPECT_EQ(g.name(), "batch");
  }
  {
    grpc::ClientContext ctx;
    req.set_guest("nope");
    grpc::Status s = stub_->GetGuest(&ctx, req, &g);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("nope"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    req.set_guest("");
    grpc::Status s = stub_->GetGuest(&ctx, req, &g);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("guest"), std::string::npos);
  }
}

// Value of the series whose line starts with `prefix`, or -1.
double SeriesValue(const std::string& text, const std::string& prefix) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      return std::stod(parts.back());
    }
  }
  return -1;
}

TEST_F(DaemonIntegrationTest, ServesTheRequiredMetricsWithCorrectValues) {
  auto body = testing::HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  for (const char* name :
       {"plimsoll_guest_balloon_target_bytes", "plimsoll_guest_balloon_actual_bytes", "plimsoll_guest_max_bytes",
        "plimsoll_guest_usable_bytes", "plimsoll_guest_disk_caches_bytes", "plimsoll_guest_unused_bytes",
        "plimsoll_guest_stats_age_seconds", "plimsoll_host_guest_budget_bytes", "plimsoll_host_mem_available_bytes",
        "plimsoll_host_psi_memory_some_avg10", "plimsoll_decisions_total", "plimsoll_tick_duration_seconds_bucket",
        "plimsoll_tick_duration_seconds_count"}) {
    EXPECT_NE(body->find(name), std::string::npos) << name;
  }
  const std::string web = "{domain=\"web\",uuid=\"aaaaaaaa-0000-0000-0000-000000000001\"}";
  EXPECT_EQ(SeriesValue(*body, "plimsoll_guest_max_bytes" + web), 2048.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_guest_balloon_actual_bytes" + web), 1536.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_guest_usable_bytes" + web), 768.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_guest_budget_bytes"), 1024.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_mem_available_bytes"), 12.0 * 1024 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_psi_memory_some_avg10"), 1.5);
  EXPECT_GT(SeriesValue(*body, "plimsoll_decisions_total{direction=\"hold\"}"), 0);
  EXPECT_GT(SeriesValue(*body, "plimsoll_tick_duration_seconds_count"), 0);
}

TEST_F(DaemonIntegrationTest, SocketIsOwnerOnlyAndASecondDaemonIsRefused) {
  struct stat st;
  ASSERT_EQ(stat(socket_path_->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto second = server::Daemon::Create(BaseOptions("unix:" + *socket_path_));
  ASSERT_TRUE(second.ok());
  absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s;
  // The first daemon still answers.
  EXPECT_EQ(List().guests_size(), 3);
}

TEST(DaemonTcpTest, ServesOverTcpWithAResolvedPort) {
  auto d = server::Daemon::Create(BaseOptions("127.0.0.1:0"));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Start().ok());
  const std::string addr = (*d)->grpc_address();
  ASSERT_NE(addr, "127.0.0.1:0");
  auto stub = plimsoll::v1::Control::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  plimsoll::v1::HostStatus host;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.set_wait_for_ready(true);
  ASSERT_TRUE(stub->GetHostStatus(&ctx, {}, &host).ok());
  EXPECT_EQ(host.host_reserve_bytes(), 0);
  (*d)->Shutdown();
}

TEST(DaemonStartTest, MetricsPortInUseIsAClearError) {
  auto first = server::Daemon::Create(BaseOptions("unix:" + TestTmp() + "/a.sock"));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  server::Options o = BaseOptions("unix:" + TestTmp() + "/b.sock");
  o.metrics_listen = absl::StrCat("127.0.0.1:", (*first)->metrics_port());
  auto second = server::Daemon::Create(o);
  ASSERT_TRUE(second.ok());
  absl::Status s = (*second)->Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("metrics_listen"), std::string::npos) << s;
}

}  // namespace
}  // namespace plimsoll
