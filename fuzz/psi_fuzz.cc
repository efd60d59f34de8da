// Fuzzes ParsePsi (common/proc_parsers.h) with arbitrary bytes: no crash, no UB, no leak; an
// accepted text satisfies the header's contract (averages finite and in [0, 100]) and its lines,
// printed back in the kernel's format, parse to the same values.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/proc_parsers.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/proc_fuzz_util.h"

namespace plimsoll::fuzz {
namespace {

bool IsAverage(double v) { return std::isfinite(v) && v >= 0 && v <= 100; }

void CheckLine(const PsiLine& line) {
  FUZZ_CHECK(IsAverage(line.avg10));
  FUZZ_CHECK(IsAverage(line.avg60));
  FUZZ_CHECK(IsAverage(line.avg300));
}

// The shortest plain decimal that parses back to `v`: never longer than the text it came from,
// so it stays within the parser's length limit for averages.
std::string Decimal(double v) {
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  FUZZ_CHECK(r.ec == std::errc());
  return std::string(buf, r.ptr);
}

std::string Print(absl::string_view kind, const PsiLine& l) {
  return absl::StrCat(kind, " avg10=", Decimal(l.avg10), " avg60=", Decimal(l.avg60),
                      " avg300=", Decimal(l.avg300), " total=", l.total_us, "\n");
}

bool Same(const std::optional<PsiLine>& a, const std::optional<PsiLine>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a.has_value()) return true;
  return a->avg10 == b->avg10 && a->avg60 == b->avg60 && a->avg300 == b->avg300 &&
         a->total_us == b->total_us;
}

void CheckPsi(absl::string_view text) {
  absl::StatusOr<Psi> psi = ParsePsi(text);
  if (!psi.ok()) {
    CheckRefusal(psi.status());
    return;
  }
  CheckAcceptedText(text);
  std::string printed;
  if (psi->some.has_value()) {
    CheckLine(*psi->some);
    printed += Print("some", *psi->some);
  }
  if (psi->full.has_value()) {
    CheckLine(*psi->full);
    printed += Print("full", *psi->full);
  }
  absl::StatusOr<Psi> again = ParsePsi(printed);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(Same(again->some, psi->some));
  FUZZ_CHECK(Same(again->full, psi->full));
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckPsi(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
