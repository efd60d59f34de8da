// Sizes, rates and durations as the scenario files write them, and back. Binary units only:
// "512MiB", "4GiB", "1.5GiB", "4096" (bytes), "40MiB/s" for rates, "300s", "5m", "1h", "250ms".
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_UNITS_H_
#define PLIMSOLL_SIM_UNITS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plimsoll::sim {

inline constexpr double kKib = 1024.0;
inline constexpr double kMib = 1024.0 * 1024;
inline constexpr double kGib = 1024.0 * 1024 * 1024;

// Bytes from "4GiB", "512MiB", "64KiB", "100B" or a bare number of bytes. Negative sizes are
// INVALID_ARGUMENT.
absl::StatusOr<double> ParseBytes(absl::string_view text);

// Bytes per second from "40MiB/s" (the "/s" is optional).
absl::StatusOr<double> ParseRate(absl::string_view text);

// Seconds from "250ms", "30s", "5m", "1h" or a bare number of seconds. Negative is an error.
absl::StatusOr<double> ParseSeconds(absl::string_view text);

// "1.5GiB", "512MiB", "12.3MiB": whole or one decimal, in the largest unit that is >= 1.
std::string FormatBytes(double bytes);

// Exact forms that ParseBytes and ParseSeconds read back to the same double, for printing
// scenario files: the largest binary unit the value is a whole multiple of ("4GiB", "1536MiB",
// "4097"), else the shortest decimal that parses back exactly ("0.5"). Negative values are
// printed but do not parse.
std::string FormatExactBytes(double bytes);
// "1h", "10m", "90s", "0.25s" likewise.
std::string FormatExactSeconds(double seconds);

// A JSON number with `decimals` decimals; "null" for NaN and infinities (JSON has neither).
std::string FormatJsonNumber(double v, int decimals);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_UNITS_H_
