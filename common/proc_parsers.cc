#include "common/proc_parsers.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace plimsoll {
namespace {

// Error messages quote at most this much of a hostile line.
constexpr size_t kMaxQuotedBytes = 64;
// A PSI average is "<digits>.<2 digits>"; anything much longer is not one.
constexpr size_t kMaxAverageChars = 16;

std::string Quote(absl::string_view s) {
  std::string out = absl::StrCat("'", absl::CHexEscape(s.substr(0, kMaxQuotedBytes)), "'");
  if (s.size() > kMaxQuotedBytes) out += "...";
  return out;
}

absl::Status LineError(absl::string_view file, int line_no, absl::string_view problem,
                       absl::string_view line) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, " line ", line_no, ": ", problem, ": ", Quote(line)));
}

absl::Status CheckSize(absl::string_view file, absl::string_view text) {
  if (text.size() > kMaxProcTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": text of ", text.size(),
                                                   " bytes exceeds the limit of ",
                                                   kMaxProcTextBytes));
  }
  return absl::OkStatus();
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

bool IsBlank(absl::string_view line) {
  for (char c : line) {
    if (!IsSpace(c)) return false;
  }
  return true;
}

// Removes and returns the next run of non-space characters of `rest`; empty when none is left.
absl::string_view NextToken(absl::string_view& rest) {
  size_t begin = 0;
  while (begin < rest.size() && IsSpace(rest[begin])) ++begin;
  size_t end = begin;
  while (end < rest.size() && !IsSpace(rest[end])) ++end;
  absl::string_view token = rest.substr(begin, end - begin);
  rest.remove_prefix(end);
  return token;
}

