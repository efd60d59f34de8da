// Safety rules every policy applies before and after its own arithmetic, kept in one place so
// no policy can forget one:
// - a guest whose stats cannot be trusted is held, never shrunk: no balloon stats, stale stats,
//   no "unused" (MemFree) figure, or nonsensical sizes (actual or max not positive);
// - no target goes under the guest's floor (min_bytes, capped at max_bytes) or over max_bytes.
// "Hold" means the decision's target equals the guest's current target_bytes; the only thing a
// hold may change is a target below the floor, which is raised to the floor.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_GUEST_SAFETY_H_
#define PLIMSOLL_POLICY_GUEST_SAFETY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "policy/policy.h"

namespace plimsoll::policy {

// Why `guest` must be held whatever a policy computes ("stats_fresh=false stats_age_s=42.0"),
// or nullopt when its data is good enough to act on. Checked in this order: has_stats,
// stats_fresh, unused_bytes present, actual_bytes > 0, max_bytes > 0.
std::optional<std::string> UnsafeToActReason(const GuestView& guest);

// Whether stats `age_seconds` old may steer a shrink: at most `stale_after_seconds`. The one
// freshness gate: plimsolld's tracker (GuestView::stats_fresh) and the simulator's reports judge
// by it.
bool StatsFresh(double age_seconds, double stale_after_seconds);

// Whether a guest may be shrunk on its stats: it has balloon stats and they are fresh. Growing
// never needs them. The envelope's no_stats and stale_stats rules say this with their reasons;
// the simulator applies it as is.
bool MayShrink(const GuestView& guest);

// The lowest target any policy may set for `guest`: min_bytes, but never below 0 and, when
// max_bytes is known (> 0), never above max_bytes (a balloon cannot be set above its ceiling,
// so a misconfigured min above max yields max).
int64_t FloorBytes(const GuestView& guest);

// `proposed_bytes` clamped to [FloorBytes(guest), max_bytes] and rounded to whole bytes. Safe
// for any double, including NaN (which yields the floor) and values beyond int64_t.
int64_t ClampTarget(const GuestView& guest, double proposed_bytes);

// The headroom a floor keeps over hard demand: max(min_bytes, fraction * max_bytes), what a
// guest needs to start a process or absorb a burst before its next report. The defaults are the
// law's (pagecache_law.h LawParams) and the seen floor's below.
inline constexpr double kHeadroomMinBytes = 128.0 * (1 << 20);
inline constexpr double kHeadroomFraction = 0.05;
double HeadroomBytes(const GuestView& guest, double min_bytes = kHeadroomMinBytes,
                     double fraction = kHeadroomFraction);

// The floor the host itself sees, whatever the policy: hard demand as libvirt shows it (actual -
// MemAvailable, never below 0) plus the default headroom (HeadroomBytes), capped at max_bytes
// when known. nullopt without MemAvailable
// or a positive actual. Stale stats are used on purpose: this floor only ever raises a target
// (ends a reclaim hold, stops a pin), and growing never needs fresh stats.
std::optional<int64_t> SeenFloorBytes(const GuestView& guest);

// A hold for `guest`: target_bytes unchanged, unless it is below the floor, in which case it is
// raised to the floor and the reason says so: "<reason> target=1024MiB", or
// "<reason> target=256MiB raised_to_min=512MiB".
GuestDecision HoldDecision(const GuestView& guest, absl::string_view reason);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_GUEST_SAFETY_H_
