#include "policy/guest_safety.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {

std::optional<std::string> UnsafeToActReason(const GuestView& guest) {
  if (!guest.has_stats) return std::string("has_stats=false");
  if (!guest.stats_fresh) {
    return absl::StrFormat("stats_fresh=false stats_age_s=%.1f", guest.stats_age_seconds);
  }
  if (!guest.unused_bytes.has_value()) return std::string("unused=missing");
  if (guest.actual_bytes <= 0) return absl::StrCat("actual_bytes=", guest.actual_bytes);
  if (guest.max_bytes <= 0) return absl::StrCat("max_bytes=", guest.max_bytes);
  return std::nullopt;
}

bool StatsFresh(double age_seconds, double stale_after_seconds) { return age_seconds <= stale_after_seconds; }

bool MayShrink(const GuestView& guest) { return guest.has_stats && guest.stats_fresh; }

int64_t FloorBytes(const GuestView& guest) {
  int64_t floor = std::max<int64_t>(guest.min_bytes, 0);
  if (guest.max_bytes > 0) floor = std::min(floor, guest.max_bytes);
  return floor;
}

int64_t ClampTarget(const GuestView& guest, double proposed_bytes) {
  const int64_t floor = FloorBytes(guest);
  const int64_t ceiling = std::max(guest.max_bytes, floor);
  if (!(proposed_bytes > static_cast<double>(floor))) return floor;  // also NaN
  if (proposed_bytes >= static_cast<double>(ceiling)) return ceiling;
  // Strictly between two int64_t values, so llround cannot overflow.
  const int64_t rounded = std::llround(proposed_bytes);
  return std::clamp(rounded, floor, ceiling);
}

double HeadroomBytes(const GuestView& guest, double min_bytes, double fraction) {
  return std::max(min_bytes, fraction * static_cast<double>(guest.max_bytes));
}

std::optional<int64_t> SeenFloorBytes(const GuestView& guest) {
  if (!guest.usable_bytes.has_value() || guest.actual_bytes <= 0) return std::nullopt;
  const int64_t hard = std::max<int64_t>(0, guest.actual_bytes - *guest.usable_bytes);
  int64_t floor = hard + static_cast<int64_t>(HeadroomBytes(guest));
  if (guest.max_bytes > 0) floor = std::min(floor, guest.max_bytes);
  return floor;
}

GuestDecision HoldDecision(const GuestView& guest, absl::string_view reason) {
  GuestDecision decision;
  decision.uuid = guest.uuid;
  const int64_t floor = FloorBytes(guest);
  decision.reason = absl::StrCat(reason, " target=", FormatMib(guest.target_bytes));
  if (guest.target_bytes < floor) {
    decision.target_bytes = floor;
    absl::StrAppend(&decision.reason, " raised_to_min=", FormatMib(floor));
  } else {
    decision.target_bytes = guest.target_bytes;
  }
  return decision;
}

}  // namespace plimsoll::policy
