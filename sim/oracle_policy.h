// The oracle: the limit a balloon policy is measured against (issue 13). For the simulator
// only: plimsolld cannot have it (policy::MakePolicy does not know it; sim/runner.cc builds it
// by name, "oracle").
//
// It knows what the model knows: before each decision the simulator tells it every guest's
// true need (GuestModel::NeedAhead: kernel, unreclaimable, anon and the hot part of the cache,
// with the lead a deflating balloon needs to reach a later working set in time), whether its
// balloon inflates at all, and the host's memory outside the guests. It sets every guest to
// need + headroom, clamped to [min, max], within the budget; a balloon that does not inflate
// (stuck, trickling, churning) is held where it is and counted there. That is the most memory
// a policy can take without making any guest stall. A policy can reclaim more than the oracle,
// by stalling guests: its oracle_share is then above 1.
//
// Headroom: the pagecache policy's (policy/pagecache_policy.h, PagecacheParams defaults):
// max(headroom_min_bytes, headroom_fraction * max), 128 MiB or 5% of the guest's max.
//
// The budget: min(the snapshot's guest budget, host total - outside memory - reserve), so that
// outside pressure is met too. When the targets do not fit it, the shortfall is shared in two
// steps, each proportionally: first every guest's headroom by the same factor; if the bare
// needs do not fit either, every guest's need above its min by the same factor (never under
// min: if even the mins do not fit, every guest is at its min).
//
// Decide is a pure function of the snapshot and the truth the source returns; the source is
// the simulator's (sim/runner.cc). Thread-compatible.
#ifndef PLIMSOLL_SIM_ORACLE_POLICY_H_
#define PLIMSOLL_SIM_ORACLE_POLICY_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "policy/policy.h"

namespace plimsoll::sim {

inline constexpr char kOraclePolicyName[] = "oracle";

// One guest's truth at the moment of a decision.
struct OracleGuestTruth {
  double need = 0;       // bytes: GuestModel::NeedAhead (may exceed max)
  bool inflates = true;  // false: the balloon cannot be inflated to any effect now
};

// Everything the oracle is told, guests in snapshot order.
struct OracleTruth {
  std::vector<OracleGuestTruth> guests;
  double host_other = 0;  // host memory that is not the guests' (bytes)
};

using OracleTruthSource = std::function<OracleTruth()>;

// The headroom the oracle adds to a guest's need: the pagecache policy's default.
double OracleHeadroom(int64_t max_bytes);

// The oracle's decision for `snapshot` given `truth` (one entry per guest; a guest without one
// is held). Reasons: "oracle: need=.. headroom=.. mode=..".
policy::Decisions OracleDecide(const policy::Snapshot& snapshot, const OracleTruth& truth);

class OraclePolicy : public policy::Policy {
 public:
  explicit OraclePolicy(OracleTruthSource truth) : truth_(std::move(truth)) {}
  absl::string_view name() const override { return kOraclePolicyName; }
  // OracleDecide(snapshot, truth()); keeps no state.
  policy::Decisions Decide(const policy::Snapshot& snapshot,
                           const policy::PolicyState& state) const override;

 private:
  OracleTruthSource truth_;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_ORACLE_POLICY_H_
