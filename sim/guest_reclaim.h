// The agent's in-guest reclaim as the simulator's guests run it (simulate --in_guest_reclaim;
// docs/instruments.md, "In-guest reclaim in the model"): the agent's own law
// (agent::DecideReclaim, docs/agent.md "Reclaim") on the model's figures, within the limits
// a real agent has in force, plimsolld's bounds (server/agent/guest_reclaim_bounds.h) within the
// agent's own flags (agent/reclaim_bounds.h):
//
//   U = kernel + unreclaimable + anon + hot + cold     used: the guest's actual size less its free
//                                                      memory (the model's MemTotal - MemFree)
//   F = hot + cold                                     the file LRU
//   PSI: max(PSI some avg10, the share of the last second stalled); refaults over the last second
//
// The limits are those in force on a real guest: the smaller of plimsolld's and the agent's own
// step and rate (64 MiB at 32 MiB/s: plimsolld's are the smaller), the agent's own file keep and
// PSI stop (plimsolld names neither), and plimsolld's refault stop (pagecache's refault target,
// smaller than the agent's own 1000 pages/s). The keep is the host's (the caller's): plimsolld's
// max(working set, floor) of its last decision for the guest.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_GUEST_RECLAIM_H_
#define PLIMSOLL_SIM_GUEST_RECLAIM_H_

#include <limits>

#include "policy/pagecache_law.h"

namespace plimsoll::sim {

struct GuestReclaimLimits {
  // plimsolld's kGuestReclaimStepBytes and kGuestReclaimBytesPerSecond (the agent's own flags,
  // 128 MiB and 64 MiB/s, are larger).
  double step_bytes = 64.0 * (1 << 20);
  double bytes_per_second = 32.0 * (1 << 20);
  // The agent's --reclaim_min_file_bytes: it never takes the file LRU below this.
  double keep_file_bytes = 64.0 * (1 << 20);
  // The agent's own PSI "some" stop, percent.
  double psi_stop_pct = 5;
  // plimsolld's refault stop (GuestReclaimRefaultStop: pagecache's refault target), in bytes/s
  // of 4 KiB pages refaulted.
  double refault_stop_bytes_per_second = policy::LawParams{}.refault_target_bytes_per_second;
  // Smaller steps are not worth a write (the agent's ReclaimLawOptions::min_step_bytes).
  double min_step_bytes = 1.0 * (1 << 20);
};

// What the agent measures before a step.
struct GuestReclaimSituation {
  double keep = 0;   // the host's keep_bytes: U is not taken below it
  double used = 0;   // U
  double file = 0;   // F
  double since_step = std::numeric_limits<double>::infinity();  // t, seconds
  double psi_pct = 0;  // max(PSI some avg10, the last second's stall share), percent
  double refault_bytes_per_second = 0;  // file refaults over the last second
};

// The bytes the agent asks the guest's kernel to reclaim now; 0: no step.
double GuestReclaimBytes(const GuestReclaimSituation& s,
                         const GuestReclaimLimits& limits = GuestReclaimLimits());

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_GUEST_RECLAIM_H_
