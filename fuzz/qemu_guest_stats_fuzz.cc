// Fuzzes ParseQemuGuestStats (server/hypervisor/qemu_guest_stats.h): QEMU's answer to the
// balloon's guest-stats query, as libvirt hands it over (any text). Seeds: replies of QEMU 7.2 and
// 10.0 (fuzz/corpus/qemu_guest_stats_fuzz/).
//
// Beyond no crash, no UB: a reply that parses has every counter below 2^63 (2^64-1, a stat the
// guest never sent, and negatives are absent); any() says whether one is present; an error is
// INVALID_ARGUMENT or NOT_FOUND, never another code; and parsing is deterministic.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "server/hypervisor/qemu_guest_stats.h"

namespace plimsoll::fuzz {
namespace {

using hypervisor::BalloonPressure;

bool Below2To63(const std::optional<uint64_t>& v) { return !v.has_value() || *v < (uint64_t{1} << 63); }

bool Same(const BalloonPressure& a, const BalloonPressure& b) {
  return a.oom_kills == b.oom_kills && a.alloc_stalls == b.alloc_stalls && a.direct_scans == b.direct_scans &&
         a.direct_reclaims == b.direct_reclaims && a.async_scans == b.async_scans &&
         a.async_reclaims == b.async_reclaims && a.last_update == b.last_update;
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace plimsoll;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<hypervisor::BalloonPressure> p = hypervisor::ParseQemuGuestStats(text);
  const absl::StatusOr<hypervisor::BalloonPressure> again = hypervisor::ParseQemuGuestStats(text);
  FUZZ_CHECK(p.ok() == again.ok());
  if (!p.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(p.status()) || absl::IsNotFound(p.status()));
    return 0;
  }
  FUZZ_CHECK(fuzz::Same(*p, *again));
  for (const std::optional<uint64_t>& v : {p->oom_kills, p->alloc_stalls, p->direct_scans, p->direct_reclaims,
                                           p->async_scans, p->async_reclaims}) {
    FUZZ_CHECK(fuzz::Below2To63(v));
  }
  FUZZ_CHECK(!p->last_update.has_value() || *p->last_update >= 0);
  FUZZ_CHECK(p->any() == (p->oom_kills || p->alloc_stalls || p->direct_scans || p->direct_reclaims ||
                          p->async_scans || p->async_reclaims));
  return 0;
}
