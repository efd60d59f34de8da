// The envelope's rules (server/loop/envelope.h), the `rule` label of plimsoll_envelope_rules_total.
// A closed set, so that every rule's series exists at 0 from the start (Prometheus' increase()
// cannot see a counter's first increment when the series is born with it).
#ifndef PLIMSOLL_SERVER_METRICS_ENVELOPE_RULES_H_
#define PLIMSOLL_SERVER_METRICS_ENVELOPE_RULES_H_

namespace plimsoll::server {

// In the order the envelope applies them. Each is counted when it changes a decision.
enum class EnvelopeRule {
  kPin,               // "pin": an override's pin replaced the policy's target
  kPinFloor,          // "pin_floor": a pin below the envelope floor raised to it
  kPinStep,           // "pin_step": a pin approached at the envelope's step per tick
  kHoldReleased,      // "hold_released": a Reclaim hold ended on a guest in distress
  kHold,              // "hold": a Reclaim hold capped the target
  kClamp,             // "clamp": the target clamped to [floor, ceiling]
  kLoweredMinFloor,   // "lowered_min_floor": under a lowered min, raised to the envelope floor
  kLoweredMinStep,    // "lowered_min_step": under a lowered min, at the envelope's step per tick
  kExclude,           // "exclude": an excluded guest kept where it is
  kNoStats,           // "no_stats": a shrink held, the guest has no balloon stats
  kStaleStats,        // "stale_stats": a shrink held, its stats are stale
  kHostStale,         // "host_stale": a shrink held, the host read failed this tick
  kInflationStopped,  // "inflation_stopped": a balloon inflating on such data stopped where it is
  kAbsent,            // "absent": a guest missing from the last listing kept where it is
  kReassert,          // "reassert": an unsure target set again, alone
};
inline constexpr EnvelopeRule kAllEnvelopeRules[] = {
    EnvelopeRule::kPin,        EnvelopeRule::kPinFloor,        EnvelopeRule::kPinStep,
    EnvelopeRule::kHoldReleased, EnvelopeRule::kHold,          EnvelopeRule::kClamp,
    EnvelopeRule::kLoweredMinFloor, EnvelopeRule::kLoweredMinStep, EnvelopeRule::kExclude,
    EnvelopeRule::kNoStats,    EnvelopeRule::kStaleStats,      EnvelopeRule::kHostStale,
    EnvelopeRule::kInflationStopped, EnvelopeRule::kAbsent,    EnvelopeRule::kReassert};

inline const char* EnvelopeRuleName(EnvelopeRule rule) {
  switch (rule) {
    case EnvelopeRule::kPin: return "pin";
    case EnvelopeRule::kPinFloor: return "pin_floor";
    case EnvelopeRule::kPinStep: return "pin_step";
    case EnvelopeRule::kHoldReleased: return "hold_released";
    case EnvelopeRule::kHold: return "hold";
    case EnvelopeRule::kClamp: return "clamp";
    case EnvelopeRule::kLoweredMinFloor: return "lowered_min_floor";
    case EnvelopeRule::kLoweredMinStep: return "lowered_min_step";
    case EnvelopeRule::kExclude: return "exclude";
    case EnvelopeRule::kNoStats: return "no_stats";
    case EnvelopeRule::kStaleStats: return "stale_stats";
    case EnvelopeRule::kHostStale: return "host_stale";
    case EnvelopeRule::kInflationStopped: return "inflation_stopped";
    case EnvelopeRule::kAbsent: return "absent";
    case EnvelopeRule::kReassert: return "reassert";
  }
  return "unknown";
}

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_METRICS_ENVELOPE_RULES_H_
