#include "policy/share_out.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policy/idle_tax.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {

double ShareOutCost(const ShareOutGuest& g, double size) {
  if (!std::isfinite(g.cost_cap)) return size;
  const double lent = std::max(0.0, std::min(size, std::max(g.actual, g.target)) - g.cost_cap);
  return size - lent;
}

namespace {

double Cost(const ShareOutGuest& g, double size) { return ShareOutCost(g, size); }

// The size at which `g` costs `cost`, for a cost reached by a take: above the cap the size keeps
// the lent memory (the cost rises with the size there), below it the size is the cost.
double SizeAtCost(const ShareOutGuest& g, double cost) {
  if (!std::isfinite(g.cost_cap) || cost < g.cost_cap) return cost;
  return cost + std::max(0.0, std::max(g.actual, g.target) - g.cost_cap);
}

}  // namespace

ShareOutResult ShareOut(const std::vector<ShareOutGuest>& guests, const HostView& host,
                        const ShareOutParams& params, double pool_reserve_bytes) {
  const size_t n = guests.size();
  ShareOutResult r;
  r.targets.assign(n, 0);
  r.granted.assign(n, 0);
  r.taken.assign(n, 0);
  double sum_actual = 0;
  double committed = 0;
  for (const ShareOutGuest& g : guests) {
    sum_actual += Cost(g, g.actual);
    committed += Cost(g, std::max(g.actual, g.target));
  }
  const double host_room = static_cast<double>(host.mem_available_bytes) -
                           static_cast<double>(host.host_reserve_bytes) + sum_actual;
  r.limit = std::min(static_cast<double>(host.guest_budget_bytes), host_room) - pool_reserve_bytes;
  r.free = r.limit - committed;

  // Shrinks as proposed; growth waits for its grant.
  std::vector<size_t> growers;
  for (size_t i = 0; i < n; ++i) {
    const ShareOutGuest& g = guests[i];
    const double commitment = std::max(g.actual, g.target);
    if (g.proposal > commitment) {
      r.targets[i] = commitment;
      growers.push_back(i);
    } else {
      r.targets[i] = g.may_shrink ? g.proposal : std::max(g.proposal, g.target);
    }
  }
  auto rho = [&](size_t i) {
    ReclaimCandidate c;
    c.size = guests[i].actual;
    c.active = guests[i].active;
    c.shares = guests[i].shares;
    return ShareRatio(c, c.size, params.idle_tax);
  };
  std::stable_sort(growers.begin(), growers.end(), [&](size_t a, size_t b) {
    if (guests[a].grow != guests[b].grow) return guests[a].grow > guests[b].grow;
    return rho(a) > rho(b);
  });
  // Hard demand (the floor over the guest's size: an allocation, an OOM) is granted in full and
  // paid for by the budget round below when free memory does not cover it; pressure and the
  // rest only get what is free. Only the part up to the floor is hard: a guest asking for more
  // than its floor gets the rest out of free memory like anyone (granted in full, the rest was
  // taken back by the budget round on the next decision, and granted again on the one after: a
  // 64 GiB guest without the agent swung 5.7 GiB every two seconds).
  double room = r.free;
  std::vector<bool> hard(n, false);
  for (size_t i : growers) {
    const double want = guests[i].proposal - r.targets[i];
    const double hard_part = guests[i].grow == GrowClass::kHardDemand
                                 ? std::clamp(std::min(guests[i].floor, guests[i].hard_cap) - r.targets[i], 0.0, want)
                                 : 0.0;
    const double grant = hard_part + std::min(want - hard_part, std::max(0.0, room - hard_part));
    if (grant <= 0) continue;
    hard[i] = hard_part > 0;
    r.granted[i] = grant;
    r.targets[i] += grant;
    room -= grant;
  }

  // The budget: the excess of the targets' cost over L, by shares with the idle tax.
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += Cost(guests[i], r.targets[i]);
  r.overcommit = std::max(0.0, total - r.limit);
  if (r.overcommit > 0) {
    std::vector<ReclaimCandidate> candidates(n);
    for (size_t i = 0; i < n; ++i) {
      const ShareOutGuest& g = guests[i];
      const double cost = Cost(g, r.targets[i]);
      candidates[i].size = cost;
      const bool capped = std::isfinite(g.cost_cap);
      // A capped guest's idle memory is mostly given back already: only what it costs is idle.
      candidates[i].active = capped ? std::min(g.active, cost) : g.active;
      candidates[i].shares = g.shares;
      const double step_floor = cost - params.step_fraction * g.ceiling;
      candidates[i].lowest = g.may_shrink && !hard[i] ? std::max(g.floor, step_floor) : cost;
    }
    const std::vector<double> take = DistributeReclaim(candidates, r.overcommit, params.idle_tax);
    auto g_of = [&](size_t i) -> const ShareOutGuest& { return guests[i]; };
    double taken = 0;
    for (size_t i = 0; i < n; ++i) {
      if (take[i] <= 0) continue;
      // In cost: a capped guest's balloon goes where it costs that much less (share_out.h).
      const double to = SizeAtCost(g_of(i), candidates[i].size - take[i]);
      r.taken[i] = r.targets[i] - to;
      r.targets[i] = to;
      taken += take[i];
    }
    r.unmet = std::max(0.0, r.overcommit - taken);
    // What the others could not give is taken back from the hard-demand grants, in proportion.
    double hard_granted = 0;
    for (size_t i = 0; i < n; ++i) hard_granted += hard[i] ? r.granted[i] : 0;
    if (r.unmet > 0 && hard_granted > 0) {
      const double cut = std::min(r.unmet, hard_granted);
      for (size_t i = 0; i < n; ++i) {
        if (!hard[i]) continue;
        const double back = cut * r.granted[i] / hard_granted;
        r.granted[i] -= back;
        r.targets[i] -= back;
      }
      r.unmet -= cut;
    }
  }
  return r;
}

std::string ShareOutSummary(const ShareOutResult& r) {
  const double granted = std::accumulate(r.granted.begin(), r.granted.end(), 0.0);
  const double taken = std::accumulate(r.taken.begin(), r.taken.end(), 0.0);
  return absl::StrCat("limit=", FormatMib(r.limit), " free=", FormatMib(r.free),
                      " granted=", FormatMib(granted), " overcommit=", FormatMib(r.overcommit),
                      " taken=", FormatMib(taken), " unmet=", FormatMib(r.unmet));
}

}  // namespace plimsoll::policy
