// The plimsollctl binary against an in-process Control server (fake core) on a
// unix socket and on a mutual-TLS TCP port: output, --json, exit codes, errors.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/testing/test_certs.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/api/control_service.h"
#include "server/api/security/tls_credentials.h"
#include "server/api/testing/fake_control_core.h"

namespace plimsoll {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& rel) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return srcdir && ws ? absl::StrCat(srcdir, "/", ws, "/", rel) : rel;
}

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

// `env` prefixes the command (e.g. "COLUMNS=100", "env -u COLUMNS").
Result Ctl(const std::string& args, const std::string& env = "") {
  const std::string cmd = absl::StrCat(env, env.empty() ? "" : " ", Runfile("ctl/plimsollctl"), " ", args, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class PlimsollctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/plimsoll-ctl-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    auto pki = ::plimsoll::testing::MakeTestPki(*dir_);
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new ::plimsoll::testing::TestPki(*pki);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(*dir_); }

  void SetUp() override {
    v1::ListGuestsResponse v;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
      guests { name: "web" uuid: "aaaaaaaa-0000-0000-0000-000000000001" run_state: GUEST_RUN_STATE_RUNNING
               management_state: MANAGEMENT_STATE_MANAGED max_bytes: 2147483648 min_bytes: 536870912
               target_bytes: 1610612736 actual_bytes: 1610612736
               stats { stats_fresh: true usable { bytes: 1073741824 } disk_caches { bytes: 536870912 } }
               last_decision { reason: "pagecache: take x=0.00 ws=800MiB taken=128MiB -> 1408MiB | src=agent actual=1536MiB floor=556MiB burst=0MiB ws=800MiB allow=1408MiB stall_pct=0.00 refault=0MiB/s measured=1" } }
      host { policy: "mom" guest_budget_bytes: 4294967296 libvirt_connected: true tick_seconds: 5 }
      host_line { capacity_bytes: 4294967296 committed_bytes: 2684354560 burst_reserve_bytes: 1073741824
                  new_guest_room_bytes: 536870912 headroom_bytes: 1073741824 offered_bytes: 1073741824
                  guests: 1 tick: 7 explanation: "capacity=4096MiB committed=2560MiB" })",
                                                              &v));
    v.mutable_host_line()->set_computed_unix_micros(absl::ToUnixMicros(clock_.Now()));
    core_.SetView(v);
    server::ControlServiceOptions so;
    so.policy_names = {"mom", "static"};
    so.authz = &authz_;
    service_ = std::make_unique<server::ControlService>([this] { return core_.View(); }, &core_, so);
    server::ControlApiOptions tls;
    tls.unix_socket = false;
    tls.cert_file = pki_->server_cert;
    tls.key_file = pki_->server_key;
    tls.client_ca_file = pki_->ca_cert;
    auto creds = server::BuildControlServerCredentials(tls);
    ASSERT_TRUE(creds.ok()) << creds.status();
    socket_ = *dir_ + "/ctl.sock";
    std::filesystem::remove(socket_);
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    b.AddListeningPort("127.0.0.1:0", *creds, &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200)); }

  std::string Unix() const { return "--server=unix:" + socket_; }
  std::string Tls(const std::string& who) const {
    return absl::StrCat("--server=127.0.0.1:", port_, " --ca=", pki_->ca_cert, " --cert=", pki_->dir, "/", who,
                        ".pem --key=", pki_->dir, "/", who, ".key");
  }

  static std::string* dir_;
  static ::plimsoll::testing::TestPki* pki_;
  FakeClock clock_;
  server::FakeControlCore core_{&clock_};
  server::Authorizer authz_;
  std::unique_ptr<server::ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_;
  int port_ = 0;
};

std::string* PlimsollctlTest::dir_ = nullptr;
::plimsoll::testing::TestPki* PlimsollctlTest::pki_ = nullptr;

TEST_F(PlimsollctlTest, ReadCommandsInTextAndJson) {
  Result r = Ctl(Unix() + " guests");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("web"));
  r = Ctl(Unix() + " guests --json");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("\"uuid\": \"aaaaaaaa-0000-0000-0000-000000000001\""));
  r = Ctl(Unix() + " host");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("host policy: as configured, 0 guest override(s)"));
  r = Ctl(Unix() + " host --json");
  EXPECT_THAT(r.out, HasSubstr("\"paused\": false"));
  r = Ctl(Unix() + " line");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("offered            1024Mi  what this host offers to schedulers now\n"));
  EXPECT_THAT(r.out, HasSubstr("headroom           1024Mi  capacity - committed - new guest room"));
  EXPECT_THAT(r.out, HasSubstr("capacity=4096MiB committed=2560MiB"));
  r = Ctl(Unix() + " line --json");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"offered_bytes\": \"1073741824\""));
  EXPECT_THAT(r.out, HasSubstr("\"stale\": false"));
  r = Ctl(Unix() + " guests");
  EXPECT_THAT(r.out, HasSubstr("line: offered=1024Mi headroom=1024Mi committed=2560Mi/capacity=4096Mi"));
  r = Ctl(Unix() + " line --wide=3");
  EXPECT_EQ(r.code, 0) << "--wide is global";
  r = Ctl(Unix() + " line extra");
  EXPECT_EQ(r.code, 2);
  r = Ctl(Unix() + " guest nope");
  EXPECT_EQ(r.code, 4);
  EXPECT_THAT(r.out, HasSubstr("no running guest named or with UUID \"nope\""));
}

