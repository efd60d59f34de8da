// The default Reclaim planner: a pure function from the published view to a
// plan. A ControlCore may use it as is or replace it.
//
// Rules (in this order, each skip recorded with its reason):
//   - only running guests whose stats are fresh and that are managed are
//     candidates (excluded, pinned, no-balloon, stale, apply-failed and
//     paused guests are skipped);
//   - a guest gives at most what it can spare without pressure: what lies
//     above the larger of its policy's floor and working set (the last
//     decision's policy_floor_bytes and working_set_bytes, from pagecache),
//     or, for policies without these estimates, its usable
//     memory (MemAvailable, which counts hot cache as spare) minus a margin
//     (max(keep_free_bytes, keep_free_fraction x target)); and never goes
//     below its floor (Guest.min_bytes, raised by an override's min_bytes and
//     by the policy's floor);
//   - lower priority gives first; within a priority, the guest with the most
//     room per share gives first; ties by name;
//   - amounts are whole MiB.
// The plan may fall short of the request; its summary says by how much.
#ifndef PLIMSOLL_SERVER_API_RECLAIM_PLANNER_H_
#define PLIMSOLL_SERVER_API_RECLAIM_PLANNER_H_

#include <cstdint>

#include "plimsoll/v1/control.pb.h"

namespace plimsoll::server {

struct ReclaimPlannerOptions {
  int64_t keep_free_bytes = 64LL << 20;
  double keep_free_fraction = 0.05;
};

// Fills requested_bytes, planned_bytes, items, skipped and summary; the
// caller fills id, dry_run, applied, hold and times.
plimsoll::v1::ReclaimPlan PlanReclaim(const plimsoll::v1::ListGuestsResponse& view, int64_t bytes,
                                      const ReclaimPlannerOptions& options = {});

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_RECLAIM_PLANNER_H_
