// Fuzzes ParseBulkRecord (server/hypervisor/bulk_stats.h): one domain's record of libvirt's bulk
// stats call as plain (name, value) fields. The input is one field a line, `NAME=T:VALUE`, where T
// is the typed parameter's type as libvirt's virTypedParameterType has it: i (INT), u (UINT),
// l (LLONG), U (ULLONG), d (DOUBLE), b (BOOLEAN: 0 or anything else), s (STRING); any other T is a
// type libvirt may add later. A number that does not parse as its type becomes a STRING field, so
// every line is a field. Seeds: records in libvirt 9.0's shape (fuzz/corpus/bulk_stats_fuzz/).
//
// Beyond no crash, no UB: every byte figure is non-negative and whole KiB; balloon_fields counts
// the balloon.* names; a disk read request total comes only with a byte total, which is no smaller
// than any one disk's last value; fields the parser does not read (unknown names, non-integer values outside
// balloon.*) change nothing; and the record given twice reads as the record once (duplicated
// names: the last value wins, disks counted once), but for twice the balloon fields.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "server/hypervisor/bulk_stats.h"

namespace plimsoll::fuzz {
namespace {

using hypervisor::BalloonStats;
using hypervisor::BulkRecord;
using hypervisor::StatField;
using hypervisor::StatValue;

// "T:VALUE" -> the value of type T.
StatValue ValueOf(absl::string_view typed) {
  if (typed.size() < 2 || typed[1] != ':') return std::monostate();
  const char type = typed[0];
  const absl::string_view text = typed.substr(2);
  switch (type) {
    case 'i': {
      int32_t v;
      if (absl::SimpleAtoi(text, &v)) return v;
      break;
    }
    case 'u': {
      uint32_t v;
      if (absl::SimpleAtoi(text, &v)) return v;
      break;
    }
    case 'l': {
      int64_t v;
      if (absl::SimpleAtoi(text, &v)) return v;
      break;
    }
    case 'U': {
      uint64_t v;
      if (absl::SimpleAtoi(text, &v)) return v;
      break;
    }
    case 'd': {
      double v;
      if (absl::SimpleAtod(text, &v)) return v;
      break;
    }
    case 'b':
      return text != "0";
    case 's':
      break;
    default:
      return std::monostate();
  }
  return text;
}

std::vector<StatField> FieldsOf(absl::string_view input) {
  std::vector<StatField> fields;
  for (absl::string_view line : absl::StrSplit(input, '\n')) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      fields.push_back({line, std::monostate()});
    } else {
      fields.push_back({line.substr(0, eq), ValueOf(line.substr(eq + 1))});
    }
  }
  return fields;
}

bool IsInteger(const StatValue& v) {
  return std::holds_alternative<int32_t>(v) || std::holds_alternative<uint32_t>(v) ||
         std::holds_alternative<int64_t>(v) || std::holds_alternative<uint64_t>(v);
}

bool Same(const BulkRecord& a, const BulkRecord& b) {
  const BalloonStats& x = a.stats;
  const BalloonStats& y = b.stats;
  return a.state == b.state && a.max_bytes == b.max_bytes && x.actual_bytes == y.actual_bytes &&
         x.unused_bytes == y.unused_bytes && x.usable_bytes == y.usable_bytes &&
         x.available_bytes == y.available_bytes && x.disk_caches_bytes == y.disk_caches_bytes &&
         x.rss_bytes == y.rss_bytes && x.swap_in == y.swap_in && x.swap_out == y.swap_out &&
         x.major_fault == y.major_fault && x.minor_fault == y.minor_fault && x.last_update == y.last_update &&
         x.disk_read_bytes == y.disk_read_bytes && x.disk_read_requests == y.disk_read_requests;
}

void CheckBytes(const std::optional<int64_t>& bytes) {
  if (!bytes.has_value()) return;
  FUZZ_CHECK(*bytes >= 0);
  FUZZ_CHECK(*bytes % 1024 == 0);
}

void CheckRecord(absl::string_view input) {
  const std::vector<StatField> fields = FieldsOf(input);
  const BulkRecord r = hypervisor::ParseBulkRecord(fields);

  for (const std::optional<int64_t>* bytes :
       {&r.max_bytes, &r.stats.actual_bytes, &r.stats.unused_bytes, &r.stats.usable_bytes,
        &r.stats.available_bytes, &r.stats.disk_caches_bytes, &r.stats.rss_bytes}) {
    CheckBytes(*bytes);
  }
  if (r.stats.last_update.has_value()) FUZZ_CHECK(*r.stats.last_update >= 0);

  int balloon = 0;
  bool any_rd_bytes = false;
  std::vector<StatField> read;  // the fields the parser reads, in their order
  for (const StatField& f : fields) {
    if (absl::StartsWith(f.name, "balloon.")) {
      ++balloon;
      read.push_back(f);
    } else if (IsInteger(f.value) && (f.name == "state.state" || absl::StartsWith(f.name, "block."))) {
      read.push_back(f);
      if (absl::StartsWith(f.name, "block.") && absl::EndsWith(f.name, ".rd.bytes")) any_rd_bytes = true;
    }
  }
  FUZZ_CHECK(r.balloon_fields == balloon);
  if (r.stats.disk_read_requests.has_value()) FUZZ_CHECK(r.stats.disk_read_bytes.has_value());
  if (r.stats.disk_read_bytes.has_value()) FUZZ_CHECK(any_rd_bytes);
  if (r.state.has_value() || r.max_bytes.has_value() || r.stats.actual_bytes.has_value()) {
    FUZZ_CHECK(!read.empty());
  }

  // Each disk's last value alone (an earlier one of the same name was replaced): the total is no
  // smaller.
  if (r.stats.disk_read_bytes.has_value()) {
    absl::flat_hash_set<absl::string_view> later;
    for (auto it = read.rbegin(); it != read.rend(); ++it) {
      if (!absl::StartsWith(it->name, "block.") || !later.insert(it->name).second) continue;
      const BulkRecord one = hypervisor::ParseBulkRecord({&*it, 1});
      if (one.stats.disk_read_bytes.has_value()) FUZZ_CHECK(*one.stats.disk_read_bytes <= *r.stats.disk_read_bytes);
    }
  }

  // What the parser does not read changes nothing.
  const BulkRecord only_read = hypervisor::ParseBulkRecord(read);
  FUZZ_CHECK(Same(r, only_read));
  FUZZ_CHECK(only_read.balloon_fields == r.balloon_fields);

  // The record twice is the record once: duplicates are last-wins, per name and per disk.
  std::vector<StatField> twice = fields;
  twice.insert(twice.end(), fields.begin(), fields.end());
  const BulkRecord again = hypervisor::ParseBulkRecord(twice);
  FUZZ_CHECK(Same(r, again));
  FUZZ_CHECK(again.balloon_fields == 2 * r.balloon_fields);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckRecord(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
