// Pure parsers for the Linux /proc memory files: /proc/meminfo, /proc/vmstat and
// /proc/pressure/memory (PSI). They take text, never paths, so the host reader and the
// in-guest agent share them and tests and fuzzers feed them literal strings.
//
// Contract shared by all three parsers, which callers may rely on:
// - Input is untrusted. Any byte sequence returns a Status or a value; nothing crashes,
//   nothing overflows, and work and memory are linear in the input, which is capped at
//   kMaxProcTextBytes.
// - Parsing is strict: a line the kernel would never write (bad name, bad number, number
//   out of range, wrong unit, duplicate name) is INVALID_ARGUMENT and the message names the
//   1-based line number. A file that fails to parse is not half used.
// - Lines end at '\n' and blank lines are ignored. The kernel ends every line with '\n', so a
//   non-empty text whose last byte is not '\n' was cut short and is INVALID_ARGUMENT
//   ("truncated"), never parsed as if the last number were complete.
// - Names may be any printable ASCII without spaces or ':' (so error messages and
//   metric labels built from them are safe); numbers are plain decimal digits, no sign.
//
// Thread-safe: free functions without shared state.
#ifndef PLIMSOLL_COMMON_PROC_PARSERS_H_
#define PLIMSOLL_COMMON_PROC_PARSERS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plimsoll {

// Texts longer than this are rejected before parsing. Real files are a few KiB
// (meminfo ~1.5 KiB, vmstat ~5 KiB, PSI ~100 B); readers may use it as their read limit.
inline constexpr size_t kMaxProcTextBytes = 1 << 20;

// /proc/meminfo. Lines with a "kB" unit are stored in bytes (value * 1024); lines without a
// unit (HugePages_Total, HugePages_Free, HugePages_Rsvd, HugePages_Surp) are page counts and
// stored apart, so a count is never mistaken for a size.
struct Meminfo {
  absl::flat_hash_map<std::string, int64_t> bytes;   // "MemTotal" -> bytes
  absl::flat_hash_map<std::string, int64_t> counts;  // "HugePages_Total" -> pages

  // The size of a kB field in bytes, or nullopt when the file had no such kB line.
  std::optional<int64_t> Bytes(absl::string_view name) const;
  // The value of a unitless field, or nullopt when the file had no such unitless line.
  std::optional<int64_t> Count(absl::string_view name) const;
};

// Parses /proc/meminfo text ("Name:   <digits> kB" or "Name:   <digits>" per line).
// INVALID_ARGUMENT (with the line number) on a malformed line, on a value whose size in bytes
// does not fit int64_t, or when MemTotal is missing or has no kB unit. Other fields are not
// required: callers check for the ones they need.
absl::StatusOr<Meminfo> ParseMeminfo(absl::string_view text);

// /proc/vmstat: counter and gauge names to their values, exactly as the kernel prints them.
struct Vmstat {
  absl::flat_hash_map<std::string, uint64_t> values;

  // The value of `name`, or nullopt when the file had no such line.
  std::optional<uint64_t> Get(absl::string_view name) const;
};

// Parses /proc/vmstat text ("name <digits>" per line). INVALID_ARGUMENT (with the line
// number) on a malformed line, a value above UINT64_MAX or a duplicate name, and on a text
// with no lines at all (the kernel never writes an empty vmstat).
absl::StatusOr<Vmstat> ParseVmstat(absl::string_view text);

// One PSI line. Averages are percentages of wall time in [0, 100]; total is cumulative
// stall time in microseconds since boot.
struct PsiLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
};

// A /proc/pressure/<resource> file. Either line may be absent: kernels before 5.13 have no
// "full" line for cpu, and an empty text yields both absent.
struct Psi {
  std::optional<PsiLine> some;
  std::optional<PsiLine> full;
};

// Parses PSI text ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0", then the same for
// "full"). Empty or blank text is OK and returns both lines absent (a caller that needs PSI
// checks `some`). INVALID_ARGUMENT (with the line number) on a line that is neither "some"
// nor "full", a repeated line, a missing avg10/avg60/avg300/total, a repeated key, an
// average that is not a plain decimal in [0, 100], or a total above UINT64_MAX. Unknown
// key=value pairs are skipped, so a future kernel that adds one still parses.
absl::StatusOr<Psi> ParsePsi(absl::string_view text);

}  // namespace plimsoll

#endif  // PLIMSOLL_COMMON_PROC_PARSERS_H_
