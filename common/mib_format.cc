#include "common/mib_format.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace plimsoll {

std::string FormatMib(double bytes) {
  constexpr double kMib = 1024.0 * 1024.0;
  const double mib = bytes / kMib;
  // Round to one decimal first, so 1023.96 MiB prints as "1024MiB", not "1024.0MiB".
  const double tenths = std::round(mib * 10.0);
  if (std::fabs(tenths) < 1e15) {
    // Integer formatting, written backwards into a buffer with no temporary: a policy formats a
    // dozen sizes per guest per decision, 10,000 guests a tick (StrFormat's %f was a tenth of
    // such a decision's time).
    const int64_t t = static_cast<int64_t>(tenths);
    uint64_t whole = static_cast<uint64_t>(t < 0 ? -t : t);
    const uint64_t tenth = whole % 10;
    whole /= 10;
    char buf[32];
    char* const end = buf + sizeof(buf);
    char* p = end;
    *--p = 'B';
    *--p = 'i';
    *--p = 'M';
    if (tenth != 0) {
      *--p = static_cast<char>('0' + tenth);
      *--p = '.';
    }
    do {
      *--p = static_cast<char>('0' + whole % 10);
      whole /= 10;
    } while (whole != 0);
    if (t < 0) *--p = '-';
    return std::string(p, static_cast<size_t>(end - p));
  }
  if (std::fmod(tenths, 10.0) == 0.0) return absl::StrFormat("%.0fMiB", tenths / 10.0);
  return absl::StrFormat("%.1fMiB", tenths / 10.0);
}

std::string FormatMib(int64_t bytes) { return FormatMib(static_cast<double>(bytes)); }

std::string FormatMib(const std::optional<int64_t>& bytes) {
  return bytes.has_value() ? FormatMib(*bytes) : "-";
}

}  // namespace plimsoll
