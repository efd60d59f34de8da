// The daemon's memory of what agents reported: for each guest, the latest validated report,
// when it arrived, a short history of counter samples for rates, and whether the guest's agent
// is connected now. It owns the per-guest state the validator needs (ReportValidator is pure)
// and the acceptance/rejection counters behind plimsoll_agent_reports_total and
// plimsoll_agent_reports_rejected_total{reason}.
//
// What the control loop may rely on:
// - Only reports that passed every check are visible. A rejected report changes nothing a
//   reader can see except the counters and the guest's last_reject_* fields, and a report
//   whose proof fails changes nothing of the guest it claims to be.
// - Entries exist only for guests named in SetKnownGuests, so memory is bounded by the number
//   of managed guests, whatever agents send.
// - Signals older than stale_after are marked not fresh (FreshSignals returns nothing); entries
//   not updated for forget_after are dropped.
// - Rates are computed from counter deltas over the guest's own CLOCK_BOOTTIME (immune to
//   network delay), over at least min_rate_span, within one boot; absent until two samples of
//   the same boot exist.
//
// Thread-safe: Ingest is called from gRPC threads, readers from the control loop and metrics.
// The proof check runs outside the lock.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_STORE_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_STORE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "plimsoll/v1/agent.pb.h"
#include "server/agent/report_validator.h"

namespace plimsoll::server::agent {

struct AgentStoreOptions {
  // Three default agent intervals (5 s) plus slack: after this the guest falls back to libvirt.
  absl::Duration stale_after = absl::Seconds(20);
  absl::Duration forget_after = absl::Minutes(10);
  // Rates span at least this much guest time, so spike reports a few ms apart do not produce
  // noisy rates.
  absl::Duration min_rate_span = absl::Seconds(1);
  // Upper bound on counter samples kept per guest for rates. Samples older than needed for a
  // min_rate_span base are dropped anyway; this only bounds memory when reports come faster
  // than min_rate_span / max_rate_samples.
  size_t max_rate_samples = 64;
};

// Everything the daemon derives from one guest's agent. Sizes in bytes; optional fields are
// absent when the guest's kernel does not report them or (rates) when there is no base yet.
struct AgentSignals {
  std::string uuid;
  bool connected = false;  // an authenticated stream of this guest is open now
  bool fresh = false;      // has a report younger than stale_after
  std::optional<absl::Time> received;  // arrival of the last accepted report
  double age_seconds = 0;              // now - received (0 when never)
  uint64_t reports_accepted = 0;       // for this guest since the entry was created
  std::string boot_id;
  uint64_t sequence = 0;
  bool spike = false;  // the last accepted report was sent early by a PSI trigger
  std::optional<absl::Time> last_spike;  // arrival of the last accepted spike report

  std::optional<int64_t> mem_total_bytes;
  std::optional<int64_t> mem_free_bytes;
  std::optional<int64_t> mem_available_bytes;
  std::optional<int64_t> buffers_bytes;
  std::optional<int64_t> cached_bytes;
  std::optional<int64_t> active_file_bytes;
  std::optional<int64_t> inactive_file_bytes;
  std::optional<int64_t> anon_bytes;
  std::optional<int64_t> shmem_bytes;
  std::optional<int64_t> sreclaimable_bytes;
  std::optional<int64_t> sunreclaim_bytes;
  std::optional<int64_t> swap_total_bytes;
  std::optional<int64_t> swap_free_bytes;

  std::optional<double> psi_some_avg10;
  std::optional<double> psi_some_avg60;
  // PSI "some" total (µs stalled since the guest booted): the policy measures the stall over
  // each report interval exactly from it, where avg10 lags by ~10 s.
  std::optional<uint64_t> psi_some_total_us;
  std::optional<double> psi_full_avg10;
  std::optional<double> psi_full_avg60;

  // Per second of guest time, from counter deltas.
  std::optional<double> refaults_per_second;  // workingset_refault_file + _anon
  std::optional<double> file_refaults_per_second;
  std::optional<double> major_faults_per_second;
  std::optional<double> pgscan_per_second;
  std::optional<double> pgsteal_per_second;
  std::optional<double> rate_span_seconds;  // the span the rates above were computed over

  // Raw cumulative counters of the last report (this boot).
  std::optional<uint64_t> oom_kill;
  std::optional<uint64_t> balloon_inflate;
  std::optional<uint64_t> balloon_deflate;
  std::optional<uint64_t> allocstall;

