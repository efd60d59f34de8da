// oVirt MoM's default auto-balloon rules (doc/balloon.rules in oVirt/mom), reproduced as the
// baseline plimsoll has to beat, with one substitution: MoM measures free memory against the
// whole host, plimsoll against the guest budget.
//
//   host_free     = min(guest_budget_bytes - sum of every guest's actual_bytes,
//                       host mem_available_bytes - host_reserve_bytes)
//   host_free_pct = host_free / guest_budget_bytes
//
// If host_free_pct < pressure_threshold (0.20) every guest is shrunk, else every guest grows.
// Per guest, with cur = actual_bytes and used = cur - unused (libvirt "unused" is MemFree, so
// guest page cache counts as used, as in MoM):
//   shrink: guest_free_pct = host_free_pct                     if host_free_pct > 0.05
//                          = host_free_pct - 0.05              otherwise (critical: go below
//                                                              used, forcing the guest to swap)
//           target = max(cur * 0.95, used + guest_free_pct * cur, floor), and only if
//           target <= cur (MoM never grows a guest under pressure: otherwise hold);
//   grow:   only if cur < max_bytes (otherwise hold);
//           target = min(max(cur * 1.05, used + 0.20 * cur, floor), max_bytes).
// floor is the guest's min_bytes (guest_safety.h), which is where MoM puts its guaranteed
// memory. A change of at most 0.25% of cur is not worth a balloon operation: hold. Guests that
// guest_safety.h finds unsafe to act on (no stats, stale stats, no "unused") are held before any
// of this. Hold means target = the guest's current target_bytes (raised to the floor if under).
//
// Differences from MoM, on purpose: MoM averages each stat over its recent samples (StatAvg);
// this policy is stateless and uses the snapshot's values as they are. MoM's guest minimum
// (guaranteed memory) is our min_bytes. used is never negative (unused > cur counts as 0).
#ifndef PLIMSOLL_POLICY_MOM_POLICY_H_
#define PLIMSOLL_POLICY_MOM_POLICY_H_

#include "absl/strings/string_view.h"
#include "policy/policy.h"

namespace plimsoll::policy {

// MoM's constants, named as in balloon.rules. The defaults are MoM's.
struct MomParams {
  // Host free fraction under which guests are shrunk.
  double pressure_threshold = 0.20;
  // Host free fraction at or under which guests are squeezed below their used memory.
  double pressure_critical = 0.05;
  // Free fraction of its size that an unconstrained guest keeps.
  double min_guest_free_percent = 0.20;
  // Largest change per decision, as a fraction of the guest's current size.
  double max_balloon_change_percent = 0.05;
  // Changes of at most this fraction of the current size are skipped.
  double min_balloon_change_percent = 0.0025;
};

// Stateless and immutable after construction: thread-safe. Uses no PolicyState keys
// (next_state is empty).
class MomPolicy : public Policy {
 public:
  explicit MomPolicy(MomParams params = MomParams()) : params_(params) {}

  // "mom".
  absl::string_view name() const override;

  // One decision per guest in snapshot order; the reason carries the numbers, e.g.
  // "mom: host_free_pct=12.3 mode=shrink cur=1024MiB used=800MiB guest_free_pct=0.12 -> 972.8MiB".
  // A snapshot with guest_budget_bytes <= 0 cannot be judged: every guest is held.
  Decisions Decide(const Snapshot& snapshot, PolicyState state) const override;

  const MomParams& params() const { return params_; }

 private:
  const MomParams params_;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_MOM_POLICY_H_
