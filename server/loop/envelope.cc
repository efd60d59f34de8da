#include "server/loop/envelope.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mib_format.h"
#include "policy/guest_safety.h"
#include "policy/history_deriver.h"
#include "server/api/control_validation.h"

namespace plimsoll::server {
namespace {

// What every rule reads, worked out once.
struct Facts {
  const policy::GuestDecision& d;
  const EnvelopeGuest& g;
  const GuestControl& c;
  const EnvelopeHost& host;
  bool force = false;
  std::string forced;      // " (forced by=...)" when force is set
  int64_t step = 0;        // the envelope's step per tick
  int64_t floor = 0;       // the envelope floor
  const char* floor_is = "";
  int64_t seen_floor = 0;
  const policy::GuestView* view = nullptr;  // the guest's snapshot entry, with its history
};

void Fire(Move& w, EnvelopeRule rule, absl::string_view why) {
  absl::StrAppend(&w.reason, why);
  w.fired.push_back(rule);
}

int64_t& Target(Move& w) { return w.target_bytes; }

void PinRules(const Facts& f, Move& w) {
  if (!f.c.pin.has_value()) return;
  Target(w) = *f.c.pin;
  w.reason = absl::StrCat("pinned at ", FormatMib(*f.c.pin), " by override", f.forced);
  w.fired.push_back(EnvelopeRule::kPin);
  if (!f.force && Target(w) < f.floor) {
    Target(w) = f.floor;
    Fire(w, EnvelopeRule::kPinFloor,
         absl::StrCat(" | raised to ", f.floor_is, " ", FormatMib(f.floor), ": the pin is below it (force goes lower)"));
  }
  if (!f.force && Target(w) < f.g.target_bytes - f.step) {
    Target(w) = f.g.target_bytes - f.step;
    Fire(w, EnvelopeRule::kPinStep,
         absl::StrCat(" | towards the pin at the envelope's step of ", FormatMib(f.step), " per tick"));
  }
}

// Within this of `target` the balloon has arrived: the policies' landing tolerance
// (policy/history_deriver.h), so the envelope and the history agree on where a balloon is.
int64_t LandingSlack(int64_t target) {
  return static_cast<int64_t>(policy::LandingToleranceBytes(static_cast<double>(target)));
}

// A guest in distress is not held: the policy's word (pressure, an OOM kill), a self-deflation
// seen whatever the policy, or hard demand + headroom above the hold once the balloon landed.
std::string HoldReleaseWhy(const Facts& f) {
  if (!f.d.distress.empty()) return f.d.distress;
  const int64_t held = f.c.hold->max_target_bytes();
  // The history saw the balloon rise above its target by itself (balloon_progress.h: from the
  // least it was seen at, balloon-change events included), to above the held target, although
  // its target was at or below it (a balloon still travelling down to the held target is above
  // it too, but falling): the guest deflated it on OOM.
  const int64_t slack = LandingSlack(held);
  if (f.view != nullptr && f.view->history.has_value() &&
      f.view->history->progress == policy::ProgressEvent::kSelfDeflated && f.g.target_bytes <= held &&
      f.g.actual_bytes > held + slack) {
    return absl::StrCat("self_deflated actual=", FormatMib(f.g.actual_bytes), " held=", FormatMib(held));
  }
  // Judged only once the balloon has landed at the hold: while it travels, actual and the stats'
  // MemAvailable are read at different moments, and their difference is not the guest's hard
  // demand. Without an agent and without autodeflate a guest shows no other sign before its
  // OOM kills. Landed means a report taken after the landing too (the history's word, where
  // there is one): libvirt's balloon size can lag an inflation that the guest's MemAvailable
  // already shows, and such a report reads the distance still to travel as hard demand.
  const bool measured_landed = f.g.actual_bytes <= held + slack &&
                               (f.view == nullptr || !f.view->history.has_value() ||
                                f.view->history->report_after_landing);
  if (const int64_t demand = std::max(f.d.floor_bytes, f.seen_floor);
      measured_landed && demand > held + slack) {
    return absl::StrCat("floor_above_hold floor=", FormatMib(demand), " held=", FormatMib(held), " (",
                        f.seen_floor > f.d.floor_bytes ? "actual - MemAvailable + headroom" : "the policy's floor", ")");
  }
  return "";
}

void HoldRules(const Facts& f, Move& w) {
  if (f.c.pin.has_value() || !f.c.hold.has_value()) return;
  if (std::string why = HoldReleaseWhy(f); !why.empty()) {
    Fire(w, EnvelopeRule::kHoldReleased, absl::StrCat(" | reclaim ", f.c.hold->reclaim_id(), " released: ", why));
    w.hold_released = std::move(why);
    return;
  }
  if (Target(w) > f.c.hold->max_target_bytes()) {
    Target(w) = f.c.hold->max_target_bytes();
    Fire(w, EnvelopeRule::kHold,
         absl::StrCat(" | reclaim ", f.c.hold->reclaim_id(), " holds it at <= ", FormatMib(Target(w))));
  }
}

void ClampRule(const Facts& f, Move& w) {
  if (f.c.pin.has_value()) return;
  const int64_t wanted = Target(w);
  Target(w) = std::clamp(Target(w), f.c.floor, f.c.ceiling);
  if (Target(w) == wanted) return;
  const bool by_override =
      f.c.override != nullptr && (f.c.override->has_min_bytes() || f.c.override->has_max_bytes());
  Fire(w, EnvelopeRule::kClamp,
       absl::StrCat(" | clamped to [", FormatMib(f.c.floor), ", ", FormatMib(f.c.ceiling), "]",
                    by_override ? " (override)" : ""));
}

// Below the configured floor only through an override's lowered min (not a lowered max: the
// ceiling wins): there the envelope holds the policy to its floor and a step per tick.
void LoweredMinRules(const Facts& f, Move& w) {
  if (f.c.pin.has_value()) return;
  const int64_t configured = f.g.configured_floor_bytes;
  const bool lowered_min = f.c.override != nullptr && f.c.override->has_min_bytes() && f.c.floor < configured &&
                           f.c.ceiling >= configured;
  if (!lowered_min || Target(w) >= configured) return;
  if (f.force) {
    absl::StrAppend(&w.reason, " | override min ", FormatMib(f.c.floor), f.forced);
    return;
  }
  if (Target(w) < f.floor) {
    Target(w) = f.floor;
    Fire(w, EnvelopeRule::kLoweredMinFloor,
         absl::StrCat(" | clamped to ", f.floor_is, " ", FormatMib(f.floor), ": the override's min ",
                      FormatMib(f.c.floor), " is below it (force goes lower)"));
  }
  if (const int64_t stepped = std::min(configured, f.g.target_bytes - f.step); Target(w) < stepped) {
    Target(w) = stepped;
    Fire(w, EnvelopeRule::kLoweredMinStep,
         absl::StrCat(" | under the configured floor at the envelope's step of ", FormatMib(f.step), " per tick"));
  }
}

void ExcludeRule(const Facts& f, Move& w) {
  if (!f.c.exclude) return;
  Target(w) = f.g.target_bytes;
  w.reason = "excluded by override: never moved";
  w.fired.push_back(EnvelopeRule::kExclude);
}

// The safety net under every policy: no stats or stale stats, no shrink. Growing never needs
// stats: giving a guest memory back cannot hurt it, and a guest whose stats stopped (a busy
// domain, a stalled driver) may be exactly the one that needs it.
void SafetyRules(const Facts& f, Move& w) {
  const int64_t previous = f.g.target_bytes;
  if (!f.g.has_stats && Target(w) < previous) {
    Target(w) = previous;
    Fire(w, EnvelopeRule::kNoStats, " | held: no balloon stats from guest, never shrink without them");
  } else if (!f.g.stats_fresh && Target(w) < previous) {
    Target(w) = previous;
    // Not yet seen to change (the first value proves nothing) is not old data: say which, as an
    // operator reading "age=1.0s" would not see why that is stale.
    Fire(w, EnvelopeRule::kStaleStats,
         f.g.stats_seen_changing
             ? absl::StrFormat(" | held: stale stats (age=%.1fs), never shrink on them", f.g.stats_age_seconds)
             : absl::StrFormat(" | held: stale stats (not seen to change in the %.1fs since first read: fresh once "
                               "they do), never shrink on them",
                               f.g.stats_age_seconds));
  }
  if (f.host.stale && Target(w) < previous) {
    Target(w) = previous;
    Fire(w, EnvelopeRule::kHostStale,
         absl::StrFormat(" | held: host memory not read this tick (data age=%.1fs), never shrink on it",
                         f.host.data_age_seconds));
  }
  // Holding the target is not enough while the balloon is still inflating towards it: it would
  // go on shrinking the guest on the data that went bad. Stop it where it is (never above the
  // guest's ceiling; a pin is the operator's and stays).
  const bool data_bad = !f.g.has_stats || !f.g.stats_fresh || f.host.stale;
  if (data_bad && !f.c.pin.has_value() && !f.c.exclude && f.g.actual_bytes > Target(w) + LandingSlack(Target(w))) {
    if (const int64_t stop = std::min(f.g.actual_bytes, f.c.ceiling); stop > Target(w)) {
      Fire(w, EnvelopeRule::kInflationStopped,
           absl::StrCat(" | inflation stopped at ", FormatMib(stop), " (was heading for ", FormatMib(Target(w)),
                        "): no shrinking on ",
                        !f.g.has_stats ? "missing stats" : !f.g.stats_fresh ? "stale stats" : "stale host data"));
      Target(w) = stop;
    }
  }
}

// Missing from the last listing(s) but not known to have stopped: kept, with what the policy
// knows, and not moved until it is listed again or forgotten.
void AbsentRule(const Facts& f, Move& w) {
  if (f.g.missed_listings == 0 || Target(w) == f.g.target_bytes) return;
  Target(w) = f.g.target_bytes;
  Fire(w, EnvelopeRule::kAbsent,
       absl::StrCat(" | held: absent from the last ", f.g.missed_listings, " listing(s) of running domains"));
}

// After two overlapping calls the domain's target is either one: set it again, alone.
void ReassertRule(const Facts& f, Move& w) {
  if (!f.g.target_unsure || Target(w) != f.g.target_bytes || f.c.exclude || f.g.missed_listings != 0) return;
  w.reassert = true;
  Fire(w, EnvelopeRule::kReassert,
       absl::StrCat(" | re-asserting target ", FormatMib(Target(w)), " after overlapping calls"));
}

using Rule = void (*)(const Facts&, Move&);
constexpr Rule kRules[] = {PinRules,    HoldRules,   ClampRule,  LoweredMinRules,
                           ExcludeRule, SafetyRules, AbsentRule, ReassertRule};

}  // namespace

Move Constrain(const policy::GuestDecision& decision, const policy::GuestView* view, const EnvelopeGuest& guest,
               const GuestControl& control, const EnvelopeHost& host) {
  return Constrain(decision, std::string(decision.reason), view, guest, control, host);
}

Move Constrain(const policy::GuestDecision& decision, std::string&& reason, const policy::GuestView* view,
               const EnvelopeGuest& guest, const GuestControl& control, const EnvelopeHost& host) {
  Move move;
  move.target_bytes = decision.target_bytes;
  move.reason = std::move(reason);
  Facts f{decision, guest, control, host, false, "", 0, 0, "", 0, view};
  f.force = control.override != nullptr && control.override->force();
  if (f.force) {
    f.forced = absl::StrCat(" (forced by=\"", control.override->updated_by(), "\": ", control.override->note(), ")");
  }
  f.step = OverrideStepBytes(guest.max_bytes);
  // The envelope floor: hard demand + headroom as the policy measures it (its decision's floor),
  // or the configured floor where it measures none, and never below what libvirt shows of it
  // (actual - MemAvailable + headroom, under every policy, with or without an agent).
  f.seen_floor = view != nullptr ? policy::SeenFloorBytes(*view).value_or(0) : 0;
  const int64_t measured = decision.floor_bytes > 0 ? decision.floor_bytes : guest.configured_floor_bytes;
  f.floor = std::min(std::max(measured, f.seen_floor), control.ceiling);
  f.floor_is = f.seen_floor > measured        ? "hard demand + headroom as libvirt shows it"
               : decision.floor_bytes > 0 ? "hard demand + headroom"
                                          : "the configured floor";
  move.envelope_floor_bytes = f.floor;
  move.seen_floor_bytes = f.seen_floor;
  for (Rule rule : kRules) rule(f, move);
  move.direction = move.target_bytes < guest.target_bytes   ? plimsoll::v1::DIRECTION_INFLATE
                   : move.target_bytes > guest.target_bytes ? plimsoll::v1::DIRECTION_DEFLATE
                                                            : plimsoll::v1::DIRECTION_HOLD;
  return move;
}

}  // namespace plimsoll::server
