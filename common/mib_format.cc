#include "common/mib_format.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll {

std::string FormatMib(double bytes) {
  constexpr double kMib = 1024.0 * 1024.0;
  const double mib = bytes / kMib;
  // Round to one decimal first, so 1023.96 MiB prints as "1024MiB", not "1024.0MiB".
  const double tenths = std::round(mib * 10.0);
  if (std::fabs(tenths) < 1e15) {
    // Integer formatting: a policy formats a dozen sizes per guest per decision, and
    // StrFormat's %f was a tenth of a 10,000-guest decision's time.
    const int64_t t = static_cast<int64_t>(tenths);
    const int64_t whole = (t < 0 ? -t : t) / 10;
    const int64_t tenth = (t < 0 ? -t : t) % 10;
    const char* sign = t < 0 ? "-" : "";
    return tenth == 0 ? absl::StrCat(sign, whole, "MiB") : absl::StrCat(sign, whole, ".", tenth, "MiB");
  }
  if (std::fmod(tenths, 10.0) == 0.0) return absl::StrFormat("%.0fMiB", tenths / 10.0);
  return absl::StrFormat("%.1fMiB", tenths / 10.0);
}

std::string FormatMib(int64_t bytes) { return FormatMib(static_cast<double>(bytes)); }

std::string FormatMib(const std::optional<int64_t>& bytes) {
  return bytes.has_value() ? FormatMib(*bytes) : "-";
}

}  // namespace plimsoll
