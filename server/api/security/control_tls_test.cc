// mTLS and roles on a real TCP listener, with certificates made by openssl at
// test time: no client certificate, a certificate from the wrong CA, a reader
// calling a mutating RPC, an admin, certificate reload, and the unix socket.
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/testing/test_certs.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/api/control_service.h"
#include "server/api/security/authz.h"
#include "server/api/security/tls_credentials.h"
#include "server/api/testing/fake_control_core.h"

namespace plimsoll::server {
namespace {

using ::plimsoll::testing::MakeTestPki;
using ::plimsoll::testing::ReadFileForTest;
using ::plimsoll::testing::TestPki;
using ::testing::HasSubstr;

std::string NewDir(const char* prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");  // short: unix socket paths
  return mkdtemp(tmpl.data());
}

v1::ListGuestsResponse OneGuest() {
  v1::ListGuestsResponse v;
  auto* g = v.add_guests();
  g->set_name("web");
  g->set_uuid("aaaaaaaa-0000-0000-0000-000000000001");
  g->set_max_bytes(2LL << 30);
  return v;
}

class ControlTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pki = MakeTestPki(NewDir("plimsoll-pki"));
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new TestPki(*pki);
  }
  static void TearDownTestSuite() {
    if (pki_ != nullptr) std::filesystem::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  // Starts a TCP server with the configured TLS files; `ca` overrides the client CA file.
  void StartTcp(const std::string& client_ca = "", absl::Duration reload = absl::Seconds(10)) {
    ASSERT_NE(pki_, nullptr);
    options_.unix_socket = false;
    options_.cert_file = pki_->server_cert;
    options_.key_file = pki_->server_key;
    options_.client_ca_file = client_ca.empty() ? pki_->ca_cert : client_ca;
    options_.tls_reload_interval = reload;
    options_.roles = RoleRules::Defaults();
    options_.roles.admin_common_names = {"control-plane-1"};
    auto creds = BuildControlServerCredentials(options_);
    ASSERT_TRUE(creds.ok()) << creds.status();
    Serve("127.0.0.1:0", *creds);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }

  void Serve(const std::string& listen, std::shared_ptr<grpc::ServerCredentials> creds) {
    core_.SetView(OneGuest());
    authz_ = std::make_unique<Authorizer>(options_.roles);
    ControlServiceOptions so;
    so.authz = authz_.get();
    service_ = std::make_unique<ControlService>([this] { return core_.View(); }, &core_, so);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(listen, creds, &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  // A stub presenting `cert`/`key` (none when empty), trusting `server_ca`.
  std::unique_ptr<v1::Control::Stub> Client(const std::string& cert, const std::string& key,
                                            const std::string& server_ca = "") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFileForTest(server_ca.empty() ? pki_->ca_cert : server_ca);
    if (!cert.empty()) {
      o.pem_cert_chain = ReadFileForTest(cert);
      o.pem_private_key = ReadFileForTest(key);
    }
    return v1::Control::NewStub(grpc::CreateChannel(address_, grpc::SslCredentials(o)));
  }

  static grpc::Status List(v1::Control::Stub& stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListGuestsResponse r;
    return stub.ListGuests(&ctx, {}, &r);
  }

  static grpc::Status Pin(v1::Control::Stub& stub, v1::SetGuestPolicyResponse* out = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::SetGuestPolicyRequest r;
    r.set_guest("web");
    r.mutable_override()->set_pin_bytes(1LL << 30);
    v1::SetGuestPolicyResponse resp;
    grpc::Status s = stub.SetGuestPolicy(&ctx, r, &resp);
    if (out) *out = resp;
    return s;
  }

  static TestPki* pki_;
  ControlApiOptions options_;
  FakeClock clock_;
  FakeControlCore core_{&clock_};
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

TestPki* ControlTlsTest::pki_ = nullptr;

TEST_F(ControlTlsTest, NoClientCertificateIsRefusedAtTheHandshake) {
  StartTcp();
  auto stub = Client("", "");
  grpc::Status s = List(*stub);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(core_.calls().empty());
}

TEST_F(ControlTlsTest, ClientCertificateFromTheWrongCaIsRefused) {
  StartTcp();
  auto stub = Client(pki_->rogue_cert, pki_->rogue_key);  // claims OU=plimsoll-admin
  EXPECT_EQ(List(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Pin(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(core_.calls().empty());
}

TEST_F(ControlTlsTest, PlaintextClientIsRefused) {
  StartTcp();
  auto stub = v1::Control::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  EXPECT_EQ(List(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ControlTlsTest, ReaderReadsButMayNotChangeAnything) {
  StartTcp();
  auto stub = Client(pki_->reader_cert, pki_->reader_key);
  EXPECT_TRUE(List(*stub).ok());
  grpc::Status s = Pin(*stub);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("SetGuestPolicy needs the admin role"));
  EXPECT_THAT(s.error_message(), HasSubstr("CN=dashboard"));
  EXPECT_THAT(s.error_message(), HasSubstr("has reader"));
  grpc::ClientContext ctx;
  v1::ReclaimRequest r;
  r.set_bytes(1);
  r.set_dry_run(true);
  v1::ReclaimResponse resp;
  EXPECT_EQ(stub->Reclaim(&ctx, r, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(core_.calls().empty());  // refused before reaching the core
}

TEST_F(ControlTlsTest, CertificateWithoutARoleMayCallNothing) {
  StartTcp();
  auto stub = Client(pki_->norole_cert, pki_->norole_key);
  grpc::Status s = List(*stub);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("has no role"));
}

TEST_F(ControlTlsTest, AdminByOuAndByCommonNameMayDoEverything) {
  StartTcp();
  auto admin = Client(pki_->admin_cert, pki_->admin_key);
  v1::SetGuestPolicyResponse resp;
  ASSERT_TRUE(Pin(*admin, &resp).ok());
  EXPECT_THAT(resp.override().updated_by(), HasSubstr("CN=ops-admin"));
  EXPECT_THAT(resp.override().updated_by(), HasSubstr("OU=plimsoll-admin"));
  EXPECT_EQ(core_.last_caller().role, Role::kAdmin);
  auto by_cn = Client(pki_->cn_cert, pki_->cn_key);
  EXPECT_TRUE(Pin(*by_cn).ok());
  EXPECT_THAT(core_.last_caller().identity, HasSubstr("CN=control-plane-1"));
}

TEST_F(ControlTlsTest, ClientCaFileIsReloadedWithoutARestart) {
  const std::string dir = NewDir("plimsoll-reload");
  const std::string ca = dir + "/clients.pem";
  std::filesystem::copy_file(pki_->ca_cert, ca);
  StartTcp(ca, absl::Seconds(1));
  ASSERT_TRUE(Pin(*Client(pki_->admin_cert, pki_->admin_key)).ok());
  // Rotate: now only the other CA's clients are trusted.
  std::filesystem::copy_file(pki_->other_ca_cert, ca + ".new");
  std::filesystem::rename(ca + ".new", ca);
  bool rotated = false;
  for (int i = 0; i < 60 && !rotated; ++i) {
    absl::SleepFor(absl::Milliseconds(200));
    rotated = Pin(*Client(pki_->rogue_cert, pki_->rogue_key)).ok();
  }
  EXPECT_TRUE(rotated) << "the new client CA was not picked up";
  EXPECT_EQ(Pin(*Client(pki_->admin_cert, pki_->admin_key)).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ControlTlsTest, InsecureTcpIsNeverTrusted) {
  // A mis-wired listener (TCP without TLS): the authorizer refuses everyone.
  Serve("127.0.0.1:0", grpc::InsecureServerCredentials());
  auto stub = v1::Control::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  grpc::Status s = List(*stub);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("needs a verified client certificate"));
}

TEST_F(ControlTlsTest, UnixSocketIsAdminAndOwnerOnlyOrGroup) {
  const std::string path = NewDir("plimsoll-uds") + "/c.sock";
  options_ = ControlApiOptions();
  auto creds = BuildControlServerCredentials(options_);
  ASSERT_TRUE(creds.ok());
  const mode_t old = umask(0177);
  Serve("unix:" + path, *creds);
  umask(old);
  ASSERT_TRUE(ApplyUnixSocketAccess(path, options_).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto stub = v1::Control::NewStub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Pin(*stub).ok());
  EXPECT_EQ(core_.last_caller().identity, "unix");

  const struct group* g = getgrgid(getegid());
  ASSERT_NE(g, nullptr);
  options_.socket_group = g->gr_name;
  ASSERT_TRUE(ApplyUnixSocketAccess(path, options_).ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  options_.socket_group = "no-such-group-plimsoll";
  EXPECT_EQ(ApplyUnixSocketAccess(path, options_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ControlTlsTest, TlsFilesAreCheckedUpFrontWithTheFieldNamed) {
  ControlApiOptions o;
  o.unix_socket = false;
  o.cert_file = pki_->server_cert;
  o.key_file = pki_->admin_key;  // not the server's key
  o.client_ca_file = pki_->ca_cert;
  absl::Status s = CheckTlsFiles(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("control.tls.key_file"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not match"));
  o.key_file = pki_->server_key;
  EXPECT_TRUE(CheckTlsFiles(o).ok());
  o.client_ca_file = pki_->dir + "/missing.pem";
  s = CheckTlsFiles(o);
  EXPECT_THAT(std::string(s.message()), HasSubstr("control.tls.client_ca_file"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing.pem"));
  o.client_ca_file = pki_->server_key;  // not a certificate
  EXPECT_THAT(std::string(CheckTlsFiles(o).message()), HasSubstr("holds no PEM certificate"));
}

TEST(ResolveControlApiTest, Table) {
  struct Row {
    std::string config;
    std::string error;  // "" = valid
  };
  const std::vector<Row> rows = {
      {R"(grpc_listen: "unix:/run/p.sock")", ""},
      {R"(grpc_listen: "unix:/run/p.sock" control { socket_group: "root" })", ""},
      {R"(grpc_listen: "unix:/run/p.sock" control { socket_group: "no-such-group-plimsoll" })",
       "config field \"control.socket_group\": no group named"},
      {R"(grpc_listen: "unix:/run/p.sock" control { tls { cert_file: "/c" } })",
       "config field \"control.tls\": TLS is for a TCP grpc_listen"},
      {R"(grpc_listen: "0.0.0.0:7443")", "config field \"control.tls.cert_file\": required"},
      {R"(grpc_listen: "0.0.0.0:7443" control { tls { cert_file: "/c" key_file: "/k" } })",
       "config field \"control.tls.client_ca_file\": required"},
      {R"(grpc_listen: "0.0.0.0:7443" control { tls { cert_file: "/c" key_file: "/k" client_ca_file: "/a" } })",
       ""},
      {R"(grpc_listen: "0.0.0.0:7443" control { socket_group: "root" tls { cert_file: "/c" key_file: "/k" client_ca_file: "/a" } })",
       "config field \"control.socket_group\": only applies to a unix socket"},
      {R"(grpc_listen: "unix:/p" control { tls_reload_interval: "0s" })",
       "config field \"control.tls_reload_interval\""},
      {R"(grpc_listen: "unix:/p" control { state_file: "relative" })", "config field \"control.state_file\""},
      {R"(grpc_listen: "unix:/p" control { admin_common_names: "" })", "an empty name"},
  };
  for (const Row& r : rows) {
    v1::DaemonConfig c;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(r.config, &c)) << r.config;
    auto o = ResolveControlApi(c);
    if (r.error.empty()) {
      EXPECT_TRUE(o.ok()) << r.config << ": " << o.status();
    } else {
      EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << r.config;
      EXPECT_THAT(std::string(o.status().message()), HasSubstr(r.error)) << r.config;
    }
  }
  v1::DaemonConfig c;
  google::protobuf::TextFormat::ParseFromString(
      R"(grpc_listen: "unix:/p" control { reader_common_names: "grafana" state_file: "/s" tls_reload_interval: "30s" })",
      &c);
  auto o = ResolveControlApi(c);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->roles.reader_common_names, std::vector<std::string>{"grafana"});
  EXPECT_TRUE(o->roles.admin_organizational_units.empty());  // explicit roles replace the defaults
  EXPECT_EQ(o->state_file, "/s");
  EXPECT_EQ(o->tls_reload_interval, absl::Seconds(30));
  v1::DaemonConfig plain;
  plain.set_grpc_listen("unix:/run/p.sock");
  auto defaults = ResolveControlApi(plain);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->state_file, kDefaultStateFile);
  EXPECT_EQ(defaults->roles.admin_organizational_units, std::vector<std::string>{"plimsoll-admin"});
}

}  // namespace
}  // namespace plimsoll::server