// Every table line within $COLUMNS, else the terminal, else 120; the full reason with --wide and
// in `guest NAME`.
TEST_F(PlimsollctlTest, TablesFitTheTerminal) {
  const std::string full_tail = "| src=agent actual=1536MiB floor=556MiB";
  auto widest = [](const std::string& out) {
    size_t w = 0;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (absl::StartsWith(line, "---")) continue;  // top's timestamp line
      w = std::max(w, line.size());
    }
    return w;
  };
  for (const std::string& command : {std::string("guests"), std::string("top --count=1")}) {
    Result r = Ctl(Unix() + " " + command, "COLUMNS=100");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_LE(widest(r.out), 100u) << r.out;
    EXPECT_THAT(r.out, HasSubstr(" take "));  // what was done leads, in any width
    r = Ctl(Unix() + " " + command, "env -u COLUMNS");  // a pipe: no terminal to ask
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_LE(widest(r.out), 120u) << r.out;
    EXPECT_THAT(r.out, HasSubstr("take taken=128MiB x=0.00 stall_pct=0.00"));
    EXPECT_GT(widest(r.out), 100u) << "120 columns are used: " << r.out;
    r = Ctl(Unix() + " " + command + " --wide", "COLUMNS=100");
    EXPECT_THAT(r.out, HasSubstr(full_tail));
  }
  Result r = Ctl(Unix() + " guest web", "COLUMNS=100");
  EXPECT_THAT(r.out, HasSubstr(full_tail));
}

TEST_F(PlimsollctlTest, SetClearHostAndReclaim) {
  Result r = Ctl(Unix() + " set web --pin=1.5G --priority=3 --note='launch week'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("web: pin=1536Mi priority=3 note=\"launch week\""));
  r = Ctl(Unix() + " guest web");
  EXPECT_THAT(r.out, HasSubstr("override:        pin=1536Mi"));
  r = Ctl(Unix() + " policies --json");
  EXPECT_THAT(r.out, HasSubstr("\"pin_bytes\": \"1610612736\""));
  r = Ctl(Unix() + " clear web --fields=pin");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("web: override now priority=3"));
  r = Ctl(Unix() + " clear web");
  EXPECT_THAT(r.out, HasSubstr("web: override removed"));
  r = Ctl(Unix() + " reclaim 256M --dry-run");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("plan (dry run, nothing moved)"));
  EXPECT_THAT(r.out, HasSubstr("take    256Mi from web"));
  r = Ctl(Unix() + " host set --pause");
  EXPECT_THAT(r.out, HasSubstr("host policy: paused"));
  r = Ctl(Unix() + " reclaim 256M");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("management is paused"));
  r = Ctl(Unix() + " host set --resume --budget=3G --json");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("\"guest_memory_budget_bytes\": \"3221225472\""));
}

TEST_F(PlimsollctlTest, ReadableErrors) {
  Result r = Ctl(Unix() + " set web --pin=lots");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("--pin: \"lots\" is not a size"));
  r = Ctl(Unix() + " set web --shares=0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("invalid request: override.shares: 0 is outside [1, 10000]"));
  r = Ctl(Unix() + " set ghost --shares=5");
  EXPECT_EQ(r.code, 4);
  r = Ctl(Unix() + " guests --pin=1G");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("--pin: not a flag of \"guests\""));
  r = Ctl("--server=unix:" + *dir_ + "/nobody-here.sock guests");
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.out, HasSubstr("cannot reach plimsolld"));
  r = Ctl(absl::StrCat("--server=127.0.0.1:", port_, " guests"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("give --ca, --cert and --key"));
  r = Ctl(Unix() + " frobnicate");
  EXPECT_EQ(r.code, 2);
}

TEST_F(PlimsollctlTest, MutualTlsWithRoles) {
  Result r = Ctl(Tls("reader") + " guests");
  EXPECT_EQ(r.code, 0) << r.out;
  r = Ctl(Tls("reader") + " line");
  EXPECT_EQ(r.code, 0) << "GetHostLine is a read: " << r.out;
  r = Ctl(Tls("reader") + " set web --pin=1G");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not allowed: SetGuestPolicy needs the admin role"));
  r = Ctl(Tls("admin") + " set web --pin=1G");
  EXPECT_EQ(r.code, 0) << r.out;
  r = Ctl(Tls("rogue") + " guests");
  EXPECT_EQ(r.code, 3) << r.out;
}

// Polls `done` until it holds or `timeout` passes; false on timeout.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_F(PlimsollctlTest, WatchPrintsEvents) {
  // A Watch that ends when the server shuts down. Its output goes to a file (plimsollctl flushes
  // every event), so the test can wait for the event instead of sleeping.
  const std::string out_file = *dir_ + "/watch.out";
  std::thread watcher([&] { Ctl(Unix() + " watch --snapshot >" + out_file); });
  // EXPECT, not ASSERT: the watcher thread must be joined whatever happens.
  EXPECT_TRUE(WaitUntil([&] { return core_.hub().subscribers() > 0; })) << "the watch never subscribed";
  EXPECT_EQ(Ctl(Unix() + " set web --shares=300").code, 0);
  EXPECT_TRUE(WaitUntil([&] { return absl::StrContains(ReadWholeFile(out_file), "override web shares=300"); }))
      << ReadWholeFile(out_file);
  core_.hub().Close();
  watcher.join();
  const std::string out = ReadWholeFile(out_file);
  EXPECT_THAT(out, HasSubstr("guest web snapshot"));
  EXPECT_THAT(out, HasSubstr("snapshot complete (1 guests)"));
  EXPECT_THAT(out, HasSubstr("override web shares=300"));
  EXPECT_THAT(out, HasSubstr("plimsolld is shutting down"));
}

}  // namespace
}  // namespace plimsoll
