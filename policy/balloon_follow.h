// Component of the pagecache law (pagecache_law.h): a balloon that does not follow its target
// is not chased.
//
// balloon_progress.h observes three ways a guest's balloon fails to follow (stuck, churning,
// self-deflated). Without this component the law keeps asking: a churning guest (its shrinker
// hands back what the balloon takes while it streams) inflates and deflates without end, and
// every page of it is balloon traffic for nothing (the corpus's churn guests: 415 GiB moved in
// 25 minutes where the old policy, which had this rule, moved 13). With it:
//   any event:  a <- max(a, A): stop where the balloon got to (stuck, churning), or keep what
//               the guest took on its own (self-deflated); then no take or probe for r
//   r starts at retry_seconds and doubles per event, up to max_retry_seconds; it goes back to
//   retry_seconds after max_retry_seconds without an event.
// Giving memory (a backoff, a floor rising) is never held back: the retry only stops taking.
//
// Switched off by retry_seconds <= 0.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_BALLOON_FOLLOW_H_
#define PLIMSOLL_POLICY_BALLOON_FOLLOW_H_

#include <limits>
#include <string>

#include "policy/policy.h"

namespace plimsoll::policy {

struct FollowParams {
  double retry_seconds = 60;        // <= 0: off
  double max_retry_seconds = 1800;  // the doubling stops here
};

struct FollowMemory {
  double retry_until_s = -std::numeric_limits<double>::infinity();
  double next_retry_s = 0;  // the next event's retry; 0 means retry_seconds
  double event_s = -std::numeric_limits<double>::infinity();
  ProgressEvent last_event = ProgressEvent::kNone;  // the event of the current retry
};

struct FollowVerdict {
  ProgressEvent event = ProgressEvent::kNone;  // what this call saw (kNone when off)
  bool in_retry = false;                       // taking is held back now
  double retry_left_s = 0;
  // The guest's state for the daemon's guest_state metric: "ok", "stuck", "churning",
  // "self_deflated" (the event of the retry under way).
  const char* state = "ok";
  std::string detail;  // balloon_progress.h's numbers for the event
};

// Acts on `guest`'s balloon-progress verdict at `now_s` (its history: history_deriver.h judges
// it with balloon_progress.h; no history, no event) and updates `memory`. Returns a verdict with
// event kNone and no retry when the component is off.
FollowVerdict CheckFollow(const GuestView& guest, double now_s, const FollowParams& params,
                          FollowMemory* memory);

// The allowance after `verdict` for a guest of actual size `actual_bytes` whose allowance was
// `allowance_bytes` (see the file comment).
double FollowAllowance(const FollowVerdict& verdict, double actual_bytes, double allowance_bytes);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_BALLOON_FOLLOW_H_
