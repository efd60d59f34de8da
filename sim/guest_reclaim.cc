#include "sim/guest_reclaim.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "agent/reclaim_decision.h"

namespace plimsoll::sim {
namespace {

constexpr double kPage = 4096;

uint64_t Bytes(double b) { return b > 0 ? static_cast<uint64_t>(b) : 0; }

}  // namespace

double GuestReclaimBytes(const GuestReclaimSituation& s, const GuestReclaimLimits& limits) {
  // The agent's own law, on the model's figures: its MemTotal - MemFree is U, its file LRU F.
  agent::ReclaimSituation a;
  a.bounds = agent::BoundsStatus::kLive;
  a.limits.enabled = true;
  a.limits.keep_bytes = Bytes(s.keep);
  a.limits.keep_file_bytes = Bytes(limits.keep_file_bytes);
  a.limits.step_bytes = Bytes(limits.step_bytes);
  a.limits.max_bytes_per_second = limits.bytes_per_second;
  a.limits.psi_stop_pct = limits.psi_stop_pct;
  a.limits.refault_stop_per_second = limits.refault_stop_bytes_per_second / kPage;
  a.sample.mem_total_bytes = Bytes(s.used);
  a.sample.mem_free_bytes = 0;
  a.sample.active_file_bytes = Bytes(s.file);
  a.sample.inactive_file_bytes = 0;
  a.sample.psi_some_avg10 = s.psi_pct;
  a.sample.file_refaults_per_second = s.refault_bytes_per_second / kPage;
  a.since_step = s.since_step == std::numeric_limits<double>::infinity() ? absl::InfiniteDuration()
                                                                         : absl::Seconds(std::max(0.0, s.since_step));
  agent::ReclaimLawOptions options;
  options.min_step_bytes = Bytes(limits.min_step_bytes);
  return static_cast<double>(agent::DecideReclaim(a, options).bytes);
}

}  // namespace plimsoll::sim
