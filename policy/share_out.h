// The host's say over what guests propose: the one share-out.
//
// With L = min(guest budget, host MemAvailable - reserve + sum of actual) the memory all guests
// may hold together, and each guest's commitment max(actual, target) (a balloon deflating towards
// a raised target already has that memory promised):
// - Shrinking proposals (below the commitment) are taken as proposed.
// - Free before grow (squeezed): growth for pressure and the rest is granted only out of L minus
//   the commitments, pressure first; within a class the guest paying the most shares per page
//   (ESX's rho) first. Hard demand (the floor over the guest's size: an allocation, an OOM kill)
//   is granted up to the floor, and what free memory does not cover is taken from the others in
//   the budget round below; only what they cannot give (floors, steps) is cut from it. The rest
//   of that guest's proposal, above its floor, waits for free memory like anyone's.
// - The budget is a hard limit: when the targets together exceed L, the excess is taken from
//   the guests that may shrink by shares with the idle-memory tax (idle_tax.h), never below a
//   guest's floor and at most step_fraction of its ceiling per decision (a balloon's speed).
// - What a guest costs: its size, except for a guest with a cost cap (its RSS, where its agent
//   gives its cold cache back in the guest: reclaim_pool.h): at a size T it costs
//   T - lent(T), lent(T) = max(0, min(T, commitment) - cap): growth over the commitment costs in
//   full, and a take above the cap relieves nothing. L is then min(budget, MemAvailable -
//   reserve + the guests' cost at their actual sizes) less the pool's reserve, and a take from a
//   capped guest is made in cost, the step too: its balloon may move by its lent memory plus a
//   step in one decision (inflating first over the pages it already gave back, which are free).
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_SHARE_OUT_H_
#define PLIMSOLL_POLICY_SHARE_OUT_H_

#include <limits>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace plimsoll::policy {

struct ShareOutParams {
  double idle_tax = 0.75;       // tau in idle_tax.h: idle pages cost 4x
  double step_fraction = 0.25;  // of a guest's ceiling, per decision, in an overcommit
};

enum class GrowClass { kNone = 0, kPressure = 1, kHardDemand = 2 };

struct ShareOutGuest {
  double actual = 0;
  double target = 0;    // the target now (before this decision)
  double proposal = 0;  // what the guest's policy asks for
  double floor = 0;     // never below this
  double ceiling = 0;
  double active = 0;    // the part of the guest's memory in use (the idle tax spares it)
  double shares = 1000;
  GrowClass grow = GrowClass::kNone;
  // Hard demand is paid for by the others only up to this size: what the host itself sees of
  // the guest's hard demand when its floor rests on the agent's word. Above
  // it, the growth waits for free memory like pressure's.
  double hard_cap = std::numeric_limits<double>::infinity();
  bool may_shrink = true;  // false: held (never shrunk below its commitment by the host)
  // What the guest costs the host at most below its commitment (its RSS); infinity: its size.
  double cost_cap = std::numeric_limits<double>::infinity();
};

struct ShareOutResult {
  std::vector<double> targets;  // same order as the guests
  std::vector<double> granted;  // growth granted (bytes)
  std::vector<double> taken;    // taken for the budget (bytes)
  double limit = 0;             // L
  double free = 0;              // L minus the commitments, before growth
  double overcommit = 0;        // targets over L before the budget round
  double unmet = 0;             // overcommit that floors and steps left in place
};

// What guest `g` costs the host at size `size` (above: its size, without a cost cap).
double ShareOutCost(const ShareOutGuest& g, double size);

// pool_reserve_bytes: the reserve kept for the capped guests' bursts (reclaim_pool.h).
ShareOutResult ShareOut(const std::vector<ShareOutGuest>& guests, const HostView& host,
                        const ShareOutParams& params, double pool_reserve_bytes = 0);

// "limit=.. free=.. granted=.. overcommit=.. taken=.. unmet=..": the host line of a decision.
std::string ShareOutSummary(const ShareOutResult& result);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_SHARE_OUT_H_
