// Moves bytes between pairs of descriptors on one thread: each link joins a domain's agent
// channel socket (the host end of a virtio-serial port, which QEMU listens on) and plimsolld's
// end of a socketpair whose other end the agent gRPC server reads (VirtioSerialConnector).
//
// Why a pump and not the channel socket handed to gRPC directly: plimsolld must know when
// either side is done (QEMU closed the socket: the guest's domain is gone or libvirtd restarted
// it; gRPC closed its end: the HTTP/2 session failed, e.g. a restarted agent started a new one in
// the middle of the old), so it can reconnect; gRPC tells nobody when it closes a descriptor it
// was given. And the pump is where one guest's bytes are bounded before any parsing: each link
// has a byte budget for what the guest sends (a token bucket), and a link over it is simply not
// read for a while, so a guest flooding its channel slows only its own channel (virtio-serial
// then blocks the guest's writes) and never the others, which this thread serves in turn
// (level-triggered epoll, at most one read of kChunkBytes per link and direction per round).
//
// Thread-safe: Add and Remove from any thread; on_end callbacks run on the pump thread, outside
// the pump's lock, and may call Add or Remove.
#ifndef PLIMSOLL_SERVER_AGENT_CHANNEL_PUMP_H_
#define PLIMSOLL_SERVER_AGENT_CHANNEL_PUMP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace plimsoll::server::agent {

struct PumpLinkOptions {
  // What the guest may send, bytes per second sustained and burst. An agent's report is ~0.5 KiB
  // plus HTTP/2 framing, one every few seconds; 64 KiB/s is two orders of magnitude above what
  // a well-behaved agent needs and far below what would cost the daemon noticeable CPU.
  double guest_bytes_per_second = 64 * 1024;
  double guest_burst_bytes = 256 * 1024;
};

// Why a link ended.
enum class LinkEnd {
  kGuestClosed,   // the channel socket reached EOF or hung up (QEMU closed it)
  kDaemonClosed,  // the gRPC side closed its end (session over)
  kError,         // a read or write failed otherwise
};
absl::string_view LinkEndName(LinkEnd end);  // "guest_closed", "daemon_closed", "error"

struct PumpCounters {
  uint64_t bytes_from_guests = 0;
  uint64_t bytes_to_guests = 0;
  // Times a link stopped being read because its guest used up its byte budget.
  uint64_t throttled = 0;
};

class ChannelPump {
 public:
  // Largest single read, per link and direction, per round of the pump.
  static constexpr size_t kChunkBytes = 16 * 1024;
  // Bytes buffered per link and direction before the pump stops reading that side.
  static constexpr size_t kBufferBytes = 64 * 1024;

  // Starts the pump thread. `clock` (the byte budgets' time) must outlive the pump.
  static absl::StatusOr<std::unique_ptr<ChannelPump>> Start(Clock* clock);
  // Stops the thread and closes every link's descriptors (no on_end calls).
  ~ChannelPump();
  ChannelPump(const ChannelPump&) = delete;
  ChannelPump& operator=(const ChannelPump&) = delete;

  // Takes over both descriptors (made non-blocking here): `guest_fd` the channel socket,
  // `daemon_fd` plimsolld's end of the socketpair. `on_end` is called once, on the pump thread,
  // when the link ends by itself; both descriptors are closed by then. Returns the link's id
  // (never 0, never reused).
  uint64_t Add(int guest_fd, int daemon_fd, PumpLinkOptions options,
               std::function<void(LinkEnd why, const std::string& detail)> on_end);

  // Closes the link's descriptors now; its on_end is not called. Unknown ids are ignored.
  void Remove(uint64_t id);

  PumpCounters counters() const;
  size_t links() const;

 private:
  struct Link;
  explicit ChannelPump(Clock* clock, int epoll_fd, int wake_fd);
  void Run();
  // Handles one readiness event; returns false when the link ended (*why, *detail set).
  bool HandleLocked(Link& link, bool guest_side, uint32_t events, absl::Time now, LinkEnd* why,
                    std::string* detail) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateInterestLocked(Link& link, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(Link& link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const int epoll_fd_;
  const int wake_fd_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
  // The links waiting for their budget to refill (throttled_until set): each round of the pump
  // looks at these only, so a wake costs the throttled links, not all of them (a walk of every
  // link per wake grows with the channel count; 1,024 channels: docs/benchmarks.md "Over
  // virtio-serial channels").
  absl::flat_hash_set<uint64_t> throttled_ ABSL_GUARDED_BY(mu_);
  PumpCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_CHANNEL_PUMP_H_
