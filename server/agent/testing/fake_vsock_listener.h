// The fake VsockListener: each Connect(cid) makes a socketpair, queues one end as a connection
// from `cid` for Accept, and gives the other to the test as the guest's end. So VsockConnector's
// accept and identity path runs without vhost-vsock, with CIDs the test chooses.
#ifndef PLIMSOLL_SERVER_AGENT_TESTING_FAKE_VSOCK_LISTENER_H_
#define PLIMSOLL_SERVER_AGENT_TESTING_FAKE_VSOCK_LISTENER_H_

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/agent/vsock_listener.h"

namespace plimsoll::server::agent::testing {

class FakeVsockListener final : public VsockListener {
 public:
  ~FakeVsockListener() override {
    absl::MutexLock l(&mu_);
    for (const VsockConnection& c : queue_) close(c.fd);
  }

  // A connection "from the guest with `cid`": the guest's end (non-blocking, the caller owns
  // it), or -1 when no socketpair could be made.
  int Connect(uint32_t cid) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) return -1;
    absl::MutexLock l(&mu_);
    queue_.push_back(VsockConnection{pair[0], cid});
    return pair[1];
  }
  // The next Accept fails with `status` (a transient error) instead of taking a connection.
  void FailNextAccept(absl::Status status) {
    absl::MutexLock l(&mu_);
    failure_ = std::move(status);
  }
  // Connections queued and not accepted yet.
  int pending() const {
    absl::MutexLock l(&mu_);
    return static_cast<int>(queue_.size());
  }

  absl::StatusOr<VsockConnection> Accept() override {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shut_down_ || !queue_.empty() || !failure_.ok(); };
    mu_.Await(absl::Condition(&ready));
    if (shut_down_) return absl::CancelledError("fake vsock listener shut down");
    if (!failure_.ok()) {
      absl::Status s = failure_;
      failure_ = absl::OkStatus();
      return s;
    }
    VsockConnection c = queue_.front();
    queue_.pop_front();
    return c;
  }
  void Shutdown() override {
    absl::MutexLock l(&mu_);
    shut_down_ = true;
  }
  uint32_t port() const override { return 9588; }

 private:
  mutable absl::Mutex mu_;
  std::deque<VsockConnection> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace plimsoll::server::agent::testing

#endif  // PLIMSOLL_SERVER_AGENT_TESTING_FAKE_VSOCK_LISTENER_H_