// Printable ASCII without space and ':'; never empty.
bool IsValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~' || c == ':') return false;
  }
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Plain decimal digits only (no sign, no space); nullopt when empty, not digits, or above
// UINT64_MAX. Stops at the first bad character, so the work is bounded by the token length.
std::optional<uint64_t> ParseDecimalU64(absl::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (!IsDigit(c)) return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

bool IsAllDigits(absl::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

// "<digits>" or "<digits>.<digits>", at most kMaxAverageChars long, within [0, 100].
std::optional<double> ParseAverage(absl::string_view s) {
  if (s.empty() || s.size() > kMaxAverageChars) return std::nullopt;
  const size_t dot = s.find('.');
  absl::string_view whole = s.substr(0, dot);
  absl::string_view fraction =
      dot == absl::string_view::npos ? absl::string_view() : s.substr(dot + 1);
  if (whole.empty() || !IsAllDigits(whole)) return std::nullopt;
  if (dot != absl::string_view::npos && (fraction.empty() || !IsAllDigits(fraction))) {
    return std::nullopt;
  }
  double value = 0;
  if (!absl::SimpleAtod(s, &value)) return std::nullopt;
  if (!(value >= 0 && value <= 100)) return std::nullopt;
  return value;
}

// Calls `fn(line_no, line)` for every non-blank line; stops at the first error.
// The kernel ends every line with '\n', so a text that does not end with one was cut short
// (a short read, a truncated capture) and is refused rather than half used.
template <typename Fn>
absl::Status ForEachLine(absl::string_view file, absl::string_view text, Fn fn) {
  if (!text.empty() && text.back() != '\n') {
    int last_line_no = 1;
    for (char c : text) last_line_no += c == '\n' ? 1 : 0;
    const size_t last_nl = text.rfind('\n');
    return LineError(file, last_line_no, "truncated: no newline at the end",
                     last_nl == absl::string_view::npos ? text : text.substr(last_nl + 1));
  }
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    absl::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == absl::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (IsBlank(line)) continue;
    absl::Status status = fn(line_no, line);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

constexpr absl::string_view kMeminfo = "meminfo";
constexpr absl::string_view kVmstat = "vmstat";
constexpr absl::string_view kPsi = "psi";

}  // namespace

std::optional<int64_t> Meminfo::Bytes(absl::string_view name) const {
  auto it = bytes.find(name);
  if (it == bytes.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> Meminfo::Count(absl::string_view name) const {
  auto it = counts.find(name);
  if (it == counts.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<Meminfo> ParseMeminfo(absl::string_view text) {
  if (absl::Status s = CheckSize(kMeminfo, text); !s.ok()) return s;
  Meminfo info;
  int mem_total_unitless_line = 0;
  absl::Status status = ForEachLine(kMeminfo, text, [&](int line_no, absl::string_view line) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return LineError(kMeminfo, line_no, "no ':' after the name", line);
    }
    absl::string_view name = line.substr(0, colon);
    if (!IsValidName(name)) return LineError(kMeminfo, line_no, "bad field name", line);
    absl::string_view rest = line.substr(colon + 1);
    const absl::string_view number = NextToken(rest);
    const absl::string_view unit = NextToken(rest);
    if (!NextToken(rest).empty()) {
      return LineError(kMeminfo, line_no, "unexpected text after the unit", line);
    }
    if (number.empty()) return LineError(kMeminfo, line_no, "no value", line);
    const std::optional<uint64_t> value = ParseDecimalU64(number);
    if (!value.has_value()) {
      return LineError(kMeminfo, line_no, "value is not a decimal number within uint64", line);
    }
    if (info.bytes.contains(name) || info.counts.contains(name)) {
      return LineError(kMeminfo, line_no, "duplicate field", line);
    }
    constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (unit.empty()) {
      if (*value > kInt64Max) {
        return LineError(kMeminfo, line_no, "value does not fit int64", line);
      }
      if (name == "MemTotal") mem_total_unitless_line = line_no;
      info.counts.emplace(name, static_cast<int64_t>(*value));
    } else if (unit == "kB") {
      if (*value > kInt64Max / 1024) {
        return LineError(kMeminfo, line_no, "size in bytes does not fit int64", line);
      }
      info.bytes.emplace(name, static_cast<int64_t>(*value) * 1024);
    } else {
      return LineError(kMeminfo, line_no, "unit is not kB", line);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (mem_total_unitless_line != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kMeminfo, " line ", mem_total_unitless_line, ": MemTotal has no kB unit"));
  }
  if (!info.bytes.contains("MemTotal")) {
    return absl::InvalidArgumentError(absl::StrCat(kMeminfo, ": no MemTotal line"));
  }
  return info;
}

std::optional<uint64_t> Vmstat::Get(absl::string_view name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<Vmstat> ParseVmstat(absl::string_view text) {
  if (absl::Status s = CheckSize(kVmstat, text); !s.ok()) return s;
  Vmstat vmstat;
  absl::Status status = ForEachLine(kVmstat, text, [&](int line_no, absl::string_view line) {
    absl::string_view rest = line;
    const absl::string_view name = NextToken(rest);
    const absl::string_view number = NextToken(rest);
    if (!NextToken(rest).empty()) {
      return LineError(kVmstat, line_no, "unexpected text after the value", line);
    }
    if (!IsValidName(name)) return LineError(kVmstat, line_no, "bad counter name", line);
    if (number.empty()) return LineError(kVmstat, line_no, "no value", line);
    const std::optional<uint64_t> value = ParseDecimalU64(number);
    if (!value.has_value()) {
      return LineError(kVmstat, line_no, "value is not a decimal number within uint64", line);
    }
    if (!vmstat.values.emplace(name, *value).second) {
      return LineError(kVmstat, line_no, "duplicate counter", line);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (vmstat.values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kVmstat, ": no counters"));
  }
  return vmstat;
}

absl::StatusOr<Psi> ParsePsi(absl::string_view text) {
  if (absl::Status s = CheckSize(kPsi, text); !s.ok()) return s;
  Psi psi;
  absl::Status status = ForEachLine(kPsi, text, [&](int line_no, absl::string_view line) {
    absl::string_view rest = line;
    const absl::string_view kind = NextToken(rest);
    std::optional<PsiLine>* slot = nullptr;
    if (kind == "some") {
      slot = &psi.some;
    } else if (kind == "full") {
      slot = &psi.full;
    } else {
      return LineError(kPsi, line_no, "line is neither 'some' nor 'full'", line);
    }
    if (slot->has_value()) return LineError(kPsi, line_no, "repeated line", line);

    PsiLine parsed;
    bool seen_avg10 = false, seen_avg60 = false, seen_avg300 = false, seen_total = false;
    for (absl::string_view field = NextToken(rest); !field.empty(); field = NextToken(rest)) {
      const size_t eq = field.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return LineError(kPsi, line_no, "field is not key=value", line);
      }
      const absl::string_view key = field.substr(0, eq);
      const absl::string_view value = field.substr(eq + 1);
      double* average = nullptr;
      bool* seen = nullptr;
      if (key == "avg10") {
        average = &parsed.avg10;
        seen = &seen_avg10;
      } else if (key == "avg60") {
        average = &parsed.avg60;
        seen = &seen_avg60;
      } else if (key == "avg300") {
        average = &parsed.avg300;
        seen = &seen_avg300;
      } else if (key == "total") {
        seen = &seen_total;
      } else {
        continue;  // A key this parser does not know: tolerated for future kernels.
      }
      if (*seen) return LineError(kPsi, line_no, "repeated key", line);
      *seen = true;
      if (average != nullptr) {
        const std::optional<double> parsed_average = ParseAverage(value);
        if (!parsed_average.has_value()) {
          return LineError(kPsi, line_no, "average is not a decimal in [0, 100]", line);
        }
        *average = *parsed_average;
      } else {
        const std::optional<uint64_t> total = ParseDecimalU64(value);
        if (!total.has_value()) {
          return LineError(kPsi, line_no, "total is not a decimal number within uint64", line);
        }
        parsed.total_us = *total;
      }
    }
    if (!(seen_avg10 && seen_avg60 && seen_avg300 && seen_total)) {
      return LineError(kPsi, line_no, "missing one of avg10, avg60, avg300, total", line);
    }
    *slot = parsed;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return psi;
}

}  // namespace plimsoll
