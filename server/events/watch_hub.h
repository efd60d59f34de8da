// server/events/: the change stream of the published view (watch_hub, view_events): made by the
// loop, served by the API's Watch. It must not depend on the loop, the API or the hypervisor.
//
// Fan-out of control-plane events (decisions, guest changes, overrides, host
// policy, reclaims) from the control loop to Watch streams.
//
// The loop calls Publish(), which never blocks on a subscriber: each
// subscriber has a bounded queue, and when it is full the oldest event is
// dropped and counted. The subscriber's next read then yields an
// EventsDropped event carrying the count, so a control plane knows to
// resynchronise (ListGuests) instead of silently missing changes.
//
// Thread-safety: every method of WatchHub and WatchSubscription is
// thread-safe. Publish holds the hub's lock for the fan-out and each
// subscriber's lock for one push; Next() waits on the subscriber's own lock
// only, so a slow reader never holds up Publish.
#ifndef PLIMSOLL_SERVER_EVENTS_WATCH_HUB_H_
#define PLIMSOLL_SERVER_EVENTS_WATCH_HUB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "plimsoll/v1/types.pb.h"

namespace plimsoll::server {

// What a subscriber wants to see (plimsoll.v1.WatchRequest, parsed).
struct WatchFilter {
  // Guest names or UUIDs (UUIDs compared case-insensitively); empty: all.
  // Host-wide events (host policy, reclaims, drops) always pass.
  std::vector<std::string> guests;
  // Empty: every kind.
  std::vector<plimsoll::v1::WatchEventKind> kinds;
  // Pass decisions that hold a guest where it is.
  bool include_holds = false;
};

// The kind of an event (UNSPECIFIED for EventsDropped/SnapshotComplete).
plimsoll::v1::WatchEventKind KindOf(const plimsoll::v1::WatchEvent& event);

// Pure: whether `filter` lets `event` through.
bool WatchFilterMatches(const WatchFilter& filter, const plimsoll::v1::WatchEvent& event);

namespace watch_internal {
struct Queue;
struct Registry;
}  // namespace watch_internal

// One subscriber's end. Destroying it unsubscribes.
class WatchSubscription {
 public:
  enum class Result { kEvent, kTimeout, kClosed };

  ~WatchSubscription();
  WatchSubscription(const WatchSubscription&) = delete;
  WatchSubscription& operator=(const WatchSubscription&) = delete;

  // The next event, waiting at most `timeout`. After drops, the next event
  // is an EventsDropped with the count. kClosed once the hub is closed (the
  // daemon is stopping): events still queued are discarded.
  Result Next(plimsoll::v1::WatchEvent* event, absl::Duration timeout);

  // Events this subscriber lost so far.
  uint64_t dropped() const;

 private:
  friend class WatchHub;
  WatchSubscription(std::shared_ptr<watch_internal::Registry> registry,
                    std::shared_ptr<watch_internal::Queue> queue);
  std::shared_ptr<watch_internal::Registry> registry_;
  std::shared_ptr<watch_internal::Queue> queue_;
};

class WatchHub {
 public:
  // `clock` stamps events that carry no time; borrowed, must outlive the hub.
  explicit WatchHub(Clock* clock, size_t queue_capacity = 1024);
  ~WatchHub();  // closes

  // Stamps `event` with the next sequence number (and the time, when unset)
  // and queues it for every subscriber whose filter matches. Never blocks on
  // a subscriber. Returns the sequence number given.
  uint64_t Publish(plimsoll::v1::WatchEvent event);

  // A new subscriber that sees events published from now on.
  std::unique_ptr<WatchSubscription> Subscribe(WatchFilter filter);

  // Ends every subscription (Next returns kClosed) and refuses new ones.
  void Close();

  int64_t subscribers() const;
  // Events dropped over all subscribers since start.
  uint64_t dropped_total() const;

 private:
  Clock* clock_;
  size_t capacity_;
  std::shared_ptr<watch_internal::Registry> registry_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_EVENTS_WATCH_HUB_H_
