#include "policy/balloon_progress.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "policy/guest_signals.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {
namespace {

void OpenWindow(ProgressMemory* memory, int direction, double now_s, double actual) {
  memory->window_direction = direction;
  memory->window_start_s = now_s;
  memory->window_start_actual = actual;
}

}  // namespace

void NoteBalloonSize(double actual, double target, ProgressMemory* memory) {
  if (!memory->lowest_actual.has_value() || std::fabs(memory->lowest_for_target - target) >= 1) {
    memory->lowest_actual = actual;
    memory->lowest_for_target = target;
    return;
  }
  memory->lowest_actual = std::min(*memory->lowest_actual, actual);
}

double ProgressTolerance(double target_bytes, const ProgressParams& params) {
  return std::max(params.tolerance_min_bytes, params.tolerance_fraction * target_bytes);
}

ProgressVerdict CheckProgress(const GuestView& guest, double now_s, const ProgressParams& params,
                              ProgressMemory* memory) {
  ProgressVerdict verdict;
  const double actual = static_cast<double>(guest.actual_bytes);
  const double target = static_cast<double>(guest.target_bytes);
  const double tolerance = ProgressTolerance(target, params);
  verdict.tolerance_bytes = tolerance;
  const std::optional<double> previous_actual = memory->actual;
  const std::optional<double> previous_target = memory->target;
  memory->actual = actual;
  memory->target = target;
  NoteBalloonSize(actual, target, memory);
  const int direction = actual > target + tolerance ? -1 : actual < target - tolerance ? 1 : 0;

  // Counter deltas since the previous call (the agent's vmstat, pages).
  std::optional<double> inflated;
  std::optional<double> deflated;
  if (guest.balloon_inflate_pages.has_value() && guest.balloon_deflate_pages.has_value()) {
    const double inflate = static_cast<double>(*guest.balloon_inflate_pages);
    const double deflate = static_cast<double>(*guest.balloon_deflate_pages);
    if (memory->inflate_pages.has_value() && memory->deflate_pages.has_value() &&
        inflate >= *memory->inflate_pages && deflate >= *memory->deflate_pages) {
      inflated = (inflate - *memory->inflate_pages) * kGuestPageBytes;
      deflated = (deflate - *memory->deflate_pages) * kGuestPageBytes;
    }
    memory->inflate_pages = inflate;
    memory->deflate_pages = deflate;
  }

  if (!previous_actual.has_value() || !previous_target.has_value()) {
    OpenWindow(memory, direction, now_s, actual);
    return verdict;
  }
  if (target > *previous_target + tolerance) memory->raise_s = now_s;

  // Self-deflation: above both the old and the new target, and risen from the least it was
  // seen at since the previous call or the target was set. Once: the new size is where the next
  // rise is measured from.
  const double highest_target = std::max(target, *previous_target);
  const double rose_from = std::min(*previous_actual, *memory->lowest_actual);
  if (actual > highest_target + tolerance && actual > rose_from + tolerance) {
    verdict.event = ProgressEvent::kSelfDeflated;
    verdict.detail =
        absl::StrCat("actual=", FormatMib(actual), " rose_from=", FormatMib(rose_from),
                     " above_target=", FormatMib(highest_target));
    memory->lowest_actual = actual;
    OpenWindow(memory, direction, now_s, actual);
    return verdict;
  }

  // Churn: while we were inflating, the guest deflated much of what it inflated.
  const bool was_inflating =
      *previous_actual > *previous_target + ProgressTolerance(*previous_target, params);
  // A raise of the target between the two calls shows as deflation in the counters: a lab
  // guest backed off by 100 MiB was marked churning with 0 MiB inflated and 117 MiB deflated.
  if (was_inflating && inflated.has_value() && deflated.has_value() &&
      now_s - memory->raise_s >= params.churn_after_raise_seconds &&
      *inflated >= params.churn_min_bytes && *deflated >= params.churn_min_bytes &&
      *deflated >= params.churn_ratio * *inflated) {
    verdict.event = ProgressEvent::kChurning;
    verdict.detail = absl::StrCat("balloon_inflated=", FormatMib(*inflated),
                                  " balloon_deflated=", FormatMib(*deflated),
                                  " net=", FormatMib(*previous_actual - actual));
    OpenWindow(memory, direction, now_s, actual);
    return verdict;
  }

  if (direction == 0) {
    verdict.arrived = memory->window_direction != 0;
    OpenWindow(memory, 0, now_s, actual);
    return verdict;
  }
  if (direction != memory->window_direction) {
    OpenWindow(memory, direction, now_s, actual);
    return verdict;
  }
  const double elapsed = now_s - memory->window_start_s;
  if (elapsed < params.window_seconds) return verdict;
  const double moved = direction * (actual - memory->window_start_actual);
  // Arriving within the window would have been judged above, so the rate alone decides.
  const double needed = params.min_rate_bytes_per_second * elapsed;
  if (moved < needed) {
    verdict.event = ProgressEvent::kStuck;
    verdict.detail = absl::StrCat("moved=", FormatMib(moved), " in=", FormatFixed(elapsed, 1),
                                  "s need=", FormatMib(needed),
                                  " distance=", FormatMib(std::fabs(actual - target)));
  }
  OpenWindow(memory, direction, now_s, actual);
  return verdict;
}

}  // namespace plimsoll::policy
