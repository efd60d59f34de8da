#include "policy/balloon_follow.h"

#include <algorithm>

namespace plimsoll::policy {
namespace {

const char* StateName(ProgressEvent e) {
  switch (e) {
    case ProgressEvent::kStuck:
      return "stuck";
    case ProgressEvent::kChurning:
      return "churning";
    case ProgressEvent::kSelfDeflated:
      return "self_deflated";
    case ProgressEvent::kNone:
      break;
  }
  return "ok";
}

}  // namespace

FollowVerdict CheckFollow(const GuestView& guest, double now_s, const FollowParams& p,
                          FollowMemory* m) {
  FollowVerdict v;
  if (p.retry_seconds <= 0) return v;
  const ProgressEvent event = guest.history.has_value() ? guest.history->progress : ProgressEvent::kNone;
  if (now_s - m->event_s >= p.max_retry_seconds) m->next_retry_s = 0;
  if (event != ProgressEvent::kNone) {
    const double retry = m->next_retry_s > 0 ? m->next_retry_s : p.retry_seconds;
    m->next_retry_s = std::min(2 * retry, std::max(p.retry_seconds, p.max_retry_seconds));
    m->retry_until_s = now_s + retry;
    m->event_s = now_s;
    m->last_event = event;
    v.event = event;
    v.detail = guest.history->progress_detail;
  }
  v.in_retry = now_s < m->retry_until_s;
  v.retry_left_s = v.in_retry ? m->retry_until_s - now_s : 0;
  v.state = v.in_retry ? StateName(m->last_event) : "ok";
  return v;
}

double FollowAllowance(const FollowVerdict& v, double actual, double allowance) {
  // Every event stops the balloon where it is: it could not get below A (stuck, churning), or
  // the guest went above it on its own (self-deflated) and needed it.
  return v.event == ProgressEvent::kNone ? allowance : std::max(allowance, actual);
}

}  // namespace plimsoll::policy
