// Checks shared by the /proc parser fuzz targets (common/proc_parsers.h states the contract).
#ifndef PLIMSOLL_FUZZ_PROC_FUZZ_UTIL_H_
#define PLIMSOLL_FUZZ_PROC_FUZZ_UTIL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/proc_parsers.h"
#include "fuzz/fuzz_check.h"

namespace plimsoll::fuzz {

// Error messages quote at most 64 bytes of a line, hex-escaped (4 bytes each at worst), plus
// the file name, line number and problem: far below this.
inline constexpr size_t kMaxErrorBytes = 512;

// A successful parse only ever comes from text the kernel could have written: non-empty when
// required, within the size cap, ending with '\n'.
inline void CheckAcceptedText(absl::string_view text) {
  FUZZ_CHECK(text.size() <= kMaxProcTextBytes);
  FUZZ_CHECK(text.empty() || text.back() == '\n');
}

// A refusal is INVALID_ARGUMENT with a short, printable message (it goes to logs verbatim).
inline void CheckRefusal(const absl::Status& status) {
  FUZZ_CHECK(!status.ok());
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(status.message().size() <= kMaxErrorBytes);
  FUZZ_CHECK(IsPrintableAscii(status.message().data(), status.message().size()));
}

// The parsers' rule for names: printable ASCII without space or ':', never empty.
inline bool IsValidProcName(absl::string_view name) {
  return !name.empty() && name.find(':') == absl::string_view::npos &&
         name.find(' ') == absl::string_view::npos && IsPrintableAscii(name.data(), name.size());
}

}  // namespace plimsoll::fuzz

#endif  // PLIMSOLL_FUZZ_PROC_FUZZ_UTIL_H_
