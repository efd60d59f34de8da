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
#include "common/testing/test_certs.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "plimsoll/v1/control.grpc.pb.h"
#include "server/api/security/tls_credentials.h"
#include "server/config/config.h"
#include "server/config/config_reload.h"
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
  EXPECT_EQ(r.host().policy(), "pagecache");
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

// The test driver's stats never advance, so every guest counts at its ceiling: 2 + 4 + 1 GiB,
// plus the default 1 GiB burst reserve, on a 1 GiB budget. The host is far over its line and
// offers nothing; the same figures are on /metrics.
TEST_F(DaemonIntegrationTest, GetHostLineAnswersWithTheFiguresAndTheMetricsCarryThem) {
  plimsoll::v1::HostLine line;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->GetHostLine(&ctx, {}, &line);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(line.tick(), 0);
  EXPECT_FALSE(line.stale()) << line.stale_reason();
  EXPECT_EQ(line.capacity_bytes(), 1024 * kMiB);
  EXPECT_EQ(line.guests(), 3);
  EXPECT_EQ(line.guests_at_ceiling(), 3);
  EXPECT_EQ(line.burst_reserve_bytes(), 1024 * kMiB);
  EXPECT_EQ(line.new_guest_room_bytes(), 512 * kMiB);
  EXPECT_EQ(line.committed_bytes(), (2048 + 4096 + 1024 + 1024) * kMiB);
  EXPECT_EQ(line.headroom_bytes(), (1024 - 8192 - 512) * kMiB);
  EXPECT_TRUE(line.over_line());
  EXPECT_EQ(line.offered_bytes(), 0);
  EXPECT_NE(line.explanation().find("at_ceiling=3"), std::string::npos) << line.explanation();
  const absl::Duration age = absl::Now() - absl::FromUnixMicros(line.computed_unix_micros());
  EXPECT_LT(age, absl::Seconds(10)) << "computed by a recent tick";

  auto body = testing::HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_line_capacity_bytes "), 1024.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_line_committed_bytes "), 8192.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_line_headroom_bytes "), -7680.0 * kMiB);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_line_offered_bytes "), 0);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_over_line "), 1);
  EXPECT_EQ(SeriesValue(*body, "plimsoll_host_line_stale "), 0);
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

