// Component of the pagecache policy: one pooled reserve for the guests that give their cold page
// cache back themselves (docs/policy.md, "In-guest reclaim").
//
// A guest whose agent reclaims its cold cache (memory.reclaim, within the bounds plimsolld
// sends: server/agent/guest_reclaim_bounds.h) and whose balloon reports free pages hands that
// memory back to the host with no balloon move: its QEMU's resident memory (RSS) falls below its
// balloon size. It takes the memory back by faulting pages in, with no deflate. So for such a
// guest, a member of the pool:
//   - it costs the host min(its commitment, its RSS), not its commitment; the difference is
//     lent: memory the host holds only while the guest does not want it back;
//   - its burst room (burst_headroom.h) is not kept in its own floor: one reserve for all
//     members instead, R = sqrt(sum of b_i^2), b_i its largest burst in the window (of hard
//     demand per report, or of RSS per tick, whichever is larger): the bursts added as if
//     independent, the largest one's size when one guest bursts, the sum's when all do at once;
//   - the pool covers when the lent memory is at least R. Then members keep no burst room in
//     their floors, the balloon does not probe them (their agent takes the cold cache), and the
//     budget counts their cost plus R. When it does not cover, nothing changes: they are sized
//     as guests without in-guest reclaim are, burst room and probes included.
// Covering, the budget gives the guests lent - R more than counted in balloon sizes; never less.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_RECLAIM_POOL_H_
#define PLIMSOLL_POLICY_RECLAIM_POOL_H_

#include <string>
#include <vector>

#include "policy/policy.h"

namespace plimsoll::policy {

// Whether `guest` may be a member: the host sends reclaim bounds (HostView::in_guest_reclaim),
// its balloon reports free pages, the host reads its RSS, and its agent reports figures and a
// reclaimer able to reclaim. Its stats must also be safe to act on (the caller checks).
bool ReclaimsInGuest(const GuestView& guest, const HostView& host);

struct PoolMember {
  double commitment = 0;  // max(actual, target): what the balloon sizes promise the guest
  double rss = 0;         // its QEMU's resident memory
  double burst = 0;       // b_i: its largest burst in the window
};

struct ReclaimPool {
  int members = 0;
  double lent = 0;     // sum of max(0, commitment - rss)
  double reserve = 0;  // R
  bool covers = false;  // members > 0 and lent >= R
};

ReclaimPool SizePool(const std::vector<PoolMember>& members);

// "pool members=.. lent=.. reserve=.. covers=..", or "" without members.
std::string ReclaimPoolSummary(const ReclaimPool& pool);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_RECLAIM_POOL_H_
