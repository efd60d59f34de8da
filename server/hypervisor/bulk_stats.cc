#include "server/hypervisor/bulk_stats.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "server/hypervisor/block_reads.h"

namespace plimsoll::hypervisor {
namespace {

constexpr int64_t kKiB = 1024;

// An integer field's value; negatives read as 0 (libvirt's counters and sizes are unsigned, and
// 0 is what the daemon did with a negative one before this parser existed). nullopt for the
// types that are not integers.
struct IntegerOf {
  std::optional<uint64_t> operator()(std::monostate) const { return std::nullopt; }
  std::optional<uint64_t> operator()(int32_t v) const { return v < 0 ? 0 : static_cast<uint64_t>(v); }
  std::optional<uint64_t> operator()(uint32_t v) const { return v; }
  std::optional<uint64_t> operator()(int64_t v) const { return v < 0 ? 0 : static_cast<uint64_t>(v); }
  std::optional<uint64_t> operator()(uint64_t v) const { return v; }
  std::optional<uint64_t> operator()(double) const { return std::nullopt; }
  std::optional<uint64_t> operator()(bool) const { return std::nullopt; }
  std::optional<uint64_t> operator()(absl::string_view) const { return std::nullopt; }
};

std::optional<uint64_t> Integer(const StatValue& v) { return std::visit(IntegerOf(), v); }

// Stores `kib` as bytes into `*field`; false (nothing stored) when it does not fit.
bool StoreBytes(uint64_t kib, std::optional<int64_t>* field) {
  std::optional<int64_t> bytes = KiBToBytes(kib);
  if (!bytes.has_value()) return false;
  *field = *bytes;
  return true;
}

}  // namespace

std::optional<int64_t> KiBToBytes(uint64_t kib) {
  if (kib > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / kKiB)) return std::nullopt;
  return static_cast<int64_t>(kib) * kKiB;
}

bool StoreBalloonStat(absl::string_view name, uint64_t value, BalloonStats* out) {
  if (name == "current") return StoreBytes(value, &out->actual_bytes);
  if (name == "unused") return StoreBytes(value, &out->unused_bytes);
  if (name == "usable") return StoreBytes(value, &out->usable_bytes);
  if (name == "available") return StoreBytes(value, &out->available_bytes);
  if (name == "disk_caches") return StoreBytes(value, &out->disk_caches_bytes);
  if (name == "rss") return StoreBytes(value, &out->rss_bytes);
  std::optional<uint64_t>* count = nullptr;
  if (name == "swap_in") count = &out->swap_in;
  if (name == "swap_out") count = &out->swap_out;
  if (name == "major_fault") count = &out->major_fault;
  if (name == "minor_fault") count = &out->minor_fault;
  if (count != nullptr) {
    *count = value;
    return true;
  }
  if (name == "last-update") {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out->last_update = static_cast<int64_t>(value);
    return true;
  }
  // "maximum" (ParseBulkRecord reads it), hugetlb counters and a newer libvirt's stats.
  return false;
}

BulkRecord ParseBulkRecord(absl::Span<const StatField> fields) {
  BulkRecord out;
  BlockReadSum reads;
  for (const StatField& f : fields) {
    absl::string_view name = f.name;
    const std::optional<uint64_t> value = Integer(f.value);
    if (absl::ConsumePrefix(&name, "balloon.")) {
      ++out.balloon_fields;  // whatever its type: the group is there
      if (!value.has_value()) continue;
      if (name == "maximum") {
        StoreBytes(*value, &out.max_bytes);
      } else {
        StoreBalloonStat(name, *value, &out.stats);
      }
    } else if (!value.has_value()) {
      continue;
    } else if (f.name == "state.state") {
      out.state = *value;
    } else if (absl::StartsWith(f.name, "block.")) {
      reads.Add(f.name, *value);
    }
  }
  reads.StoreInto(&out.stats);
  return out;
}

}  // namespace plimsoll::hypervisor
