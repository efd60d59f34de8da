#include "agent/reclaim_decision.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll::agent {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string Mib(uint64_t bytes) { return absl::StrFormat("%.1fMiB", static_cast<double>(bytes) / kMiB); }

std::string Pct(const std::optional<double>& v) { return v.has_value() ? absl::StrFormat("%.2f", *v) : "-"; }

ReclaimDecision Nothing(ReclaimReason reason, std::string detail = "") {
  return ReclaimDecision{reason, 0, std::move(detail)};
}

// a - b, or 0 when b >= a.
uint64_t Above(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

v1::ReclaimState ReclaimStateFor(ReclaimReason reason) {
  switch (reason) {
    case ReclaimReason::kStep:
    case ReclaimReason::kRateLimit:
      return v1::RECLAIM_STATE_ACTIVE;
    case ReclaimReason::kPressure: return v1::RECLAIM_STATE_STOPPED_PRESSURE;
    case ReclaimReason::kAfterError: return v1::RECLAIM_STATE_FAILED;
    case ReclaimReason::kOffDisabled: return v1::RECLAIM_STATE_OFF_DISABLED;
    case ReclaimReason::kOffUnsupported: return v1::RECLAIM_STATE_OFF_UNSUPPORTED;
    default: return v1::RECLAIM_STATE_IDLE;
  }
}

ReclaimDecision DecideReclaim(const ReclaimSituation& s, const ReclaimLawOptions& o) {
  // What the agent and the host allow at all.
  if (!s.enabled) return Nothing(ReclaimReason::kOffDisabled);
  if (!s.supported) return Nothing(ReclaimReason::kOffUnsupported);
  switch (s.bounds) {
    case BoundsStatus::kNone: return Nothing(ReclaimReason::kNoBounds);
    case BoundsStatus::kExpired: return Nothing(ReclaimReason::kBoundsExpired);
    case BoundsStatus::kInvalid: return Nothing(ReclaimReason::kBoundsInvalid);
    case BoundsStatus::kLive: break;
  }
  const ReclaimLimits& l = s.limits;
  if (!l.enabled || l.step_bytes == 0 || !(l.max_bytes_per_second > 0)) {
    return Nothing(ReclaimReason::kHostDisabled,
                   absl::StrCat("enabled=", l.enabled, " step=", Mib(l.step_bytes),
                                " rate=", Mib(static_cast<uint64_t>(std::max(0.0, l.max_bytes_per_second))), "/s"));
  }
  if (s.since_error < o.error_backoff) {
    return Nothing(ReclaimReason::kAfterError, absl::StrCat("since_error=", absl::FormatDuration(s.since_error)));
  }
  if (s.since_partial < o.partial_backoff) {
    return Nothing(ReclaimReason::kAfterPartial,
                   absl::StrCat("since_partial=", absl::FormatDuration(s.since_partial)));
  }

  // What the guest measures now.
  const ReclaimSample& m = s.sample;
  if (!m.mem_total_bytes || !m.mem_free_bytes || !m.active_file_bytes || !m.inactive_file_bytes) {
    return Nothing(ReclaimReason::kNoSample, "meminfo lacks MemTotal, MemFree, Active(file) or Inactive(file)");
  }
  // Refaults are the direct evidence that reclaimed pages were still in use; every kernel with
  // memory.reclaim (5.19+) counts them, so a missing rate only means no earlier sample yet.
  if (!m.file_refaults_per_second.has_value()) return Nothing(ReclaimReason::kNoBaseline);
  const double psi = std::max(m.psi_some_avg10.value_or(0), m.psi_some_recent_pct.value_or(0));
  const std::string pressure = absl::StrCat("psi_avg10=", Pct(m.psi_some_avg10), " psi_recent=",
                                            Pct(m.psi_some_recent_pct), " psi_stop=", Pct(l.psi_stop_pct),
                                            " refaults=", Pct(m.file_refaults_per_second),
                                            "/s refault_stop=", Pct(l.refault_stop_per_second), "/s");
  // Written so that a NaN stop or measurement stops rather than passes.
  if (!(psi <= l.psi_stop_pct) || !(*m.file_refaults_per_second <= l.refault_stop_per_second)) {
    return Nothing(ReclaimReason::kPressure, pressure);
  }

  const uint64_t used = Above(*m.mem_total_bytes, *m.mem_free_bytes);
  const uint64_t file = *m.active_file_bytes + *m.inactive_file_bytes;
  const uint64_t headroom = std::min(Above(used, l.keep_bytes), Above(file, l.keep_file_bytes));
  const std::string sizes = absl::StrCat("used=", Mib(used), " keep=", Mib(l.keep_bytes), " file=", Mib(file),
                                         " keep_file=", Mib(l.keep_file_bytes), " headroom=", Mib(headroom));
  if (headroom < o.min_step_bytes) return Nothing(ReclaimReason::kBelowKeep, sizes);

  // The rate as a bucket whose depth is one step: after a pause the next step may be a whole
  // step, never more; over any span T the steps add up to at most rate * T + step.
  const double earned = s.since_step == absl::InfiniteDuration()
                            ? static_cast<double>(l.step_bytes)
                            : l.max_bytes_per_second * std::max(0.0, absl::ToDoubleSeconds(s.since_step));
  const uint64_t allowance =
      earned >= static_cast<double>(l.step_bytes) ? l.step_bytes : static_cast<uint64_t>(earned);
  if (allowance < o.min_step_bytes) {
    return Nothing(ReclaimReason::kRateLimit,
                   absl::StrCat("allowance=", Mib(allowance), " since_step=", absl::FormatDuration(s.since_step)));
  }
  uint64_t bytes = std::min(headroom, allowance);
  // Within a step of the keep, half of what is left: the kernel may free more than it is asked
  // (docs/agent.md), and what it frees past the keep is working set; a write never asks for all
  // that is left, so that margin is there.
  if (headroom <= l.step_bytes) bytes = std::min(bytes, std::max(o.min_step_bytes, headroom / 2));
  bytes -= bytes % std::max<uint64_t>(o.page_bytes, 1);
  if (bytes < o.min_step_bytes) return Nothing(ReclaimReason::kBelowKeep, sizes);
  return ReclaimDecision{ReclaimReason::kStep, bytes, absl::StrCat(sizes, " step=", Mib(bytes), " ", pressure)};
}

}  // namespace plimsoll::agent
