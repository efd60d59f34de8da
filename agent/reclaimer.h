// The agent's reclaimer: proactive reclaim of the guest's cold page cache through memory.reclaim,
// within the bounds the host sends with its acks (docs/agent.md, "Reclaim"). One tick is
// Collect (the bounds in force, a /proc sample) -> Decide (reclaim_decision.h, pure) -> Apply
// (at most one write through the executor). While the host's bounds are live it ticks every
// period (1 s), so a pressure rise over the stop halts it within a period; otherwise it sleeps
// until bounds arrive.
//
// What it reports (FillReport, every report): the state and reason of its last decision, the
// keeps in force, and counters for this agent process (requested, achieved, steps, partial and
// failed steps), which start at zero at counters_since_boottime_ns.
//
// Thread-safe: Run() (or Tick() in tests) on one thread; OnHostBounds from the reporter's
// ack reader; FillReport from the reporter; Stop from any thread. No lock is held across the
// write to memory.reclaim or the /proc reads.
#ifndef PLIMSOLL_AGENT_RECLAIMER_H_
#define PLIMSOLL_AGENT_RECLAIMER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/compaction.h"
#include "agent/guest_reader.h"
#include "agent/reclaim_bounds.h"
#include "agent/reclaim_decision.h"
#include "agent/reclaim_executor.h"
#include "agent/reclaim_peer.h"
#include "common/clock.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

struct ReclaimerOptions {
  // --reclaim is not off. False: the reclaimer only reports off_disabled. So does an agent whose
  // own step or rate (own.max_step_bytes, own.max_bytes_per_second) is 0: no host bounds can
  // raise them (ReclaimOffDetail).
  bool enabled = true;
  // With `enabled` and no executor: why reclaim is unsupported here (CgroupReclaimExecutor::Open's
  // error), logged once and reported.
  std::string unsupported_detail;
  ReclaimOwnLimits own;
  ReclaimLawOptions law;
  // Between ticks while the host's bounds are live.
  absl::Duration period = absl::Seconds(1);
  // Pressure (reclaim_decision.h) this soon after a step is the steps' doing: they took pages
  // still in use. The file LRU before the earliest of them becomes a file keep, held for the
  // keep hold (reclaim_bounds.h), so the agent does not take the same hot pages again and
  // again; after the hold it may try once more, as the host's balloon probes do.
  absl::Duration pressure_blame_window = absl::Seconds(10);
  // When to compact after a round (with a compactor: compaction.h).
  CompactionOptions compaction;
  // Without live bounds Run() sleeps until bounds arrive, waking at most this long apart.
  absl::Duration idle_wait = absl::Minutes(1);
  // The reclaimer's clock's time is CLOCK_BOOTTIME (BoottimeClock) in the agent; the report's
  // counters_since_boottime_ns is this, the time the counters started.
  int64_t series_start_boottime_ns = 0;
};

// Why the agent's own options switch reclaim off, naming the flag ("--reclaim=off",
// "--reclaim_max_step_mib=0", "--reclaim_max_rate_mib=0"); empty when they allow it. Reclaim
// that is off opens no executor and reports off_disabled with this as its detail.
std::string ReclaimOffDetail(const ReclaimerOptions& options);

class Reclaimer : public ReclaimPeer {
 public:
  // `executor` null: off (disabled, or unsupported as options.unsupported_detail says).
  // `compactor` null: no compaction after rounds (--reclaim_compact=false, or no
  // compact_memory). `source` (the /proc reader) and `clock` must outlive the reclaimer.
  Reclaimer(ReclaimerOptions options, std::unique_ptr<ReclaimExecutor> executor, SampleSource* source,
            Clock* clock, std::unique_ptr<Compactor> compactor = nullptr);

  // One decision at the clock's now and, for a step, one write. Returns the decision.
  ReclaimDecision Tick();

  // Ticks until Stop(): every period while bounds are live, otherwise when bounds arrive (or
  // idle_wait passes). Returns at once when there is no executor.
  void Run();
  // Makes Run() return (after the write in progress, if any). Idempotent.
  void Stop();

  // ReclaimPeer.
  void OnHostBounds(const v1::ReclaimBounds& bounds) override;
  void FillReport(v1::ReclaimReport* out) override;

 private:
  struct Counters {
    uint64_t requested = 0, achieved = 0, steps = 0, partial = 0, failed = 0;
  };

  // Compacts when a round that freed enough is over (compaction.h). Tick's thread.
  void MaybeCompact(absl::Time now);

  // Logs a decision whose reason differs from the previous one, and an active phase's totals
  // when it ends. `before` are the counters before this decision's step (if any).
  void LogDecision(const ReclaimDecision& d, const Counters& before) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ReclaimerOptions options_;
  const std::string off_detail_;  // ReclaimOffDetail(options_)
  const std::unique_ptr<ReclaimExecutor> executor_;
  const std::unique_ptr<Compactor> compactor_;
  // The tick thread's own: when it last compacted, and what had been achieved by then.
  absl::Time last_compaction_ = absl::InfinitePast();
  uint64_t achieved_at_compaction_ = 0;
  SampleSource* const source_;
  Clock* const clock_;

  // The tick thread's own: the previous sample, the base of the rates.
  std::optional<v1::AgentReport> previous_;
  absl::Time previous_at_ = absl::InfinitePast();
  // Steps within the pressure blame window: when each was written and the file LRU before it.
  std::deque<std::pair<absl::Time, uint64_t>> recent_steps_;

  mutable absl::Mutex mu_;
  ReclaimBoundsKeeper keeper_ ABSL_GUARDED_BY(mu_);
  uint64_t bounds_updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_step_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_partial_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_error_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Counters counters_ ABSL_GUARDED_BY(mu_);
  uint64_t compactions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_compactions_ ABSL_GUARDED_BY(mu_) = 0;
  ReclaimDecision last_ ABSL_GUARDED_BY(mu_);
  // For the log: the reason last logged, and the counters when the current active phase began.
  std::optional<ReclaimReason> logged_ ABSL_GUARDED_BY(mu_);
  Counters phase_start_ ABSL_GUARDED_BY(mu_);
  // The keep in force at the latest step: the level that step was bounded by. A keep raised
  // after it shows in the pause line's keep=, and the guest may sit below that one.
  uint64_t last_step_keep_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_text_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIMER_H_
