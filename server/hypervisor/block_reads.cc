#include "server/hypervisor/block_reads.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace plimsoll::hypervisor {
namespace {

// "block.<digits>.<rest>" -> rest, with *disk = digits; "" for anything else ("block.count",
// "balloon.current").
absl::string_view PerDiskField(absl::string_view field, absl::string_view* disk) {
  constexpr absl::string_view kPrefix = "block.";
  if (!absl::ConsumePrefix(&field, kPrefix)) return "";
  size_t digits = 0;
  while (digits < field.size() && absl::ascii_isdigit(static_cast<unsigned char>(field[digits]))) ++digits;
  if (digits == 0 || digits >= field.size() || field[digits] != '.') return "";
  *disk = field.substr(0, digits);
  return field.substr(digits + 1);
}

// Saturates instead of wrapping: a wrapped sum would read as a counter that went backwards.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

}  // namespace

void BlockReadSum::Add(absl::string_view field, uint64_t value) {
  absl::string_view disk;
  const absl::string_view rest = PerDiskField(field, &disk);
  if (rest == "rd.bytes") {
    disks_[disk].bytes = value;
    seen_bytes_ = true;
  } else if (rest == "rd.reqs") {
    disks_[disk].requests = value;
    seen_requests_ = true;
  }
}

void BlockReadSum::StoreInto(BalloonStats* out) const {
  if (!seen_bytes_) return;
  uint64_t bytes = 0, requests = 0;
  for (const auto& [disk, reads] : disks_) {
    bytes = SaturatingAdd(bytes, reads.bytes);
    requests = SaturatingAdd(requests, reads.requests);
  }
  out->disk_read_bytes = bytes;
  if (seen_requests_) out->disk_read_requests = requests;
}

}  // namespace plimsoll::hypervisor
