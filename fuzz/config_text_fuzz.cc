// Fuzzes plimsolld's config file path (server/config/config.h): ParseConfigText, then
// Resolve(WithDefaults(...)) as the daemon does, with arbitrary bytes as the file. A refusal is
// INVALID_ARGUMENT naming the source (parse) or the field (resolve); an accepted config is within
// every documented range and survives its own --check_config print.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz/config_fuzz_util.h"
#include "fuzz/fuzz_check.h"
#include "server/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<plimsoll::v1::DaemonConfig> parsed =
      plimsoll::server::ParseConfigText(text, "fuzz.textproto");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(parsed.status().message(), "fuzz.textproto"));
    return 0;
  }
  plimsoll::fuzz::CheckResolve(*parsed);
  return 0;
}
