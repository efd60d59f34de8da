// The oracle: the limit a balloon policy is measured against. For the simulator
// only: plimsolld cannot have it (policy::MakePolicy does not know it; sim/runner.cc builds it
// by name, "oracle").
//
// It knows what the model knows: before each decision the simulator tells it every guest's
// true working set (GuestModel::NeedAhead: its hard part, kernel + unreclaimable + anon, and its
// cache part, the hot part of the page cache; each with the lead a deflating balloon needs to
// reach a later working set in time), whether its balloon moves at all, and the host's
// memory outside the guests. It sets every guest to exactly working set + headroom, clamped to
// [min, max], within the budget; a balloon that does not move (stuck, trickling) is held
// where it is (or asked for what it needs) and counted there. A churning balloon is inflated
// like any other: it keeps 3% of each inflation, so it gets there, slowly and at a cost in
// traffic (holding it, as pagecache does, would leave budgets unmet that other policies meet).
// That is the most memory a policy can take without making any guest stall, give or take the
// headroom: a policy that runs guests with less than a headroom free, or lets them stall, can
// reclaim more (its oracle_share is then above 1). Stall the workload causes at any size (a
// hot set larger than the guest, a loop over a file that does not fit) the oracle has too.
//
// Headroom: the pagecache policy's h (policy/pagecache_law.h, LawParams defaults):
// max(headroom_min_bytes, headroom_fraction * max), 128 MiB or 5% of the guest's max.
//
// The budget: min(the snapshot's guest budget, host total - outside memory - reserve), so that
// outside pressure is met too. When the targets do not fit it, the shortfall is taken from
// what costs least first, each step from every guest by the same factor: the headroom; then
// the cache part of the working set (the guests refault); then the hard part above min (the
// guests' allocations fail: OOM kills). If even the mins do not fit, every guest is at its min.
//
// Decide is a pure function of the snapshot and the truth the source returns; the source is
// the simulator's (sim/runner.cc). Thread-compatible.
//
// The limit (`limit`, LimitPolicy below) is the same oracle with no headroom and no chasing:
// every guest at exactly its working set (hard + cache, known ahead as above), and a balloon
// that did not move towards its last target is not asked to go lower (its target stays where it
// was, raised only if the fit would give it more, and the budget counts it where it is). It is what the
// corpus's safe_reclaim_share is measured against (sim/corpus.h): the most memory a policy can
// take without taking any of a working set.
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
inline constexpr char kLimitPolicyName[] = "limit";

// One guest's truth at the moment of a decision.
struct OracleGuestTruth {
  // Bytes, GuestModel::NeedAhead: the working set's hard part (kernel, unreclaimable, anon, min
  // free) and its cache part (the hot page cache). Their sum may exceed max.
  double hard = 0;
  double cache = 0;
  bool moves = true;  // false: the balloon does not move now (stuck, trickling)
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
// is held). Reasons: "oracle: hard=.. cache=.. headroom=.. target=..[ balloon=held]", the summary
// names the step the budget reached ("mode=fit", "headroom_cut", "cache_cut", "shortfall").
policy::Decisions OracleDecide(const policy::Snapshot& snapshot, const OracleTruth& truth);

// What the limit remembers of a guest between decisions: its last target, and the size and time
// it was at then.
struct LimitMemory {
  double target = 0;  // bytes
  double actual = 0;  // bytes, at the decision
  double at_s = 0;    // the decision's time, seconds since the epoch
};

// A balloon follows when, since the last decision, it reached its target (within 1 MiB) or moved
// towards it at this rate at least (balloon_progress.h's "stuck" rate).
inline constexpr double kLimitFollowRate = 1024.0 * 1024.0;  // bytes/s

// The limit's decision: working set (hard + cache) with no headroom, within [min, max] and the
// budget. A guest whose balloon did not follow its last target (as above), or that the truth
// says does not move, keeps that target and is counted where it stands, unless the fit without
// the hold would give it more (then it gets that: giving is never held back).
// Reasons: "limit: hard=.. cache=.. target=..[ balloon=held]"; next_state holds a LimitMemory
// per guest.
policy::Decisions LimitDecide(const policy::Snapshot& snapshot, const OracleTruth& truth,
                              const policy::PolicyState& state);

class LimitPolicy : public policy::Policy {
 public:
  explicit LimitPolicy(OracleTruthSource truth) : truth_(std::move(truth)) {}
  absl::string_view name() const override { return kLimitPolicyName; }
  // LimitDecide(snapshot, truth(), state).
  policy::Decisions Decide(const policy::Snapshot& snapshot,
                           policy::PolicyState state) const override;

 private:
  OracleTruthSource truth_;
};

class OraclePolicy : public policy::Policy {
 public:
  explicit OraclePolicy(OracleTruthSource truth) : truth_(std::move(truth)) {}
  absl::string_view name() const override { return kOraclePolicyName; }
  // OracleDecide(snapshot, truth()); keeps no state.
  policy::Decisions Decide(const policy::Snapshot& snapshot,
                           policy::PolicyState state) const override;

 private:
  OracleTruthSource truth_;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_ORACLE_POLICY_H_