// TCP is served with mutual TLS only: certificates made with openssl at test time.
TEST(DaemonTcpTest, ServesOverTcpWithMutualTlsAndAResolvedPort) {
  const std::string pki_dir = TestTmp() + "/pki";
  std::filesystem::create_directories(pki_dir);
  auto pki = ::plimsoll::testing::MakeTestPki(pki_dir);
  ASSERT_TRUE(pki.ok()) << pki.status();
  server::ControlApiOptions control;
  control.unix_socket = false;
  control.cert_file = pki->server_cert;
  control.key_file = pki->server_key;
  control.client_ca_file = pki->ca_cert;
  control.state_file.clear();
  auto d = server::Daemon::Create(BaseOptions("127.0.0.1:0"), control);
  ASSERT_TRUE(d.ok()) << d.status();
  absl::Status started = (*d)->Start();
  ASSERT_TRUE(started.ok()) << started;
  const std::string addr = (*d)->grpc_address();
  ASSERT_NE(addr, "127.0.0.1:0");
  auto stub_with = [&](const std::string& cert, const std::string& key) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ::plimsoll::testing::ReadFileForTest(pki->ca_cert);
    if (!cert.empty()) {
      o.pem_cert_chain = ::plimsoll::testing::ReadFileForTest(cert);
      o.pem_private_key = ::plimsoll::testing::ReadFileForTest(key);
    }
    return plimsoll::v1::Control::NewStub(grpc::CreateChannel(addr, grpc::SslCredentials(o)));
  };
  auto deadline = [](grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  };
  {
    auto admin = stub_with(pki->admin_cert, pki->admin_key);
    plimsoll::v1::HostStatus host;
    grpc::ClientContext ctx;
    deadline(ctx);
    ctx.set_wait_for_ready(true);
    grpc::Status s = admin->GetHostStatus(&ctx, {}, &host);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(host.host_reserve_bytes(), 0);
    // The admin may change things.
    plimsoll::v1::SetHostPolicyRequest req;
    req.mutable_policy()->set_guest_memory_budget_bytes(1536 * kMiB);
    plimsoll::v1::SetHostPolicyResponse resp;
    grpc::ClientContext ctx2;
    deadline(ctx2);
    s = admin->SetHostPolicy(&ctx2, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_NE(resp.policy().updated_by().find("ops-admin"), std::string::npos) << resp.policy().updated_by();
  }
  {
    // A reader may read but not change; no certificate at all is refused outright.
    auto reader = stub_with(pki->reader_cert, pki->reader_key);
    plimsoll::v1::SetHostPolicyRequest req;
    req.mutable_policy()->set_paused(true);
    plimsoll::v1::SetHostPolicyResponse resp;
    grpc::ClientContext ctx;
    deadline(ctx);
    EXPECT_EQ(reader->SetHostPolicy(&ctx, req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    auto anonymous = stub_with("", "");
    plimsoll::v1::HostStatus host;
    grpc::ClientContext ctx2;
    deadline(ctx2);
    EXPECT_FALSE(anonymous->GetHostStatus(&ctx2, {}, &host).ok());
  }
  (*d)->Shutdown();
}

TEST(DaemonTcpTest, TcpWithoutTlsFilesIsRefusedAtStart) {
  server::Options o = BaseOptions("127.0.0.1:0");
  o.metrics_listen = "";
  auto d = server::Daemon::Create(o);
  ASSERT_TRUE(d.ok()) << d.status();
  absl::Status s = (*d)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("control.tls"), std::string::npos) << s;
}

// The control plane end to end over a real unix socket: overrides set through
// the API act on the libvirt test driver's guests, show in GetGuest and Watch,
// and survive a restart of the daemon through its state file.
class DaemonControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    dir_ = absl::StrCat(TestTmp(), "/control", ++n);
    std::filesystem::create_directories(dir_);
    state_file_ = dir_ + "/state/control-state.textproto";
  }

  // `slow`: one tick at the start and none after it for an hour (writes wake the loop, and the
  // wake is deferred by min_wake_interval): what a read shows then comes from no tick.
  void StartDaemon(bool slow = false) {
    server::Options o = BaseOptions("unix:" + dir_ + "/c.sock");
    if (slow) o.tick = o.min_wake_interval = absl::Hours(1);
    o.metrics_listen = "";  // civetweb's slow stop is not what this test is about
    o.agent_listen = "";
    server::ControlApiOptions control;
    control.state_file = state_file_;
    auto d = server::Daemon::Create(o, control);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    absl::Status s = daemon_->Start();
    ASSERT_TRUE(s.ok()) << s;
    stub_ = plimsoll::v1::Control::NewStub(grpc::CreateChannel(daemon_->grpc_address(),
                                                               grpc::InsecureChannelCredentials()));
    const int64_t ticks = slow ? 1 : 3;
    for (int i = 0; i < 100 && (daemon_->loop().ticks() < ticks || daemon_->loop().Published()->guests().empty());
         ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  void StopDaemon() {
    stub_.reset();
    daemon_.reset();  // shuts down
  }

  grpc::Status Set(const std::string& guest, const plimsoll::v1::GuestOverride& o,
                   plimsoll::v1::SetGuestPolicyResponse* out = nullptr) {
    plimsoll::v1::SetGuestPolicyRequest req;
    req.set_guest(guest);
    *req.mutable_override() = o;
    plimsoll::v1::SetGuestPolicyResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = stub_->SetGuestPolicy(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  plimsoll::v1::Guest Get(const std::string& guest) {
    plimsoll::v1::GetGuestRequest req;
    req.set_guest(guest);
    plimsoll::v1::Guest g;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->GetGuest(&ctx, req, &g);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return g;
  }

  // Polls GetGuest until `done` holds (at most 5 s); returns the last guest seen.
  template <typename Pred>
  plimsoll::v1::Guest WaitFor(const std::string& guest, Pred done) {
    plimsoll::v1::Guest g;
    for (int i = 0; i < 250; ++i) {
      g = Get(guest);
      if (done(g)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return g;
  }

  std::string dir_;
  std::string state_file_;
  std::unique_ptr<server::Daemon> daemon_;
  std::unique_ptr<plimsoll::v1::Control::Stub> stub_;
};

// A control plane that writes and reads back at once sees its write, with no tick in between.
TEST_F(DaemonControlTest, ReadsBackItsOwnWritesAtOnce) {
  StartDaemon(/*slow=*/true);
  ASSERT_NE(daemon_, nullptr);
  const int64_t tick = daemon_->loop().ticks();
  ASSERT_EQ(tick, 1);
  auto host = [&] {
    plimsoll::v1::HostStatus h;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->GetHostStatus(&ctx, {}, &h).ok());
    return h;
  };
  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(1792 * kMiB);
  const grpc::Status set = Set("web", pin);
  ASSERT_TRUE(set.ok()) << set.error_message();
  EXPECT_EQ(Get("web").override().pin_bytes(), 1792 * kMiB);
  EXPECT_EQ(host().guest_overrides(), 1);

  plimsoll::v1::ClearGuestPolicyRequest clear;
  clear.set_guest("web");
  plimsoll::v1::ClearGuestPolicyResponse cleared;
  grpc::ClientContext clear_ctx;
  ASSERT_TRUE(stub_->ClearGuestPolicy(&clear_ctx, clear, &cleared).ok());
  EXPECT_FALSE(Get("web").has_override());
  EXPECT_EQ(host().guest_overrides(), 0);

  plimsoll::v1::SetHostPolicyRequest hp;
  hp.mutable_policy()->set_guest_memory_budget_bytes(768 * kMiB);
  plimsoll::v1::SetHostPolicyResponse hp_resp;
  grpc::ClientContext hp_ctx;
  ASSERT_TRUE(stub_->SetHostPolicy(&hp_ctx, hp, &hp_resp).ok());
  const plimsoll::v1::HostStatus h = host();
  EXPECT_EQ(h.host_policy().guest_memory_budget_bytes(), 768 * kMiB);
  EXPECT_EQ(h.guest_budget_bytes(), 768 * kMiB);
  EXPECT_EQ(daemon_->loop().ticks(), tick) << "no tick came between the writes and the reads";
}

TEST_F(DaemonControlTest, OverrideActsShowsInGetGuestAndWatchAndSurvivesARestart) {
  StartDaemon();
  ASSERT_NE(daemon_, nullptr);
  // A watcher of override events, opened before the change.
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  plimsoll::v1::WatchRequest wr;
  wr.add_kinds(plimsoll::v1::WATCH_EVENT_KIND_GUEST_OVERRIDE);
  auto watch = stub_->Watch(&watch_ctx, wr);
  for (int i = 0; i < 100 && daemon_->loop().Published()->host().watch_subscribers() < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }

  // Pin web (2 GiB <memory>, 1.5 GiB now) at 1.75 GiB: growing is allowed on the
  // test driver's stale stats, so the pin is reached.
  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(1792 * kMiB);
  pin.set_note("integration");
  plimsoll::v1::SetGuestPolicyResponse set;
  grpc::Status s = Set("web", pin, &set);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(set.override().pin_bytes(), 1792 * kMiB);
  EXPECT_EQ(set.override().updated_by(), "unix");
  EXPECT_EQ(set.override().guest_uuid(), "aaaaaaaa-0000-0000-0000-000000000001");

  plimsoll::v1::WatchEvent event;
  ASSERT_TRUE(watch->Read(&event));
  EXPECT_EQ(event.guest_override().guest_name(), "web");
  EXPECT_EQ(event.guest_override().override().pin_bytes(), 1792 * kMiB);
  watch_ctx.TryCancel();

  plimsoll::v1::Guest web = WaitFor("web", [](const plimsoll::v1::Guest& g) {
    return g.management_state() == plimsoll::v1::MANAGEMENT_STATE_PINNED && g.target_bytes() == 1792 * kMiB;
  });
  EXPECT_EQ(web.override().pin_bytes(), 1792 * kMiB);
  EXPECT_EQ(web.override().note(), "integration");
  EXPECT_EQ(web.management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  EXPECT_EQ(web.target_bytes(), 1792 * kMiB);
  // The move's own decision may be the one before: a balloon call returns on a worker, and its
  // target is recorded at the next tick, whose decision holds there (control_loop.h).
  EXPECT_NE(web.last_decision().reason().find("pinned at 1792MiB by override"), std::string::npos)
      << web.last_decision().reason();

  // Exclude db; an unknown guest and a pin above <memory> are precise errors.
  plimsoll::v1::GuestOverride exclude;
  exclude.set_exclude(true);
  ASSERT_TRUE(Set("db", exclude).ok());
  EXPECT_EQ(Set("nope", exclude).error_code(), grpc::StatusCode::NOT_FOUND);
  plimsoll::v1::GuestOverride too_big;
  too_big.set_pin_bytes(8192 * kMiB);
  grpc::Status big = Set("batch", too_big);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(big.error_message().find("override.pin_bytes"), std::string::npos) << big.error_message();
  plimsoll::v1::Guest db = WaitFor("db", [](const plimsoll::v1::Guest& g) {
    return g.management_state() == plimsoll::v1::MANAGEMENT_STATE_EXCLUDED;
  });
  EXPECT_EQ(db.management_state(), plimsoll::v1::MANAGEMENT_STATE_EXCLUDED);

  // Pause: the host status says so, a real reclaim is refused, a dry run still plans.
  {
    plimsoll::v1::SetHostPolicyRequest req;
    req.mutable_policy()->set_paused(true);
    plimsoll::v1::SetHostPolicyResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->SetHostPolicy(&ctx, req, &resp).ok());
    plimsoll::v1::ReclaimRequest rr;
    rr.set_bytes(256 * kMiB);
    plimsoll::v1::ReclaimResponse plan;
    grpc::ClientContext ctx2;
    grpc::Status refused = stub_->Reclaim(&ctx2, rr, &plan);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
    rr.set_dry_run(true);
    grpc::ClientContext ctx3;
    ASSERT_TRUE(stub_->Reclaim(&ctx3, rr, &plan).ok());
    EXPECT_EQ(plan.plan().items_size() + plan.plan().skipped_size(), 3);
  }
  plimsoll::v1::Guest batch = WaitFor("batch", [](const plimsoll::v1::Guest& g) {
    return g.management_state() == plimsoll::v1::MANAGEMENT_STATE_PAUSED;
  });
  EXPECT_EQ(batch.management_state(), plimsoll::v1::MANAGEMENT_STATE_PAUSED);
  {
    plimsoll::v1::HostStatus host;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetHostStatus(&ctx, {}, &host).ok());
    EXPECT_TRUE(host.paused());
    EXPECT_EQ(host.guest_overrides(), 2);
    EXPECT_EQ(host.state_file(), state_file_);
    EXPECT_EQ(host.state_problem(), "");
  }

  // Restart: a new Daemon object on the same state file finds everything again.
  StopDaemon();
  ASSERT_TRUE(std::filesystem::exists(state_file_));
  StartDaemon();
  ASSERT_NE(daemon_, nullptr);
  web = WaitFor("web", [](const plimsoll::v1::Guest& g) { return g.has_override(); });
  EXPECT_EQ(web.override().pin_bytes(), 1792 * kMiB);
  EXPECT_EQ(web.override().note(), "integration");
  {
    plimsoll::v1::ListGuestPoliciesResponse policies;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListGuestPolicies(&ctx, {}, &policies).ok());
    ASSERT_EQ(policies.overrides_size(), 2);
    EXPECT_EQ(policies.overrides(0).guest_name(), "db");
    EXPECT_TRUE(policies.overrides(0).exclude());
    EXPECT_EQ(policies.overrides(1).guest_name(), "web");
    plimsoll::v1::HostStatus host;
    grpc::ClientContext ctx2;
    ASSERT_TRUE(stub_->GetHostStatus(&ctx2, {}, &host).ok());
    EXPECT_TRUE(host.paused());
    EXPECT_TRUE(host.host_policy().paused());
  }
  db = WaitFor("db", [](const plimsoll::v1::Guest& g) {
    return g.management_state() == plimsoll::v1::MANAGEMENT_STATE_EXCLUDED;
  });
  EXPECT_EQ(db.management_state(), plimsoll::v1::MANAGEMENT_STATE_EXCLUDED);

  // Resume and clear: the pin acts again after the restart, then goes away.
  {
    plimsoll::v1::SetHostPolicyRequest req;
    req.mutable_policy()->set_paused(false);
    plimsoll::v1::SetHostPolicyResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->SetHostPolicy(&ctx, req, &resp).ok());
  }
  web = WaitFor("web", [](const plimsoll::v1::Guest& g) {
    return g.management_state() == plimsoll::v1::MANAGEMENT_STATE_PINNED && g.target_bytes() == 1792 * kMiB;
  });
  EXPECT_EQ(web.target_bytes(), 1792 * kMiB);
  {
    plimsoll::v1::ClearGuestPolicyRequest req;
    req.set_guest("web");
    plimsoll::v1::ClearGuestPolicyResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ClearGuestPolicy(&ctx, req, &resp).ok());
    EXPECT_TRUE(resp.existed());
    EXPECT_FALSE(resp.has_override());
  }
  EXPECT_FALSE(Get("web").has_override()) << "read back at once";
  // What the loop makes of it comes with the next tick.
  web = WaitFor("web", [](const plimsoll::v1::Guest& g) {
    return g.management_state() != plimsoll::v1::MANAGEMENT_STATE_PINNED;
  });
  EXPECT_FALSE(web.has_override());
  EXPECT_NE(web.management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  StopDaemon();
}

TEST_F(DaemonControlTest, ADamagedStateFileIsSetAsideAndReportedNeverDropped) {
  std::filesystem::create_directories(std::filesystem::path(state_file_).parent_path());
  std::ofstream(state_file_) << "version: 1\nguest_overrides { guest_uuid: \"x\" pin_bytes: 1\n";  // cut short
  StartDaemon();
  ASSERT_NE(daemon_, nullptr);
  plimsoll::v1::HostStatus host;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->GetHostStatus(&ctx, {}, &host).ok());
  EXPECT_NE(host.state_problem(), "");
  EXPECT_NE(host.state_problem().find(".corrupt-"), std::string::npos) << host.state_problem();
  EXPECT_EQ(host.guest_overrides(), 0);
  int set_aside = 0;
  for (const auto& f : std::filesystem::directory_iterator(std::filesystem::path(state_file_).parent_path())) {
    set_aside += f.path().filename().string().find(".corrupt-") != std::string::npos;
  }
  EXPECT_EQ(set_aside, 1) << "the damaged file is kept for the operator";
  // The daemon runs and persists new changes into a fresh file.
  plimsoll::v1::GuestOverride o;
  o.set_priority(3);
  ASSERT_TRUE(Set("batch", o).ok());
  StopDaemon();
  StartDaemon();
  EXPECT_EQ(WaitFor("batch", [](const plimsoll::v1::Guest& g) { return g.has_override(); }).override().priority(), 3);
  plimsoll::v1::HostStatus after;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->GetHostStatus(&ctx2, {}, &after).ok());
  EXPECT_EQ(after.state_problem(), "") << "the new file loads cleanly";
  StopDaemon();
}

