#include "server/events/watch_hub.h"

#include <algorithm>
#include <deque>

#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"

namespace plimsoll::server {
namespace watch_internal {

struct Queue {
  Queue(WatchFilter f, size_t cap) : filter(std::move(f)), capacity(cap) {}
  const WatchFilter filter;
  const size_t capacity;
  mutable absl::Mutex mu;
  std::deque<plimsoll::v1::WatchEvent> events ABSL_GUARDED_BY(mu);
  uint64_t pending_dropped ABSL_GUARDED_BY(mu) = 0;  // not yet reported to the reader
  uint64_t dropped ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
};

struct Registry {
  mutable absl::Mutex mu;
  std::vector<std::shared_ptr<Queue>> queues ABSL_GUARDED_BY(mu);
  uint64_t next_sequence ABSL_GUARDED_BY(mu) = 1;
  uint64_t dropped_total ABSL_GUARDED_BY(mu) = 0;
  bool closed ABSL_GUARDED_BY(mu) = false;
};

}  // namespace watch_internal

namespace {

using ::plimsoll::v1::WatchEvent;
using ::plimsoll::v1::WatchEventKind;

bool GuestMatches(const WatchFilter& f, const std::string& name, const std::string& uuid) {
  if (f.guests.empty()) return true;
  for (const std::string& g : f.guests) {
    if (g == name || (!uuid.empty() && absl::AsciiStrToLower(g) == uuid)) return true;
  }
  return false;
}

}  // namespace

WatchEventKind KindOf(const WatchEvent& e) {
  switch (e.event_case()) {
    case WatchEvent::kDecision:
      return plimsoll::v1::WATCH_EVENT_KIND_DECISION;
    case WatchEvent::kGuest:
      return plimsoll::v1::WATCH_EVENT_KIND_GUEST;
    case WatchEvent::kHostPolicy:
      return plimsoll::v1::WATCH_EVENT_KIND_HOST_POLICY;
    case WatchEvent::kGuestOverride:
      return plimsoll::v1::WATCH_EVENT_KIND_GUEST_OVERRIDE;
    case WatchEvent::kReclaim:
      return plimsoll::v1::WATCH_EVENT_KIND_RECLAIM;
    case WatchEvent::kHostLine:
      return plimsoll::v1::WATCH_EVENT_KIND_HOST_LINE;
    default:
      return plimsoll::v1::WATCH_EVENT_KIND_UNSPECIFIED;
  }
}

bool WatchFilterMatches(const WatchFilter& f, const WatchEvent& e) {
  const WatchEventKind kind = KindOf(e);
  if (kind == plimsoll::v1::WATCH_EVENT_KIND_UNSPECIFIED) return true;  // stream bookkeeping
  if (!f.kinds.empty() && std::find(f.kinds.begin(), f.kinds.end(), kind) == f.kinds.end()) return false;
  switch (e.event_case()) {
    case WatchEvent::kDecision: {
      const auto d = e.decision().decision().direction();
      if (!f.include_holds && d != plimsoll::v1::DIRECTION_INFLATE && d != plimsoll::v1::DIRECTION_DEFLATE) {
        return false;
      }
      return GuestMatches(f, e.decision().guest_name(), e.decision().guest_uuid());
    }
    case WatchEvent::kGuest:
      return GuestMatches(f, e.guest().guest().name(), e.guest().guest().uuid());
    case WatchEvent::kGuestOverride:
      return GuestMatches(f, e.guest_override().guest_name(), e.guest_override().guest_uuid());
    default:
      return true;  // host-wide
  }
}

WatchSubscription::WatchSubscription(std::shared_ptr<watch_internal::Registry> registry,
                                     std::shared_ptr<watch_internal::Queue> queue)
    : registry_(std::move(registry)), queue_(std::move(queue)) {}

WatchSubscription::~WatchSubscription() {
  absl::MutexLock l(&registry_->mu);
  auto& qs = registry_->queues;
  qs.erase(std::remove(qs.begin(), qs.end(), queue_), qs.end());
}

WatchSubscription::Result WatchSubscription::Next(plimsoll::v1::WatchEvent* event, absl::Duration timeout) {
  watch_internal::Queue& q = *queue_;
  absl::MutexLock l(&q.mu);
  auto ready = [&q]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(q.mu) {
    return q.closed || q.pending_dropped > 0 || !q.events.empty();
  };
  q.mu.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (q.closed) return Result::kClosed;
  if (q.pending_dropped > 0) {
    event->Clear();
    event->mutable_dropped()->set_count(q.pending_dropped);
    q.pending_dropped = 0;
    return Result::kEvent;
  }
  if (q.events.empty()) return Result::kTimeout;
  *event = std::move(q.events.front());
  q.events.pop_front();
  return Result::kEvent;
}

uint64_t WatchSubscription::dropped() const {
  absl::MutexLock l(&queue_->mu);
  return queue_->dropped;
}

WatchHub::WatchHub(Clock* clock, size_t queue_capacity)
    : clock_(clock),
      capacity_(std::max<size_t>(1, queue_capacity)),
      registry_(std::make_shared<watch_internal::Registry>()) {}

WatchHub::~WatchHub() { Close(); }

uint64_t WatchHub::Publish(plimsoll::v1::WatchEvent event) {
  if (event.unix_micros() == 0) event.set_unix_micros(absl::ToUnixMicros(clock_->Now()));
  absl::MutexLock l(&registry_->mu);
  const uint64_t seq = registry_->next_sequence++;
  event.set_sequence(seq);
  for (const auto& q : registry_->queues) {
    if (!WatchFilterMatches(q->filter, event)) continue;
    absl::MutexLock ql(&q->mu);
    if (q->closed) continue;
    if (q->events.size() >= q->capacity) {
      q->events.pop_front();
      ++q->pending_dropped;
      ++q->dropped;
      ++registry_->dropped_total;
    }
    q->events.push_back(event);
  }
  return seq;
}

std::unique_ptr<WatchSubscription> WatchHub::Subscribe(WatchFilter filter) {
  auto q = std::make_shared<watch_internal::Queue>(std::move(filter), capacity_);
  {
    absl::MutexLock l(&registry_->mu);
    if (registry_->closed) {
      absl::MutexLock ql(&q->mu);
      q->closed = true;
    } else {
      registry_->queues.push_back(q);
    }
  }
  return std::unique_ptr<WatchSubscription>(new WatchSubscription(registry_, q));
}

void WatchHub::Close() {
  absl::MutexLock l(&registry_->mu);
  registry_->closed = true;
  for (const auto& q : registry_->queues) {
    absl::MutexLock ql(&q->mu);
    q->closed = true;
    q->events.clear();
  }
}

int64_t WatchHub::subscribers() const {
  absl::MutexLock l(&registry_->mu);
  return static_cast<int64_t>(registry_->queues.size());
}

uint64_t WatchHub::dropped_total() const {
  absl::MutexLock l(&registry_->mu);
  return registry_->dropped_total;
}

}  // namespace plimsoll::server
