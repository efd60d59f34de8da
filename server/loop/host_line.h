// The Plimsoll line (docs/line.md): how much more guest memory this host can safely take, computed
// from one tick's snapshot and the policy's decisions on it. Pure: no I/O, no clock, no logging;
// the loop adds what needs state or time (the offer gate, offer_gate.h; staleness).
//
//   capacity  = the guest budget (MemTotal - host reserve, capped by the configured budget)
//   committed = sum over the snapshot's guests of commit(guest) + burst_reserve
//   headroom  = capacity - committed - new_guest_room
//   over_line = committed > capacity
//
// commit(guest) is what the guest must keep, as the policy measures it: max(floor, working set)
// of its decision, raised to the guest's configured floor (the loop never shrinks it below that)
// and capped at its ceiling (it cannot hold more). A policy that measures neither (mom, proxmox,
// static answer 0 for both) leaves the guest's actual balloon size as its commitment: what it
// holds now is all the daemon knows it needs. A guest without fresh balloon stats counts at its
// ceiling: it may grow to it, and the loop will not shrink it until its stats are fresh again.
#ifndef PLIMSOLL_SERVER_LOOP_HOST_LINE_H_
#define PLIMSOLL_SERVER_LOOP_HOST_LINE_H_

#include <cstdint>

#include "plimsoll/v1/types.pb.h"
#include "policy/policy.h"

namespace plimsoll::server {

// The operator's parameters of the line (config block `line`).
struct LineParams {
  // Room a newly placed guest needs before its balloon can be shrunk.
  int64_t new_guest_room_bytes = 0;
  // Host-wide reserve for the guests' bursts, added to the committed sum.
  int64_t burst_reserve_bytes = 0;
};

// What one guest commits. `decision` may be null (no decision this tick): then as a policy that
// measures nothing. Sets *at_ceiling when the guest counts at its ceiling for lack of fresh stats.
int64_t GuestCommitment(const policy::GuestView& guest, const policy::GuestDecision* decision, bool* at_ceiling);

// The line's figures: capacity, committed, burst reserve, new-guest room, headroom, over_line,
// guests, guests_at_ceiling and the explanation. offered_bytes is left 0 and stale false, tick
// and time unset: the loop fills them. `decisions` are matched to the snapshot's guests by
// position when they are as many, else ignored (a policy that broke its contract).
plimsoll::v1::HostLine ComputeLine(const policy::Snapshot& snapshot, const policy::Decisions& decisions,
                                   const LineParams& params);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_HOST_LINE_H_
