// Reads the balloon's pressure counters (hypervisor.h BalloonPressure: the guest's OOM kills,
// allocation stalls, direct and background scans and reclaims, which Linux >= 6.12 sends and
// QEMU >= 9.2 keeps) into the survey's records, so the tracker merges them with the rest of each
// record. libvirt's memory stats do not carry them: each read is a QEMU monitor command through
// libvirt (docs/operations.md "Balloon pressure counters" says what that costs, and that libvirt
// marks such domains tainted).
//
// A monitor command waits for the domain's libvirt job (up to libvirt's 30 s: a migration, a
// dump, a balloon call still running), so the reads run on a thread of their own, one at a time,
// never on the loop's: Read() hands out what came back since the last call, asks for the reads
// now due, and fills each record with the guest's last answer. The answer carries QEMU's own
// last-update (when the guest sent those counters), so a policy takes rates over the counters'
// own times, whatever the read's lag (policy/guest_signals.h).
//
// When a guest is asked:
//  - only when its record is full (has a last_update, > 0: the guest reports) and that
//    last_update differs from the one last asked at: QEMU's counters change only when the guest
//    sends stats; and never while a read of it is outstanding;
//  - an answer without any counter from a guest that has reported (QEMU < 9.2, a guest kernel
//    < 6.12: neither changes while the domain runs, short of a guest reboot) or NOT_FOUND (no
//    balloon device) is asked again only after `retry_after`; an answer whose own last-update is
//    0 (the guest's driver has not reported yet) is asked again at its next report;
//  - a failed read is retried after `failure_backoff`, doubling up to `retry_after`, and logged
//    when it first fails and when it recovers;
//  - not at all once the connection's driver answered it has no QEMU monitor (the test driver),
//    until Reset() (a new connection).
//
// Threads: Read, Forget, Reset and the accessors are for one thread (the control loop's). The
// reader's own thread only runs reads and hands them back under a mutex; `on_answer` is called
// from it (the loop wakes for an early tick). The destructor waits for a read in progress.
#ifndef PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_
#define PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server {

class BalloonPressureReader {
 public:
  struct Options {
    bool enabled = true;  // config balloon_pressure_stats
    absl::Duration retry_after = absl::Minutes(5);
    absl::Duration failure_backoff = absl::Seconds(30);
    // Tests: read on the caller's thread inside Read(), so one Read() asks and hands back.
    bool inline_reads = false;
  };
  // Monitor commands answered, by outcome, for /metrics (plimsoll_balloon_pressure_reads_total).
  struct Counts {
    uint64_t read = 0;     // an answer with counters
    uint64_t lacking = 0;  // an answer without any (old QEMU or guest kernel), or no balloon
    uint64_t failed = 0;   // any other error
  };

  BalloonPressureReader(hypervisor::Hypervisor* hypervisor, Options options,
                        std::function<void()> on_answer = nullptr);
  ~BalloonPressureReader();
  BalloonPressureReader(const BalloonPressureReader&) = delete;
  BalloonPressureReader& operator=(const BalloonPressureReader&) = delete;

  // Takes the answers that came back, asks for the reads now due (see above) and fills
  // survey->stats[uuid].pressure of the running domains with their last answer.
  void Read(absl::Time now, hypervisor::DomainSurvey* survey);
  // A domain gone: its memo goes too.
  void Forget(const std::string& uuid) { memo_.erase(uuid); }
  // A new connection: the driver may be another, and every domain is asked again.
  void Reset();
  // False once the driver answered it has no QEMU monitor.
  bool monitor_available() const { return monitor_available_; }
  const Counts& counts() const { return counts_; }
  // Reads asked for and not answered yet.
  size_t outstanding() const { return outstanding_.size(); }

 private:
  struct Job {
    std::string uuid;
    std::string name;
    int64_t update = 0;  // the record's last_update when asked
  };
  struct Answer {
    Job job;
    absl::StatusOr<hypervisor::BalloonPressure> result;
  };
  struct Memo {
    std::optional<int64_t> asked_at_update;  // the record's last_update when last asked
    hypervisor::BalloonPressure pressure;   // the last answer with counters
    absl::Time retry_at = absl::InfinitePast();
    absl::Duration backoff;  // after failures: the next wait
    bool lacking_logged = false;
    bool failure_logged = false;
  };

  void Apply(absl::Time now, Answer answer);
  void Worker();

  hypervisor::Hypervisor* const hypervisor_;
  const Options options_;
  const std::function<void()> on_answer_;
  // Loop thread only.
  bool monitor_available_ = true;
  absl::flat_hash_map<std::string, Memo> memo_;
  absl::flat_hash_set<std::string> outstanding_;
  Counts counts_;
  // Shared with the reader's thread.
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // none with inline_reads or when disabled
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_
