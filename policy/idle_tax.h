// Sharing out memory to reclaim between guests by shares with an idle-memory tax, after
// Waldspurger, "Memory Resource Management in VMware ESX Server" (OSDI 2002), section 5.
//
// ESX charges each guest a shares-per-page ratio rho = S / (P * (f + k * (1 - f))), where S is
// the guest's shares, P its size, f the fraction of P it actively uses and k = 1 / (1 - tau) the
// price of an idle page (tau = 0.75 makes idle pages cost 4x). Memory is reclaimed from the guest
// with the lowest rho first. Reclaiming a page lowers P and so raises rho; doing this page by page
// until the deficit is covered ends with every guest that gave memory at one common rho. This
// file solves for that common level directly (bisection), so the cost is O(guests) per probe of
// the level, not O(pages). Pages are assumed to be reclaimed idle-first: a guest shrinks through
// its idle memory (at price k) before it loses active memory (at price 1).
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_IDLE_TAX_H_
#define PLIMSOLL_POLICY_IDLE_TAX_H_

#include <cmath>
#include <vector>

namespace plimsoll::policy {

// One guest in a reclaim round. Sizes are bytes (doubles: sums never overflow).
struct ReclaimCandidate {
  double size = 0;      // what the guest holds now
  double active = 0;    // estimated active part of `size` (the rest is idle)
  double lowest = 0;    // the smallest size this round may leave the guest at
  double shares = 1000; // relative weight; values <= 0 count as 1
};

// Bytes to take from each candidate (same order). Their sum is min(deficit, total room), where a
// candidate's room is max(0, size - lowest). idle_tax is tau in [0, 1): 0 shares memory out by
// shares alone; values outside [0, 0.99] are clamped. A deficit <= 0 (or NaN) takes nothing.
// With a finite ratio_cap, no candidate is taken past the point where its rho reaches the cap
// (memory is not taken from a guest that pays more per page than the one it would go to), so
// the sum may fall short of the deficit.
std::vector<double> DistributeReclaim(const std::vector<ReclaimCandidate>& candidates,
                                      double deficit, double idle_tax,
                                      double ratio_cap = HUGE_VAL);

// A candidate's rho at size `size` (see the file comment), with the same clamping.
double ShareRatio(const ReclaimCandidate& candidate, double size, double idle_tax);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_IDLE_TAX_H_