  // The agent's reclaimer, from the last report (absent: its agent has none). A claim of the
  // guest's, bounded by the validator, never proof: what the host got back shows in QEMU's RSS.
  std::optional<v1::ReclaimState> reclaim_state;
  // Its last decision ("step", "below_keep", "pressure", ...). The guest's own string: check it
  // against the documented names before using it as a metric label.
  std::string reclaim_reason;
  bool reclaim_file_only = false;
  bool reclaim_dry_run = false;
  std::optional<uint64_t> reclaim_keep_bytes;       // the keeps the agent says are in force
  std::optional<uint64_t> reclaim_keep_file_bytes;
  // Cumulative bytes asked of memory.reclaim and achieved, summed over every agent process and
  // boot since the guest's entry was created: they never decrease (metrics counters), and never
  // wrap. What one report adds (its series' growth, or a new series' counters whole) is capped
  // on the host's clock: at most max_reclaim_bytes_per_second * (host seconds since the guest's
  // previous accepted report + 1) plus the guest's ceiling, so an agent that invents a new boot
  // or series, or leaps its boottime ahead, on every report adds no faster than an honest agent
  // reclaiming at the plausibility limit.
  uint64_t reclaim_requested_total_bytes = 0;
  uint64_t reclaim_achieved_total_bytes = 0;
  // Compactions after its reclaim rounds, and of them failed, summed the same way; what one
  // report adds is capped at one a host second since the previous report (+1): an agent
  // compacts after a round, and rounds are seconds apart.
  uint64_t reclaim_compactions_total = 0;
  uint64_t reclaim_failed_compactions_total = 0;

  // The bounds the daemon put in its last ack of an accepted report of this guest (nullopt: that
  // ack carried none, or none was sent yet). Recorded by the service (NoteBoundsSent).
  std::optional<v1::ReclaimBounds> reclaim_bounds_sent;

  // The last rejection of an authenticated report of this guest (not of spoofed ones).
  std::string last_reject_reason;
  std::optional<absl::Time> last_reject;
};

// Process-wide counters, for metrics.
struct AgentCounters {
  uint64_t accepted = 0;
  std::array<uint64_t, kNumRejectReasons> rejected{};  // indexed by RejectReason
  uint64_t reboots = 0;                                 // boot id changes seen
  uint64_t rejected_total() const;
  uint64_t rejected_for(RejectReason r) const { return rejected[static_cast<int>(r)]; }
};

// What a stream has established, checked against every frame on it.
struct StreamBinding {
  std::string uuid;   // proven by an earlier frame; empty until then
  std::string nonce;  // from the stream's hello; empty: not checked
  // The stream's own ProofCache (null: none), so its reports skip the token derivation.
  ProofCache* proof_cache = nullptr;
  // Set for a stream on a domain's own channel (virtio-serial): the domain's uuid, as the
  // hypervisor names it. Its reports carry no proof; one naming another uuid is
  // kChannelIdentityMismatch and ends the stream. Empty: a network stream, proven per report.
  std::string channel_uuid;
};

// The outcome of Ingest, for the service's ack.
struct IngestResult {
  std::optional<RejectReason> reject;
  std::string detail;  // for logs only
  bool authenticated = false;  // the proof matched `uuid`
  std::string uuid;            // set when authenticated
  uint64_t sequence = 0;       // of the report, when it parsed
  // The stream cannot be trusted any more (bad proof, another stream's nonce, uuid switch):
  // the service ends it instead of acking.
  bool end_stream = false;
  bool ok() const { return !reject.has_value(); }
};

class AgentStore {
 public:
  // `validator` and `clock` must outlive the store.
  AgentStore(const ReportValidator* validator, Clock* clock, AgentStoreOptions options = {});

  // The guests the daemon manages and their limits (the control loop calls this every tick).
  // Entries of guests no longer listed are dropped.
  void SetKnownGuests(absl::flat_hash_map<std::string, GuestLimits> guests);

  // Validates one frame and, when accepted, makes it the guest's latest report. `stream`
  // describes the stream the frame came on (AgentService always passes it; in-process callers
  // may not): a proven frame for another uuid than the one the stream already proved is
  // kStreamIdentityChanged, and one that does not carry the stream's nonce is kReplay; neither
  // changes anything. With `stream.channel_uuid` set the identity is the channel's, not a
  // proof's: a report naming another uuid is kChannelIdentityMismatch, changes nothing of the
  // guest it names, and is recorded as the channel's guest's last rejection.
  IngestResult Ingest(const v1::SignedAgentReport& frame, const StreamBinding& stream = {});

