// One default host key path everywhere: a token minted from any other key than the daemon's
// is rejected as bad_proof. This test fails when the
// daemon's default, plimsoll-agent-token's default or any path the docs and the packaged config
// give for the key disagree with server/config/default_paths.h.
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config.h"
#include "server/config/default_paths.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& rel) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return srcdir && ws ? absl::StrCat(srcdir, "/", ws, "/", rel) : rel;
}

std::string ReadRunfile(const std::string& rel) {
  std::ifstream in(Runfile(rel));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(HostKeyPathTest, TheDaemonDefaultsToIt) {
  EXPECT_EQ(WithDefaults({}).agent().agent_host_key_file(), kDefaultAgentHostKeyFile);
}

TEST(HostKeyPathTest, TheTokenToolDefaultsToIt) {
  // absl prints each flag with its default; the exit code of a help request is not the point.
  FILE* p = popen(absl::StrCat(Runfile("server/agent/plimsoll-agent-token"), " --helpfull 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  EXPECT_THAT(out, HasSubstr(absl::StrCat("default: \"", kDefaultAgentHostKeyFile, "\""))) << out;
}

// Every absolute path ending in ".key" in `text`: for each ".key", the run of path characters
// before it, from its first '/'.
std::vector<std::string> KeyPaths(const std::string& text) {
  auto path_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '.' || c == '-'; };
  std::vector<std::string> out;
  for (size_t at = text.find(".key"); at != std::string::npos; at = text.find(".key", at + 1)) {
    size_t begin = at;
    while (begin > 0 && path_char(text[begin - 1])) --begin;
    const size_t slash = text.find('/', begin);
    if (slash == std::string::npos || slash >= at) continue;  // not a path
    out.push_back(text.substr(slash, at + 4 - slash));
  }
  return out;
}

// Every path an operator reads for the agent host key (not the agent listener's TLS key).
TEST(HostKeyPathTest, DocsAndThePackagedConfigNameIt) {
  int seen = 0;
  for (const char* file : {"README.md", "docs/security.md", "docs/agent.md", "docs/operations.md",
                           "deploy/config/plimsolld.textproto", "proto/plimsoll/v1/config.proto"}) {
    const std::string text = ReadRunfile(file);
    ASSERT_FALSE(text.empty()) << file << " is not in the test's runfiles";
    for (const std::string& path : KeyPaths(text)) {
      if (path.find("agent") == std::string::npos || path.find("tls") != std::string::npos) continue;
      ++seen;
      EXPECT_EQ(path, kDefaultAgentHostKeyFile) << "in " << file;
    }
  }
  EXPECT_GE(seen, 4) << "the docs no longer name the key at all";
}

}  // namespace
}  // namespace plimsoll::server
