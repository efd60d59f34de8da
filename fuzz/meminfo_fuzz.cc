// Fuzzes ParseMeminfo (common/proc_parsers.h) with arbitrary bytes. Beyond "no crash, no UB, no
// leak", every accepted text must satisfy the header's contract, and the parsed fields, printed
// back in the kernel's format, must parse to the same values.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/proc_parsers.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/proc_fuzz_util.h"

namespace plimsoll::fuzz {
namespace {

void CheckMeminfo(absl::string_view text) {
  absl::StatusOr<Meminfo> info = ParseMeminfo(text);
  if (!info.ok()) {
    CheckRefusal(info.status());
    return;
  }
  CheckAcceptedText(text);
  FUZZ_CHECK(info->Bytes("MemTotal").has_value());
  FUZZ_CHECK(!info->Count("MemTotal").has_value());
  std::string printed;
  for (const auto& [name, bytes] : info->bytes) {
    FUZZ_CHECK(IsValidProcName(name));
    FUZZ_CHECK(bytes >= 0 && bytes % 1024 == 0);
    FUZZ_CHECK(!info->counts.contains(name));
    absl::StrAppend(&printed, name, ": ", bytes / 1024, " kB\n");
  }
  for (const auto& [name, count] : info->counts) {
    FUZZ_CHECK(IsValidProcName(name));
    FUZZ_CHECK(count >= 0);
    absl::StrAppend(&printed, name, ": ", count, "\n");
  }
  absl::StatusOr<Meminfo> again = ParseMeminfo(printed);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->bytes == info->bytes);
  FUZZ_CHECK(again->counts == info->counts);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckMeminfo(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