  // The bounds the ack of the guest's last accepted report carried (nullopt: none): what the
  // API shows as sent. A guest without an entry is ignored.
  void NoteBoundsSent(const std::string& uuid, const std::optional<v1::ReclaimBounds>& bounds);

  // Counts a rejection decided outside Ingest (the service's kFlood).
  void CountRejected(RejectReason reason);

  // Called with the guest's uuid after every accepted report sent early by a PSI trigger, on
  // the gRPC thread that ingested it, outside the store's lock: the control loop wires its
  // Wake() here so a spike does not wait for the next tick. Must be quick and must not call
  // back into Ingest. Replaces any previous listener; thread-safe.
  void SetSpikeListener(std::function<void(const std::string& uuid)> listener);

  // The service reports authenticated streams opening and closing (AgentSignals::connected).
  void StreamOpened(const std::string& uuid);
  void StreamClosed(const std::string& uuid);

  // The guest's signals whatever their age (check `fresh`), or nullopt when the store has no
  // entry (never reported, forgotten, or not a known guest).
  std::optional<AgentSignals> Signals(absl::string_view uuid) const;
  // Same, but nullopt unless fresh: what a controller should use.
  std::optional<AgentSignals> FreshSignals(absl::string_view uuid) const;
  // The guest's AgentSignals::reclaim_achieved_total_bytes, without building its signals; nullopt
  // when the store has no entry for it.
  std::optional<uint64_t> ReclaimAchievedTotal(absl::string_view uuid) const;
  // Every entry, sorted by uuid.
  std::vector<AgentSignals> AllSignals() const;
  bool IsConnected(absl::string_view uuid) const;

  // Why a guest's virtio-serial channel is not connected ("no_channel: hot-plugging the channel
  // failed: ... (attempt 2, next in 30s)"), set by the channel manager on every scan and shown on
  // that guest's AgentStatus alone; empty clears it (connected, or the domain is gone).
  void SetChannelProblem(const std::string& uuid, std::string problem);
  std::string ChannelProblem(absl::string_view uuid) const;

  AgentCounters counters() const;

  // The options of the validator the store checks reports with.
  const ValidatorOptions& validator_options() const { return validator_->options(); }

  // Drops entries older than forget_after. Ingest also does this now and then.
  void Expire();

 private:
  struct RateSample {
    int64_t boottime_ns = 0;
    std::optional<uint64_t> refault_file, refault_anon, pgmajfault, pgscan, pgsteal;
  };
  struct Entry {
    GuestHistory history;
    std::optional<absl::Time> received;
    std::optional<absl::Time> last_spike;
    std::deque<RateSample> samples;  // this boot, oldest first
    uint64_t accepted = 0;
    uint64_t reclaim_requested_total = 0;  // AgentSignals::reclaim_*_total_bytes
    uint64_t reclaim_achieved_total = 0;
    uint64_t compactions_total = 0;  // AgentSignals::reclaim_*compactions_total
    uint64_t failed_compactions_total = 0;
    std::optional<v1::ReclaimBounds> bounds_sent;
    std::string last_reject_reason;
    std::optional<absl::Time> last_reject;
  };

  // Ingest after the proof and the stream checks: known guest, history checks, storing.
  // Takes `report` over as the guest's latest when accepted (what it leaves in `report` is to be
  // discarded: the previous latest, freed outside the lock).
  IngestResult IngestAuthenticated(v1::AgentReport& report, absl::Time now, IngestResult result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The identity stage of a frame on a domain's channel: parse, then the uuid must be the
  // channel's. Fills `report`; returns a rejection (counted) or an authenticated result.
  IngestResult IdentifyByChannel(const v1::SignedAgentReport& frame, const std::string& channel_uuid,
                                 v1::AgentReport* report) ABSL_LOCKS_EXCLUDED(mu_);
  AgentSignals SignalsLocked(const std::string& uuid, const Entry& e, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(RejectReason r) { rejected_[static_cast<int>(r)].fetch_add(1, std::memory_order_relaxed); }

  const ReportValidator* const validator_;
  Clock* const clock_;
  const AgentStoreOptions options_;

  std::atomic<uint64_t> accepted_{0};
  std::array<std::atomic<uint64_t>, kNumRejectReasons> rejected_{};
  std::atomic<uint64_t> reboots_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, GuestLimits> known_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> open_streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> channel_problems_ ABSL_GUARDED_BY(mu_);
  absl::Time last_expire_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  // Its own lock, so the listener runs outside mu_.
  mutable absl::Mutex listener_mu_;
  std::function<void(const std::string&)> spike_listener_ ABSL_GUARDED_BY(listener_mu_);
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_STORE_H_
