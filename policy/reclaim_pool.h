// Component of the pagecache policy: what a guest whose balloon reports free pages costs the
// host, and one pooled reserve for those guests (docs/policy.md, "In-guest reclaim").
//
// With in-guest reclaim on (HostView::in_guest_reclaim: plimsolld sends the agents reclaim
// bounds), a guest whose balloon reports free pages returns what it frees to the host with no
// balloon move: its QEMU's resident memory (RSS, read by the host) falls below its balloon
// size, and it takes the memory back by faulting pages in, with no deflate. Its agent's
// reclaim of cold cache makes it free more. So, from host facts alone (free page reporting on,
// a plausible RSS read this tick), such a guest is **costed by RSS**:
//   - it costs the budget max(RSS, its floor) up to its commitment; the rest is lent: memory the
//     host holds only while the guest does not want it back;
//   - one reserve for all of them, R = sqrt(sum of b_i^2), b_i the largest of its burst in the
//     window (of hard demand per report, burst_headroom.h), its largest RSS rise from one
//     decision to the next in the window, and its headroom: the largest single burst is
//     covered, and about sqrt(n) typical ones at once, not every guest bursting together;
//   - the pool covers when the lent memory is at least R. Then the budget counts those guests'
//     cost plus R; otherwise it counts balloon sizes, as without in-guest reclaim.
// Privileges follow the agent: a costed guest whose agent can reclaim, whose stats are safe to
// act on and which lends at least a step keeps no burst room in its floor (R does) and is not
// probed by the balloon (its agent takes the cold cache): it is **pooled**, and stays so for
// kPoolGraceSeconds after it last qualified while its agent reclaims and its stats stay safe
// (an allocation spends what it lent, and may stop the pool covering). A claim of the agent
// changes only its own guest's privileges, never what it costs nor what its neighbours get.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_RECLAIM_POOL_H_
#define PLIMSOLL_POLICY_RECLAIM_POOL_H_

#include <string>
#include <vector>

#include "policy/policy.h"

namespace plimsoll::policy {

// Whether `guest` is costed by RSS: in-guest reclaim is on, its balloon reports free pages, and
// its RSS was read and is plausible (above 0, at most twice its ceiling: QEMU's own memory).
bool CostedByRss(const GuestView& guest, const HostView& host);

// Whether its agent reclaims in it: costed by RSS, and the agent reports figures and a
// reclaimer able to reclaim. Pooled also needs safe stats and a step lent (the caller checks).
bool ReclaimsInGuest(const GuestView& guest, const HostView& host);

// Whether its agent may give its cold cache back in the guest: costed by RSS, and its agent
// either reclaims (ReclaimsInGuest) or has not reported yet (a guest's first stats are libvirt's,
// seconds before its agent's first report says whether it reclaims).
bool AgentMayReclaim(const GuestView& guest, const HostView& host);

// How long the balloon leaves such a guest's cold cache to its agent before it takes any itself
// (the law holds it, "awaiting_agent"), counted from when it was first seen, or last stopped
// being pooled. A guest that has just read a file lends nothing (its RSS is its size), so it is
// not pooled; taken by the balloon then, it must wait for a deflate when it next allocates,
// although its agent would have given the same cache back with no balloon move. The agent's
// steps (128 MiB at most, 64 MiB/s) free a gigabyte's cache in seconds after its first report
// (every 5 s by default); the share-out still takes from the guest when the budget needs it.
inline constexpr double kAgentWaitSeconds = 30;

// The balloon as a brake, released. When the budget takes by balloon from a costed guest whose
// agent may reclaim (costs over the budget: two guests reading files at once, before their
// agents' first reports), the take is recorded as braked; forgotten if its agent cannot reclaim,
// or has not said it does by the end of its wait for the agent. Its balloon is then where its memory was counted, not where
// the guest wants it: it lends nothing (its RSS is at its balloon size, QEMU's own memory
// above it), so it is neither pooled nor able to allocate without a deflate. While braked it
// waits as for its agent (the law does not take more). Once its agent has given back a step (with
// the balloon landed, RSS - actual a step below its highest since the last take: the balloon's
// own inflation lowers both alike), the pool covers and the budget has room (the
// share-out's free memory, the pool's reserve already kept apart), at least this long after the
// last take, what was braked is given back as growth granted out of free memory: its cost does
// not change (RSS), it lends again, and it is pooled. A brake its agent has not answered with a
// step kAgentWaitSeconds after the last take is forgotten (a reader refilling its cache as fast as
// its agent drops it, a looping stream, keeps the balloon as its cap and the law's takes), and
// the guest is not braked again for kBrakeReleaseIntervalSeconds.
inline constexpr double kBrakeSettleSeconds = 10;
// A guest braked again after a release began is refilling what it was given (a stream read
// again and again): no new release until this long after the last one began, or the balloon
// would swing with every refill.
inline constexpr double kBrakeReleaseIntervalSeconds = 300;

// How long a pooled guest keeps its privileges after it last qualified, while its agent still
// reclaims and its stats are safe: long enough for an allocation to spend what the guest lent
// (seconds on the lab's guests) without the balloon taking it back or giving burst room.
inline constexpr double kPoolGraceSeconds = 30;

struct PoolMember {
  double commitment = 0;  // max(actual, target): what the balloon sizes promise the guest
  double rss = 0;         // what it costs: its QEMU's resident memory (at least its floor)
  double burst = 0;       // b_i
};

struct ReclaimPool {
  int members = 0;     // guests costed by RSS
  double lent = 0;     // sum of max(0, commitment - rss)
  double reserve = 0;  // R
  bool covers = false;  // members > 0 and lent >= R
};

ReclaimPool SizePool(const std::vector<PoolMember>& members);

// "pool members=.. lent=.. reserve=.. covers=..", or "" without members.
std::string ReclaimPoolSummary(const ReclaimPool& pool);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_RECLAIM_POOL_H_
