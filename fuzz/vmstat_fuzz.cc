// Fuzzes ParseVmstat (common/proc_parsers.h) with arbitrary bytes: no crash, no UB, no leak; an
// accepted text satisfies the header's contract and its counters, printed back in the kernel's
// format, parse to the same values.
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

void CheckVmstat(absl::string_view text) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(text);
  if (!vmstat.ok()) {
    CheckRefusal(vmstat.status());
    return;
  }
  CheckAcceptedText(text);
  FUZZ_CHECK(!text.empty());
  FUZZ_CHECK(!vmstat->values.empty());
  std::string printed;
  for (const auto& [name, value] : vmstat->values) {
    FUZZ_CHECK(IsValidProcName(name));
    FUZZ_CHECK(vmstat->Get(name) == value);
    absl::StrAppend(&printed, name, " ", value, "\n");
  }
  absl::StatusOr<Vmstat> again = ParseVmstat(printed);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->values == vmstat->values);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckVmstat(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
