#include "sim/guest_reclaim.h"

#include <algorithm>
#include <cmath>

namespace plimsoll::sim {
namespace {

constexpr double kPage = 4096;

}  // namespace

double GuestReclaimBytes(const GuestReclaimSituation& s, const GuestReclaimLimits& limits) {
  if (s.psi_pct > limits.psi_stop_pct) return 0;
  if (s.refault_bytes_per_second > limits.refault_stop_bytes_per_second) return 0;
  const double headroom = std::min(s.used - s.keep, s.file - limits.keep_file_bytes);
  if (headroom <= 0) return 0;
  const double allowance =
      std::min(limits.step_bytes, limits.bytes_per_second * std::max(0.0, s.since_step));
  double bytes = std::min(headroom, allowance);
  // Near the keep the kernel may free more than asked: half of what is left, as the agent asks.
  if (headroom <= limits.step_bytes) {
    bytes = std::min(bytes, std::max(limits.min_step_bytes, headroom / 2));
  }
  bytes = std::floor(bytes / kPage) * kPage;
  return bytes >= limits.min_step_bytes ? bytes : 0;
}

}  // namespace plimsoll::sim
