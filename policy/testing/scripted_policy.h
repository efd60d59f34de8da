// A policy whose targets a test sets by hand (every other guest holds), so that the daemon's own
// rules (clamping, the stale-stats gate, overrides, holds, the API's effects) can be tested apart
// from any real policy. Test only.
#ifndef PLIMSOLL_POLICY_TESTING_SCRIPTED_POLICY_H_
#define PLIMSOLL_POLICY_TESTING_SCRIPTED_POLICY_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "policy/policy.h"

namespace plimsoll::policy::testing {

class ScriptedPolicy : public Policy {
 public:
  absl::string_view name() const override { return "scripted"; }
  Decisions Decide(const Snapshot& s, PolicyState state) const override {
    Decisions d;
    for (const auto& g : s.guests) {
      auto it = targets.find(g.uuid);
      GuestDecision decision;
      decision.uuid = g.uuid;
      decision.target_bytes = it == targets.end() ? g.target_bytes : it->second;
      decision.reason = "scripted";
      if (auto d = distress.find(g.uuid); d != distress.end()) decision.distress = d->second;
      d.guests.push_back(decision);
    }
    d.next_state = state;
    d.summary = summary;
    d.pool_members = pool_members;
    d.pool_lent_bytes = pool_lent_bytes;
    d.pool_reserve_bytes = pool_reserve_bytes;
    d.pool_covers = pool_covers;
    last_snapshot = s;
    return d;
  }

  // Targets by uuid; a guest not named here holds at its target.
  absl::flat_hash_map<std::string, int64_t> targets;
  // GuestDecision::distress by uuid.
  absl::flat_hash_map<std::string, std::string> distress;
  // The host line and pool every Decide returns.
  std::string summary;
  int pool_members = 0;
  int64_t pool_lent_bytes = 0;
  int64_t pool_reserve_bytes = 0;
  bool pool_covers = false;
  // What the last Decide saw (tests read it from the thread that ticks).
  mutable Snapshot last_snapshot;
};

}  // namespace plimsoll::policy::testing

#endif  // PLIMSOLL_POLICY_TESTING_SCRIPTED_POLICY_H_
