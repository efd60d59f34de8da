#include "server/hypervisor/block_reads.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace plimsoll::hypervisor {
namespace {

// "block.<digits>.<rest>" -> rest; "" for anything else ("block.count", "balloon.current").
absl::string_view PerDiskField(absl::string_view field) {
  constexpr absl::string_view kPrefix = "block.";
  if (!absl::ConsumePrefix(&field, kPrefix)) return "";
  size_t digits = 0;
  while (digits < field.size() && absl::ascii_isdigit(static_cast<unsigned char>(field[digits]))) ++digits;
  if (digits == 0 || digits >= field.size() || field[digits] != '.') return "";
  return field.substr(digits + 1);
}

// Saturates instead of wrapping: a wrapped sum would read as a counter that went backwards.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

}  // namespace

void BlockReadSum::Add(absl::string_view field, uint64_t value) {
  const absl::string_view rest = PerDiskField(field);
  if (rest == "rd.bytes") {
    bytes_ = SaturatingAdd(bytes_, value);
    seen_bytes_ = true;
  } else if (rest == "rd.reqs") {
    requests_ = SaturatingAdd(requests_, value);
    seen_requests_ = true;
  }
}

void BlockReadSum::StoreInto(BalloonStats* out) const {
  if (!seen_bytes_) return;
  out->disk_read_bytes = bytes_;
  if (seen_requests_) out->disk_read_requests = requests_;
}

}  // namespace plimsoll::hypervisor
