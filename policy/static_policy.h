// The "do nothing" baseline: every guest keeps the target it has. Useful to run the daemon for
// observation only, and as the control arm when measuring another policy.
#ifndef PLIMSOLL_POLICY_STATIC_POLICY_H_
#define PLIMSOLL_POLICY_STATIC_POLICY_H_

#include "absl/strings/string_view.h"
#include "policy/policy.h"

namespace plimsoll::policy {

// Stateless and immutable: thread-safe. Uses no PolicyState keys (next_state is empty).
class StaticPolicy : public Policy {
 public:
  // "static".
  absl::string_view name() const override;

  // One hold per guest, in snapshot order, reason "static policy holds target=..MiB". The one
  // exception is the safety floor every policy honours: a target below the guest's floor
  // (guest_safety.h) is raised to it and the reason says "raised_to_min=..".
  Decisions Decide(const Snapshot& snapshot, PolicyState state) const override;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_STATIC_POLICY_H_
