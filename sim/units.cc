#include "sim/units.h"

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

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

// The shortest fixed-point decimal of `value` that reads back exactly (no exponent: the
// scenario parser only takes "1e3"-style exponents, not "1e-05").
std::string ExactDecimal(double value) {
  for (int precision = 0; precision <= 30; ++precision) {
    std::string text = absl::StrFormat("%.*f", precision, value);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == value) return text;
  }
  return absl::StrFormat("%.30f", value);
}

// `value` in the largest of `units` (name, size; largest first) it is a whole multiple of.
std::string InLargestUnit(double value,
                          std::initializer_list<std::pair<const char*, double>> units) {
  if (value != 0 && std::isfinite(value)) {
    for (const auto& [name, size] : units) {
      const double count = value / size;
      if (count == std::floor(count) && count * size == value) {
        return absl::StrCat(ExactDecimal(count), name);
      }
    }
  }
  return ExactDecimal(value);
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

std::string FormatExactBytes(double bytes) {
  return InLargestUnit(bytes, {{"TiB", kGib * 1024}, {"GiB", kGib}, {"MiB", kMib}, {"KiB", kKib}});
}

std::string FormatExactSeconds(double seconds) {
  const std::string text = InLargestUnit(seconds, {{"h", 3600}, {"m", 60}, {"s", 1}});
  // Fractions of a second keep their unit too, for the reader.
  return absl::EndsWith(text, "h") || absl::EndsWith(text, "m") || absl::EndsWith(text, "s")
             ? text
             : absl::StrCat(text, "s");
}

std::string FormatJsonNumber(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.*f", decimals, v);
}

}  // namespace plimsoll::sim