// SIGHUP's entry point (Daemon::ReloadConfig) on a daemon started the way main starts it: a
// config file plus command-line flags, through LoadEffectiveConfig.
TEST(DaemonReloadTest, ReloadAppliesLiveSettingsKeepsFlagsAndKeepsTheOldConfigWhenInvalid) {
  const std::string dir = TestTmp() + "/reload";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/plimsolld.textproto";
  const std::string libvirt_uri =
      "test://" + std::filesystem::absolute(Runfile("tests/integration/testdata/host.xml")).string();
  const std::string proc_root = MakeProcRoot();
  auto write = [&](const std::string& policy, const std::string& tick, int64_t budget_mib,
                   const std::string& metrics_listen = "127.0.0.1:0") {
    std::ofstream(path) << "libvirt_uri: \"" << libvirt_uri << "\"\n"
                        << "grpc_listen: \"unix:" << dir << "/plimsolld.sock\"\n"
                        << "metrics_listen: \"" << metrics_listen << "\"\n"
                        << "policy: \"" << policy << "\"\n"
                        << "tick: \"" << tick << "\"\n"
                        << "host { host_reserve_bytes: 0 guest_memory_budget_bytes: " << budget_mib * kMiB
                        << " proc_root: \"" << proc_root << "\" }\n"
                        << "agent { agent_listen: \"\" }\n"
                        << "control { state_file: \"" << dir << "/state.textproto\" }\n";
  };
  write("pagecache", "200ms", 2048);
  // The flag overrides the file's budget at startup and on every reload.
  auto flags = server::ConfigFromFlags({{"guest_memory_budget_bytes", std::to_string(1024 * kMiB)}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto loaded = server::LoadEffectiveConfig(path, *flags);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto d = server::Daemon::Create(loaded->options, loaded->control);
  ASSERT_TRUE(d.ok()) << d.status();
  std::unique_ptr<server::Daemon> daemon = std::move(*d);
  daemon->SetConfigSource(path, *flags);
  ASSERT_TRUE(daemon->Start().ok());
  auto stub = plimsoll::v1::Control::NewStub(
      grpc::CreateChannel(daemon->grpc_address(), grpc::InsecureChannelCredentials()));
  auto host_status = [&] {
    plimsoll::v1::HostStatus h;
    grpc::ClientContext ctx;
    grpc::Status s = stub->GetHostStatus(&ctx, {}, &h);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return h;
  };
  // Polls until `done` holds (at most 5 s).
  auto wait_host = [&](auto done) {
    plimsoll::v1::HostStatus h;
    for (int i = 0; i < 250; ++i) {
      h = host_status();
      if (done(h)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return h;
  };
  auto metric = [&](const std::string& series) {
    auto body = testing::HttpGet(daemon->metrics_port(), "/metrics");
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? SeriesValue(*body, series) : -1;
  };
  plimsoll::v1::HostStatus h = wait_host([](const auto& h) { return h.tick() >= 2; });
  EXPECT_EQ(h.policy(), "pagecache");
  EXPECT_DOUBLE_EQ(h.tick_seconds(), 0.2);
  EXPECT_EQ(h.guest_budget_bytes(), 1024 * kMiB);
  EXPECT_EQ(metric("plimsoll_config_last_reload_success"), 1);
  EXPECT_EQ(metric("plimsoll_config_reloads_total{result=\"success\"}"), 0);

  // A valid change: policy and tick switch at the next tick; the flag still wins over the file.
  write("mom", "300ms", 4096);
  ASSERT_TRUE(daemon->ReloadConfig().ok());
  h = wait_host([](const auto& h) { return h.policy() == "mom"; });
  EXPECT_EQ(h.policy(), "mom");
  EXPECT_DOUBLE_EQ(h.tick_seconds(), 0.3);
  EXPECT_EQ(h.guest_budget_bytes(), 1024 * kMiB) << "--guest_memory_budget_bytes overrides the file on reload";
  EXPECT_EQ(metric("plimsoll_config_reloads_total{result=\"success\"}"), 1);
  EXPECT_EQ(metric("plimsoll_config_last_reload_success"), 1);
  EXPECT_GT(metric("plimsoll_config_last_reload_timestamp_seconds"), 1.6e9);

  // An unknown field and a bad tick: refused with the file position / the field, old config kept.
  std::ofstream(path) << "policy: \"static\"\nbogus_field: 1\n";
  absl::Status s = daemon->ReloadConfig();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(path + ":2:"), std::string::npos) << s;
  write("static", "fast", 4096);
  s = daemon->ReloadConfig();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("config field \"tick\""), std::string::npos) << s;
  EXPECT_EQ(metric("plimsoll_config_reloads_total{result=\"failure\"}"), 2);
  EXPECT_EQ(metric("plimsoll_config_reloads_total{result=\"success\"}"), 1);
  EXPECT_EQ(metric("plimsoll_config_last_reload_success"), 0);
  const int64_t tick_before = host_status().tick();
  h = wait_host([&](const auto& h) { return h.tick() >= tick_before + 2; });
  EXPECT_EQ(h.policy(), "mom") << "the old config is kept";
  EXPECT_DOUBLE_EQ(h.tick_seconds(), 0.3);

  // A runtime SetHostPolicy still wins over a reloaded config; a restart-only change is ignored.
  plimsoll::v1::SetHostPolicyRequest req;
  req.mutable_policy()->set_policy("proxmox");
  plimsoll::v1::SetHostPolicyResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->SetHostPolicy(&ctx, req, &resp).ok());
  write("static", "250ms", 4096, "127.0.0.1:1");  // a new metrics_listen needs a restart
  ASSERT_TRUE(daemon->ReloadConfig().ok());
  h = wait_host([](const auto& h) { return h.tick_seconds() == 0.25; });
  EXPECT_DOUBLE_EQ(h.tick_seconds(), 0.25);
  EXPECT_EQ(h.policy(), "proxmox") << "the host policy overlay wins";
  EXPECT_EQ(daemon->options().metrics_listen, "127.0.0.1:0") << "restart-only settings are kept";
  EXPECT_EQ(metric("plimsoll_config_last_reload_success"), 1);
  EXPECT_EQ(metric("plimsoll_config_reloads_total{result=\"success\"}"), 2);
}

// A config that names the pagecache policy as an earlier plimsolld did starts the daemon, which
// runs "pagecache" and says why in a warning at start.
TEST(DaemonStartTest, ADeprecatedPolicyNameStartsWithAWarningInTheLog) {
  auto parsed = server::ParseConfigText(R"(policy: "pagecache_law")", "old.textproto");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto resolved = server::Resolve(server::WithDefaults(*parsed));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  server::Options o = BaseOptions("unix:" + TestTmp() + "/old-name.sock");
  o.policy = resolved->policy;
  o.warnings = resolved->warnings;
  auto d = server::Daemon::Create(o);
  ASSERT_TRUE(d.ok()) << d.status();
  ::testing::internal::CaptureStderr();
  const absl::Status started = (*d)->Start();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(started.ok()) << started;
  std::string warning;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.find("is a deprecated name") != absl::string_view::npos) warning = std::string(line);
  }
  EXPECT_EQ(warning.substr(0, 2), "W ") << log;
  EXPECT_NE(warning.find("] config field \"policy\": \"pagecache_law\" is a deprecated name of \"pagecache\" "
                         "(the same policy), which runs; write policy: \"pagecache\""),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("plimsolld serving grpc="), std::string::npos) << log;
  EXPECT_NE(log.find(" policy=pagecache tick="), std::string::npos) << log;
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
