#include "common/testing/test_certs.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace plimsoll::testing {
namespace {

absl::Status Run(const std::string& dir, const std::string& command) {
  const std::string log = dir + "/openssl.log";
  const std::string full = absl::StrCat("cd '", dir, "' && ", command, " >'", log, "' 2>&1");
  const int rc = std::system(full.c_str());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("`", command, "` failed (", rc, "): ", ReadFileForTest(log)));
  }
  return absl::OkStatus();
}

constexpr char kKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

absl::Status MakeCa(const std::string& dir, const std::string& name, const std::string& cn) {
  return Run(dir, absl::StrCat("openssl req -x509 ", kKey, " -keyout ", name, ".key -out ", name,
                               ".pem -days 2 -subj '/CN=", cn, "' -addext basicConstraints=critical,CA:TRUE",
                               " -addext keyUsage=critical,keyCertSign,cRLSign"));
}

absl::Status MakeLeaf(const std::string& dir, const std::string& ca, const std::string& name,
                      const std::string& subject, const std::string& extensions) {
  std::ofstream(absl::StrCat(dir, "/", name, ".ext")) << extensions << "\n";
  if (absl::Status s = Run(dir, absl::StrCat("openssl req ", kKey, " -keyout ", name, ".key -out ", name,
                                             ".csr -subj '", subject, "'"));
      !s.ok()) {
    return s;
  }
  return Run(dir, absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                               ".key -CAcreateserial -out ", name, ".pem -days 2 -extfile ", name, ".ext"));
}

}  // namespace

std::string ReadFileForTest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  TestPki p;
  p.dir = dir;
  const std::string client_ext = "extendedKeyUsage=clientAuth";
  if (absl::Status s = MakeCa(dir, "ca", "plimsoll test CA"); !s.ok()) return s;
  if (absl::Status s = MakeCa(dir, "other-ca", "some other CA"); !s.ok()) return s;
  if (absl::Status s = MakeLeaf(dir, "ca", "server", "/CN=localhost",
                                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth");
      !s.ok()) {
    return s;
  }
  const struct {
    const char* name;
    const char* ca;
    const char* subject;
  } clients[] = {
      {"admin", "ca", "/O=plimsoll tests/OU=plimsoll-admin/CN=ops-admin"},
      {"reader", "ca", "/O=plimsoll tests/OU=plimsoll-reader/CN=dashboard"},
      {"norole", "ca", "/O=plimsoll tests/OU=elsewhere/CN=nobody"},
      {"cn", "ca", "/O=plimsoll tests/CN=control-plane-1"},
      {"rogue", "other-ca", "/O=plimsoll tests/OU=plimsoll-admin/CN=rogue"},
  };
  for (const auto& c : clients) {
    if (absl::Status s = MakeLeaf(dir, c.ca, c.name, c.subject, client_ext); !s.ok()) return s;
  }
  auto path = [&dir](const std::string& f) { return absl::StrCat(dir, "/", f); };
  p.ca_cert = path("ca.pem");
  p.other_ca_cert = path("other-ca.pem");
  p.server_cert = path("server.pem");
  p.server_key = path("server.key");
  p.admin_cert = path("admin.pem");
  p.admin_key = path("admin.key");
  p.reader_cert = path("reader.pem");
  p.reader_key = path("reader.key");
  p.norole_cert = path("norole.pem");
  p.norole_key = path("norole.key");
  p.cn_cert = path("cn.pem");
  p.cn_key = path("cn.key");
  p.rogue_cert = path("rogue.pem");
  p.rogue_key = path("rogue.key");
  return p;
}

}  // namespace plimsoll::testing
