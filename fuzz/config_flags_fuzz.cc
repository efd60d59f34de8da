// Fuzzes plimsolld's command-line config (server/config/config.h): ConfigFromFlags, then
// Resolve(WithDefaults(...)). The input is one flag per line, "name=value" or "name" (as
// "--name=value" / "--name" without the dashes), so corpus files read like command lines.
// Beyond no crash: a flag sets exactly the one field it names, whatever its value holds
// (no text-format injection such as "dry_run=true policy: \"x\"").
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fuzz/config_fuzz_util.h"
#include "fuzz/fuzz_check.h"
#include "server/config/config.h"

namespace plimsoll::fuzz {
namespace {

// More flags than this only repeat the same work.
constexpr size_t kMaxFlags = 32;

using Flags = std::vector<std::pair<std::string, std::string>>;

Flags SplitFlags(absl::string_view text) {
  Flags flags;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    if (flags.size() == kMaxFlags) break;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      flags.emplace_back(std::string(line), "");
    } else {
      flags.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
  }
  return flags;
}

// The field a set leaf path belongs to is the one the flag named: its dotted path or leaf name.
bool Names(const std::string& flag, const std::string& path) {
  return path == flag || absl::EndsWith(path, absl::StrCat(".", flag));
}

void CheckFlags(absl::string_view text) {
  const Flags flags = SplitFlags(text);
  absl::StatusOr<v1::DaemonConfig> config = server::ConfigFromFlags(flags);
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  for (const auto& flag : flags) {
    absl::StatusOr<v1::DaemonConfig> one = server::ConfigFromFlags({flag});
    FUZZ_CHECK(one.ok());
    std::vector<std::string> leaves;
    SetLeaves(*one, "", &leaves);
    if (leaves.size() != 1 || !Names(flag.first, leaves[0])) {
      std::fprintf(stderr, "flag --%s=%s set %zu fields:", flag.first.c_str(), flag.second.c_str(),
                   leaves.size());
      for (const std::string& l : leaves) std::fprintf(stderr, " %s", l.c_str());
      std::fprintf(stderr, "\n");
    }
    FUZZ_CHECK(leaves.size() == 1);
    FUZZ_CHECK(Names(flag.first, leaves[0]));
  }
  std::vector<std::string> all;
  SetLeaves(*config, "", &all);
  FUZZ_CHECK(all.size() <= flags.size());
  CheckResolve(*config);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckFlags(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
