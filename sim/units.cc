#include "sim/units.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll::sim {
namespace {

// Splits "12.5MiB" into 12.5 and "MiB".
absl::StatusOr<std::pair<double, std::string>> SplitNumber(absl::string_view text,
                                                           absl::string_view what) {
  text = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < text.size() && (absl::ascii_isdigit(text[i]) || text[i] == '.' || text[i] == '-' ||
                             text[i] == '+' || text[i] == 'e')) {
    // An 'e' is only part of the number when a digit follows (1e3), not in a unit.
    if (text[i] == 'e' && (i + 1 >= text.size() || !absl::ascii_isdigit(text[i + 1]))) break;
    ++i;
  }
  double value = 0;
  if (i == 0 || !absl::SimpleAtod(text.substr(0, i), &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat("bad ", what, " \"", text, "\""));
  }
  if (value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative ", what, " \"", text, "\""));
  }
  return std::make_pair(value, std::string(text.substr(i)));
}

}  // namespace

absl::StatusOr<double> ParseBytes(absl::string_view text) {
  auto split = SplitNumber(text, "size");
  if (!split.ok()) return split.status();
  const auto& [value, unit] = *split;
  if (unit.empty() || unit == "B") return value;
  if (unit == "KiB") return value * kKib;
  if (unit == "MiB") return value * kMib;
  if (unit == "GiB") return value * kGib;
  if (unit == "TiB") return value * kGib * 1024;
  return absl::InvalidArgumentError(
      absl::StrCat("bad size unit in \"", text, "\" (use B, KiB, MiB, GiB, TiB)"));
}

absl::StatusOr<double> ParseRate(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (absl::EndsWith(t, "/s")) t.remove_suffix(2);
  return ParseBytes(t);
}

absl::StatusOr<double> ParseSeconds(absl::string_view text) {
  auto split = SplitNumber(text, "duration");
  if (!split.ok()) return split.status();
  const auto& [value, unit] = *split;
  if (unit.empty() || unit == "s") return value;
  if (unit == "ms") return value / 1000;
  if (unit == "m") return value * 60;
  if (unit == "h") return value * 3600;
  return absl::InvalidArgumentError(
      absl::StrCat("bad duration unit in \"", text, "\" (use ms, s, m, h)"));
}

std::string FormatBytes(double bytes) {
  const char* unit = "B";
  double value = bytes;
  for (const char* next : {"KiB", "MiB", "GiB", "TiB"}) {
    if (std::fabs(value) < 1024) break;
    value /= 1024;
    unit = next;
  }
  const double tenths = std::round(value * 10);
  if (std::fmod(tenths, 10) == 0) return absl::StrFormat("%.0f%s", tenths / 10, unit);
  return absl::StrFormat("%.1f%s", tenths / 10, unit);
}

}  // namespace plimsoll::sim
