// Balloon calls off the loop thread. A small, bounded pool of workers runs the
// calls that change a domain (a balloon target through the actuator, the stats period through the
// hypervisor), so a domain stuck in a long libvirt job (a migration, a save, a hung QEMU monitor)
// costs one worker and never the loop: the loop submits, goes on with the other guests, and
// collects what returned at its next Take(). The loop never waits for a call.
//
// Per domain:
//   - A call is pending from Submit until it returns or its deadline (submitted + deadline, by
//     the loop's clock) passes. While a call is pending the domain is busy: Submit refuses a
//     second one (kBusy), so nothing is re-issued while in flight.
//   - A call still running at its deadline is given up: Take reports it once as timed out
//     (DEADLINE_EXCEEDED, outcome unknown) and the domain may take a new call. libvirt runs a
//     domain's jobs one at a time, so the new one waits behind the old one there. So that one
//     hung domain cannot take the whole pool, a domain has at most two calls in the pool (the
//     pending one and one given up); beyond that Submit says kBusy until one returns.
//   - A call given up that returns later is reported again, `late`, with its real status; one
//     given up before a worker started it is never run (CANCELLED, late).
// Take() hands results over in the order the calls returned. A successful SetTarget set the
// domain's target, unless another call of the domain overlapped it in the pool (a late one, or
// one `behind_another`): libvirt ran them one after the other, but which one last cannot be told
// from the order their threads reported back, so the caller must set the target again with no
// other call in the pool before it believes it (the loop does: "re-asserting"). A pending or
// timed-out call's target is never the domain's target.
//
// With workers = 0 there is no pool: Submit runs the call on the caller's thread and its result
// is in the next Take(). For tests and benchmarks that want a synchronous tick; the daemon's
// configuration has at least one worker (balloon_workers).
//
// Threads: Submit, Pending and Take are for one thread (the loop). Workers only run calls and
// hand results back under the mutex. The destructor stops the workers: queued calls are dropped,
// running ones are waited for (libvirt cannot interrupt a call), and the domains it waits for
// are logged.
#ifndef PLIMSOLL_SERVER_LOOP_BALLOON_CALLS_H_
#define PLIMSOLL_SERVER_LOOP_BALLOON_CALLS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace plimsoll::server {

class BalloonCalls {
 public:
  struct Options {
    int workers = 0;  // 0: inline on the caller's thread (see above)
    absl::Duration deadline = absl::Seconds(60);
  };
  enum class Kind { kSetTarget, kEnableStats };
  // A call as the loop submitted it.
  struct Call {
    Kind kind = Kind::kSetTarget;
    std::string uuid;
    std::string name;
    int64_t value = 0;  // kSetTarget: target bytes; kEnableStats: period seconds
    int64_t tick = 0;   // the tick that submitted it
    bool dry_run = false;
    absl::Time submitted_at;  // set by Submit
    // Set by Submit: another call of this domain (one given up) was still in the pool. The two
    // may return in either order, so which one libvirt ran last is not known.
    bool behind_another = false;
  };
  struct Result {
    Call call;
    absl::Status status;
    // The call did not return before its deadline: reported with DEADLINE_EXCEEDED, its outcome
    // unknown (it may still land). Not the same as libvirt's own timeouts, which return.
    bool timed_out = false;
    // It returned (or was dropped unrun, CANCELLED) after it had been reported timed out.
    bool late = false;
  };
  enum class Submitted { kAccepted, kBusy, kPoolFull };

  // Queued calls beyond the busy workers; more is kPoolFull (the guest waits for a later tick).
  static constexpr int kQueueLimit = 1024;
  // Calls one domain may have in the pool: the pending one and one given up.
  static constexpr int kMaxPerDomain = 2;

  BalloonCalls(Options options, Clock* clock);
  ~BalloonCalls();
  BalloonCalls(const BalloonCalls&) = delete;
  BalloonCalls& operator=(const BalloonCalls&) = delete;

  // Queues `run` for `call.uuid` (call.submitted_at is set here, from the clock). kBusy: the
  // domain has a pending call, or kMaxPerDomain in the pool; kPoolFull: kQueueLimit calls wait.
  // Nothing is queued unless kAccepted.
  Submitted Submit(Call call, std::function<absl::Status()> run);
  // The domain's pending call (submitted, not returned, not past its deadline), if any.
  const Call* Pending(const std::string& uuid) const;
  // What happened since the last Take: calls that returned (in that order), then pending calls
  // whose deadline has passed (timed out; no longer pending). Never waits.
  std::vector<Result> Take();
  // Calls in the pool now (queued or running), timed-out ones included.
  int in_pool() const;
  const Options& options() const { return options_; }

 private:
  struct Task {
    uint64_t seq = 0;
    Call call;
    std::function<absl::Status()> run;
  };
  struct Done {
    uint64_t seq = 0;
    Result result;
  };
  void Work();
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); }

  const Options options_;
  Clock* const clock_;
  // Loop thread only: the pending call per domain and its sequence number.
  struct PendingCall {
    uint64_t seq = 0;
    Call call;
  };
  absl::flat_hash_map<std::string, PendingCall> pending_;
  uint64_t next_seq_ = 0;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> per_domain_ ABSL_GUARDED_BY(mu_);  // queued + running
  absl::flat_hash_set<uint64_t> given_up_ ABSL_GUARDED_BY(mu_);  // timed out, not yet returned
  absl::flat_hash_map<uint64_t, std::string> running_ ABSL_GUARDED_BY(mu_);  // seq -> uuid
  int in_pool_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

const char* BalloonCallKindName(BalloonCalls::Kind kind);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_BALLOON_CALLS_H_
