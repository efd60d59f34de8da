#include "common/mib_format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace plimsoll {

std::string FormatMib(double bytes) {
  constexpr double kMib = 1024.0 * 1024.0;
  const double mib = bytes / kMib;
  // Round to one decimal first, so 1023.96 MiB prints as "1024MiB", not "1024.0MiB".
  const double tenths = std::round(mib * 10.0);
  if (std::fmod(tenths, 10.0) == 0.0) return absl::StrFormat("%.0fMiB", tenths / 10.0);
  return absl::StrFormat("%.1fMiB", tenths / 10.0);
}

std::string FormatMib(int64_t bytes) { return FormatMib(static_cast<double>(bytes)); }

std::string FormatMib(const std::optional<int64_t>& bytes) {
  return bytes.has_value() ? FormatMib(*bytes) : "-";
}

}  // namespace plimsoll
