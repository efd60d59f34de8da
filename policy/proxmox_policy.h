// Proxmox VE's auto-ballooning (pvestatd, every 10 s), reproduced as a baseline from the
// description in domain.md section 5, with the guest budget in the role of "80% of host memory":
//
//   goal = min(guest_budget_bytes - sum of every guest's actual_bytes,
//              host mem_available_bytes - host_reserve_bytes)        (as for MomPolicy)
//
// |goal| <= deadband (10 MiB): every guest holds. Otherwise goal is shared out over a set of
// guests by shares, water-filling:  desired = min + (sum over the set of (cur - min) + goal) *
// shares / sum of shares, clamped to [min, max]; each guest moves from cur towards desired by at
// most max_change (100 MiB) per decision, and what the caps leave over is shared again among
// the guests that can still move (a few rounds). When growing (goal > 0), the "needy" guests
// (MemFree <= 25% of max) share first, and all guests only if the needy ones could take
// nothing. When shrinking, all guests share. cur is actual_bytes, min the guest's floor
// (min_bytes). Proxmox reads the guest's MemFree, so page cache counts as used, and it never
// looks at a guest's pressure: the known flaw is that a guest at its minimum thrashes for as long
// as the host stays over its goal.
//
// Guests guest_safety.h finds unsafe to act on are held and take no part in the sharing; their
// actual size still counts in the goal.
#ifndef PLIMSOLL_POLICY_PROXMOX_POLICY_H_
#define PLIMSOLL_POLICY_PROXMOX_POLICY_H_

#include "absl/strings/string_view.h"
#include "policy/policy.h"

namespace plimsoll::policy {

// Proxmox's constants; the defaults are Proxmox's.
struct ProxmoxParams {
  double max_change_bytes = 100.0 * (1 << 20);
  double deadband_bytes = 10.0 * (1 << 20);
  // A guest whose MemFree is at most this share of its max is "needy" and grows first.
  double needy_free_fraction = 0.25;
  int max_rounds = 8;
};

// Stateless and immutable after construction: thread-safe. Uses no PolicyState keys.
class ProxmoxPolicy : public Policy {
 public:
  explicit ProxmoxPolicy(ProxmoxParams params = ProxmoxParams()) : params_(params) {}

  // "proxmox".
  absl::string_view name() const override;

  // One decision per guest in snapshot order; reasons carry goal, set, cur, desired and step.
  // A snapshot with guest_budget_bytes <= 0 holds every guest.
  Decisions Decide(const Snapshot& snapshot, PolicyState state) const override;

  const ProxmoxParams& params() const { return params_; }

 private:
  const ProxmoxParams params_;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PROXMOX_POLICY_H_
