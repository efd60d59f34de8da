#include "policy/mom_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "policy/guest_safety.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {
namespace {

enum class Mode { kShrink, kGrow };

// The host-level facts every guest's decision shares.
struct HostSituation {
  double budget_free = 0;  // guest budget minus the guests' actual sizes
  double host_limit = 0;   // host MemAvailable minus the reserve
  double host_free = 0;    // the smaller of the two
  double host_free_pct = 0;
  Mode mode = Mode::kGrow;
  // Used when shrinking: how much free memory guests may keep, as a fraction of their size.
  double guest_free_pct = 0;
};

HostSituation Assess(const Snapshot& snapshot, const MomParams& params) {
  HostSituation s;
  double sum_actual = 0;  // double: never overflows, exact below 2^53 bytes
  for (const GuestView& guest : snapshot.guests) sum_actual += static_cast<double>(guest.actual_bytes);
  const HostView& host = snapshot.host;
  s.budget_free = static_cast<double>(host.guest_budget_bytes) - sum_actual;
  s.host_limit = static_cast<double>(host.mem_available_bytes) -
                 static_cast<double>(host.host_reserve_bytes);
  s.host_free = std::min(s.budget_free, s.host_limit);
  s.host_free_pct = s.host_free / static_cast<double>(host.guest_budget_bytes);
  if (s.host_free_pct < params.pressure_threshold) {
    s.mode = Mode::kShrink;
    if (s.host_free_pct <= params.pressure_critical) {
      // MoM's literal: a negative free share makes the target fall below used memory.
      s.guest_free_pct = s.host_free_pct - 0.05;
    } else {
      s.guest_free_pct =
          params.min_guest_free_percent * (s.host_free_pct / params.pressure_threshold);
    }
  } else {
    s.mode = Mode::kGrow;
    s.guest_free_pct = params.min_guest_free_percent;
  }
  return s;
}

std::string Summary(const Snapshot& snapshot, const HostSituation& s) {
  return absl::StrCat(
      "mom: mode=", s.mode == Mode::kShrink ? "shrink" : "grow",
      " host_free_pct=", FormatFixed(100 * s.host_free_pct, 1),
      " host_free=", FormatMib(s.host_free), " budget=", FormatMib(snapshot.host.guest_budget_bytes),
      " budget_free=", FormatMib(s.budget_free), " host_available_free=", FormatMib(s.host_limit),
      " limited_by=", s.host_limit < s.budget_free ? "host" : "budget",
      " guests=", snapshot.guests.size());
}

GuestDecision DecideGuest(const GuestView& guest, const HostSituation& s,
                          const MomParams& params) {
  if (std::optional<std::string> why = UnsafeToActReason(guest); why.has_value()) {
    return HoldDecision(guest, absl::StrCat("mom: hold ", *why));
  }
  const double cur = static_cast<double>(guest.actual_bytes);
  const double used = std::max(0.0, cur - static_cast<double>(*guest.unused_bytes));
  const bool shrink = s.mode == Mode::kShrink;
  const std::string head = absl::StrCat(
      "mom: host_free_pct=", FormatFixed(100 * s.host_free_pct, 1),
      " mode=", shrink ? "shrink" : "grow", " cur=", FormatMib(guest.actual_bytes),
      " used=", FormatMib(used), " guest_free_pct=", FormatFixed(s.guest_free_pct, 2));

  // As in MoM, the target is the largest of the step, the wanted size and the guest's minimum
  // (then capped at max when growing).
  const double floor_bytes = static_cast<double>(FloorBytes(guest));
  const double wanted = used + s.guest_free_pct * cur;
  double proposed = 0;
  const char* set_by = "";
  if (shrink) {
    proposed = cur * (1 - params.max_balloon_change_percent);
    set_by = "step";
    if (wanted > proposed) {
      proposed = wanted;
      set_by = "wanted";
    }
    if (floor_bytes > proposed) {
      proposed = floor_bytes;
      set_by = "min";
    }
    if (proposed > cur) {
      return HoldDecision(guest, absl::StrCat(head, " -> ", FormatMib(proposed), " set_by=",
                                              set_by, " hold=never_grow_under_pressure"));
    }
  } else {
    if (guest.actual_bytes >= guest.max_bytes) {
      return HoldDecision(guest,
                          absl::StrCat(head, " max=", FormatMib(guest.max_bytes), " hold=at_max"));
    }
    proposed = cur * (1 + params.max_balloon_change_percent);
    set_by = "step";
    if (wanted > proposed) {
      proposed = wanted;
      set_by = "wanted";
    }
    if (floor_bytes > proposed) {
      proposed = floor_bytes;
      set_by = "min";
    }
    if (proposed > static_cast<double>(guest.max_bytes)) {
      proposed = static_cast<double>(guest.max_bytes);
      set_by = "max";
    }
  }

  const double change = std::fabs(proposed - cur);
  if (!(change > params.min_balloon_change_percent * cur)) {
    return HoldDecision(guest, absl::StrCat(head, " -> ", FormatMib(proposed), " set_by=", set_by,
                                            " change_pct=", FormatFixed(100 * change / cur, 2),
                                            " hold=change_too_small"));
  }

  GuestDecision decision;
  decision.uuid = guest.uuid;
  // Already within [floor, max] by construction; ClampTarget also rounds to whole bytes safely.
  decision.target_bytes = ClampTarget(guest, proposed);
  decision.reason =
      absl::StrCat(head, " -> ", FormatMib(decision.target_bytes), " set_by=", set_by);
  return decision;
}

}  // namespace

absl::string_view MomPolicy::name() const { return "mom"; }

Decisions MomPolicy::Decide(const Snapshot& snapshot, PolicyState /*state*/) const {
  Decisions decisions;
  decisions.guests.reserve(snapshot.guests.size());
  if (snapshot.host.guest_budget_bytes <= 0) {
    const std::string why =
        absl::StrCat("mom: hold guest_budget_bytes=", snapshot.host.guest_budget_bytes);
    for (const GuestView& guest : snapshot.guests) {
      decisions.guests.push_back(HoldDecision(guest, why));
    }
    decisions.summary = absl::StrCat(why, " guests=", snapshot.guests.size());
    return decisions;
  }
  const HostSituation situation = Assess(snapshot, params_);
  for (const GuestView& guest : snapshot.guests) {
    decisions.guests.push_back(DecideGuest(guest, situation, params_));
  }
  decisions.summary = Summary(snapshot, situation);
  return decisions;
}

}  // namespace plimsoll::policy
