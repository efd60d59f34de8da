// The envelope: what the operator's controls and the safety net make of a policy's decision for
// one guest, as a pure function. Constrain() runs an ordered list of named rules; each rule that
// changes the target (or ends a Reclaim hold) appends its reason with the numbers that decided it
// and names itself in Move::fired. The control loop then only submits the move, records it,
// counts the fired rules (plimsoll_envelope_rules_total) and logs. Nothing here reads the clock,
// libvirt or the loop's state.
//
// The rules, in order (the reasons in docs/api.md and control_loop.h's header):
//   pin, pin_floor, pin_step       an override's pin, never below the envelope floor nor faster
//                                  than OverrideStepBytes(<memory>) per tick without `force`;
//   hold_released, hold            a Reclaim hold caps the target; a guest in distress (the
//                                  policy's word, a self-deflation, or hard demand above the
//                                  hold once the balloon landed) ends it at once;
//   clamp                          [override or configured floor, override or <memory> ceiling];
//   lowered_min_floor/_step        under the configured floor only through a lowered min, and
//                                  then as for a pin;
//   exclude                        an excluded guest is never moved;
//   no_stats, stale_stats,         the safety net: no shrink without fresh guest and host data,
//   host_stale, inflation_stopped  and a balloon inflating on such data stops where it is;
//   absent                         a guest missing from the last listing is not moved;
//   reassert                       after overlapping calls an unchanged target is set again.
#ifndef PLIMSOLL_SERVER_LOOP_ENVELOPE_H_
#define PLIMSOLL_SERVER_LOOP_ENVELOPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plimsoll/v1/types.pb.h"
#include "policy/policy.h"
#include "server/metrics/envelope_rules.h"

namespace plimsoll::server {

// The operator's controls over one guest this tick: its overrides and the tightest active hold.
struct GuestControl {
  int64_t floor = 0;      // effective floor (override min_bytes or configured)
  int64_t ceiling = 0;    // effective ceiling (override max_bytes or <memory>)
  int64_t shares = 1000;  // in GuestView units
  std::optional<int64_t> pin;  // clamped to [64 MiB, <memory>]
  bool exclude = false;
  const plimsoll::v1::GuestOverride* override = nullptr;  // not owned
  std::optional<plimsoll::v1::ReclaimHold> hold;          // the tightest active hold
};

// What the envelope reads of one tracked guest.
struct EnvelopeGuest {
  int64_t target_bytes = 0;        // what the last successful call set: the move starts here
  int64_t actual_bytes = 0;
  int64_t max_bytes = 0;            // <memory>
  int64_t configured_floor_bytes = 0;
  bool has_stats = false;
  bool stats_fresh = false;
  bool stats_seen_changing = false;  // its stats' last_update has changed once at least
  double stats_age_seconds = 0;
  int missed_listings = 0;
  bool target_unsure = false;  // overlapping calls: either may have been last
};

// What the envelope reads of the host.
struct EnvelopeHost {
  bool stale = false;  // host memory not read this tick
  double data_age_seconds = 0;
};

// One guest's move, constrained.
struct Move {
  int64_t target_bytes = 0;
  plimsoll::v1::Direction direction = plimsoll::v1::DIRECTION_HOLD;
  std::string reason;  // the policy's, then every fired rule's, " | "-separated
  // The lowest an override takes the guest without force: max(policy or configured floor,
  // the floor libvirt shows), never above the ceiling (Guest.envelope_floor_bytes).
  int64_t envelope_floor_bytes = 0;
  int64_t seen_floor_bytes = 0;  // policy::SeenFloorBytes, 0 when the stats do not give it
  bool reassert = false;         // set the unchanged target again
  std::string hold_released;     // why the guest's hold ends this tick; empty: it does not
  std::vector<EnvelopeRule> fired;
};

// Pure. `view` is the guest's snapshot entry (nullptr: none, then no seen floor and no
// self-deflation from its history).
Move Constrain(const policy::GuestDecision& decision, const policy::GuestView* view, const EnvelopeGuest& guest,
               const GuestControl& control, const EnvelopeHost& host);
// The same, with the policy's reason (`decision.reason`, which is not read) moved in rather than
// copied: the control loop constrains every guest's decision every tick.
Move Constrain(const policy::GuestDecision& decision, std::string&& reason, const policy::GuestView* view,
               const EnvelopeGuest& guest, const GuestControl& control, const EnvelopeHost& host);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_ENVELOPE_H_
