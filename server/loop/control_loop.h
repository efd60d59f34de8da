// server/loop/: the tick (control_loop), what it collects into (guest_tracker) and what it applies
// through (actuator). It reaches libvirt and /proc only through server/hypervisor and server/host,
// and serves no RPC: the API reads the view it publishes.
//
// The control loop: one tick is Collect -> Snapshot -> Decide -> Apply -> Publish.
// Only Collect (hypervisor, host /proc) and Apply (actuator) touch the world;
// Decide is the policy's pure function. The loop runs on one thread; other
// threads only call Wake(), WakeForSpike(), Stop(), Published(), AddReclaimHold()
// and Reconfigure().
//
// Early ticks (Wake, WakeForSpike, Reconfigure, AddReclaimHold) start no sooner
// than min_wake_interval after the previous tick started; the wakes in between
// coalesce into one tick, which applies the decisions of the guests that spiked
// first (wake_gate.h).
//
// The operator's runtime settings (OverrideStore, read once per tick through
// snapshot(), never waiting for the disk) are applied every tick:
//   - host policy: host_reserve_bytes and guest_memory_budget_bytes replace
//     the configured ones; `policy` switches the running policy (built with
//     policy::MakePolicy, its state reset); `paused` keeps deciding and
//     reporting but moves no balloon (guests PAUSED, decisions applied=false);
//   - guest overrides: min_bytes/max_bytes replace the configured floor and
//     the <memory> ceiling; shares go to GuestView.shares (API shares x 10:
//     the API's default 100 is the policies' default 1000); exclude: never
//     moved, EXCLUDED, still reported; pin_bytes: the target is held at the
//     pin (clamped to [64 MiB, <memory>]), PINNED. The policy sees a pinned
//     guest with its floor at the pin (floor = ceiling = pin when forced) and
//     an excluded one with floor = ceiling = its current target.
//   - the envelope (envelope.h, a pure function the loop calls for every
//     decision): pins, Reclaim holds, the floor and ceiling, a lowered min,
//     exclusion, then the safety net below, each rule adding its reason and
//     counted in plimsoll_envelope_rules_total{rule}. `priority` is not read
//     by any policy yet: only the Reclaim planner uses it (lower gives first).
//   - Reclaim holds (AddReclaimHold): until the hold expires the guest's
//     target is min(policy target, held target); then ReclaimEvent EXPIRED.
//     A guest in distress ends its hold at once (ReclaimEvent RELEASED, the
//     plimsoll_reclaim_holds_released_total metric, the decision's reason):
//     the policy's GuestDecision::distress (pressure over target, an OOM kill,
//     a self-deflation), or, whatever the policy, a balloon that rose above
//     the held target by itself (the guest deflated it on OOM).
// Balloon calls never run on the loop thread: Apply and Collect submit them to
// a BalloonCalls pool (balloon_calls.h) and the loop takes what returned after Collect and at
// the end of Apply, without waiting. A guest's target is what its last successful call set, once
// that call has returned; a call in flight or timed out moves nothing the loop believes. A guest
// whose move cannot be issued because its domain is busy (its previous call has not returned,
// it has an active libvirt job, or the pool is full) keeps its target, shows
// MANAGEMENT_STATE_BUSY with the reason ("busy: ..."), is counted in
// plimsoll_balloon_busy_skips_total{reason} and logged at most once a minute; every other guest
// is served as usual in the same tick. A call that outlives balloon_call_deadline is reported
// (plimsoll_balloon_call_timeouts_total, the guest's state detail) and the guest is served again
// from the next tick; if that call returns after all, its result is recorded then.
//
// The safety net is applied after all of these: no stats or stale stats, no
// shrink, while growth needs neither (a pin below the current size waits for
// fresh stats, one above it is applied at once); host
// memory data not read this tick (the read failed), no shrink for any guest;
// and on such data a balloon still inflating (actual above the target) is
// stopped where it is (target = actual, at most the ceiling; not for a pin or
// an excluded guest). Each counted in plimsoll_safety_holds_total{rule}.
//
// A guest missing from a listing of running domains is forgotten (its policy
// state with it) when a lifecycle event said it stopped (NoteStopped), or
// after GuestRules::absent_listings listings in a row without it; until then
// it keeps what the daemon knows and is not moved ("held: absent from ...").
//
// Configuration reload (SIGHUP, Daemon::ReloadConfig): Reconfigure() hands the
// reloaded settings to the loop from any thread; they take effect at the start
// of the next tick, beneath the host-policy overlay (a SetHostPolicy reserve,
// budget or policy still wins over the reloaded config).
//
// With a WatchHub, every Publish also publishes EventsBetween(previous view,
// new view) (decisions, guest changes) and the Reclaim APPLIED/EXPIRED events.
#ifndef PLIMSOLL_SERVER_LOOP_CONTROL_LOOP_H_
#define PLIMSOLL_SERVER_LOOP_CONTROL_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "plimsoll/v1/control.pb.h"
#include "policy/policy.h"
#include "server/agent/agent_store.h"
#include "server/events/watch_hub.h"
#include "server/host/host_reader.h"
#include "server/hypervisor/hypervisor.h"
#include "server/loop/actuator.h"
#include "server/loop/balloon_calls.h"
#include "server/loop/balloon_pressure_reader.h"
#include "server/loop/envelope.h"
#include "server/loop/guest_tracker.h"
#include "server/loop/stored_controls.h"
#include "server/loop/host_line.h"
#include "server/loop/offer_gate.h"
#include "server/loop/wake_gate.h"
#include "server/metrics/metrics.h"
#include "server/state/overrides.h"

namespace plimsoll::server {

struct LoopOptions {
  absl::Duration tick = absl::Seconds(5);
  int stats_period_seconds = 2;
  GuestRules rules;
  int64_t host_reserve_bytes = 1LL << 30;
  std::optional<int64_t> guest_memory_budget_bytes;
  // Log holds as well as moves, every tick (config log_every_decision).
  bool log_every_decision = false;
  // Early ticks start at least this long after the previous tick started (config
  // min_wake_interval): a burst of wakes costs one tick, not one each.
  absl::Duration min_wake_interval = absl::Seconds(1);
  // The guests' disk reads are read at most this often (config block_stats_interval): each
  // read costs QEMU a block-stats query per domain, and ticks come up to min_wake_interval
  // apart. Zero: every tick.
  absl::Duration block_stats_interval = absl::Seconds(5);
  // Read the balloon's pressure counters through QEMU's monitor (config balloon_pressure_stats;
  // BalloonPressureReader, on a thread of its own; with balloon_workers = 0 on the loop's).
  // Read at construction only.
  bool balloon_pressure_stats = true;
  // The agents get reclaim bounds (config agent.reclaim_bounds): the snapshot says so
  // (HostView::in_guest_reclaim), and the policy may count what a reclaiming guest costs by its
  // RSS. Read at construction only.
  bool in_guest_reclaim = false;
  // Balloon calls (SetTarget, EnableStats) run on this many workers (config balloon_workers),
  // each given balloon_call_deadline to return (BalloonCalls). 0 runs them on the loop thread:
  // tests and benchmarks only (the config has at least 1). Read at construction only.
  int balloon_workers = 0;
  absl::Duration balloon_call_deadline = absl::Seconds(60);
  // The Plimsoll line's parameters (config block `line`, docs/line.md), and how long its
  // headroom must hold before it is offered (OfferGate).
  LineParams line{int64_t{512} << 20, int64_t{1} << 30};
  absl::Duration offer_hold = absl::Minutes(5);
  // Reconnect backoff after the libvirt connection is lost.
  absl::Duration reconnect_min = absl::Seconds(1);
  absl::Duration reconnect_max = absl::Seconds(30);
};

// Dependencies are borrowed and must outlive the loop. `metrics` and `agents` may be null.
struct LoopDeps {
  hypervisor::Hypervisor* hypervisor = nullptr;
  host::HostReader* host = nullptr;
  const policy::Policy* policy = nullptr;
  Actuator* actuator = nullptr;
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
  // Latest validated in-guest agent reports; null when the agent channel is off.
  agent::AgentStore* agents = nullptr;
  // The operator's overrides and runtime host policy; null: none (config only).
  const OverrideStore* overrides = nullptr;
  // Where decisions, guest changes and reclaim events are published; null: nowhere.
  WatchHub* hub = nullptr;
};

// Where one tick's time went, by the loop's clock. The phases follow each
// other and cover the tick but for the bookkeeping between them (reconfig, host
// policy, reclaim holds), so their sum is at most `total`.
struct TickTimes {
  absl::Duration total;
  absl::Duration collect;  // connect check, domain list, balloon stats, host /proc, controls
  absl::Duration decide;   // the snapshot and the policy's Decide (zero when nothing was collected)
  absl::Duration apply;    // the safety net, actuator calls, decision records and logs
  absl::Duration publish;  // the published view, metrics, watch events
};

// What a configuration reload changes in a running loop.
struct LoopReconfig {
  // tick, stats_period_seconds, rules, host_reserve_bytes, guest_memory_budget_bytes,
  // min_wake_interval, block_stats_interval, line, offer_hold (reconnect_* are not configurable
  // and are kept).
  LoopOptions options;
  // The new base policy (the one in force when the host policy names none);
  // null: unchanged. Switching it resets the policy state.
  std::unique_ptr<policy::Policy> policy;
  // The actuator from now on (borrowed, must outlive the loop); null: unchanged.
  Actuator* actuator = nullptr;
};

class ControlLoop {
 public:
  ControlLoop(LoopDeps deps, LoopOptions options);

  // Runs one tick now. Not thread-safe against itself: call from one thread.
  void Tick();

  // Balloon calls submitted and not yet returned. A call that returned has its result ready for
  // the next tick: tests that drive ticks by hand wait for 0 before the tick that must see it.
  int BalloonCallsInPool() const;

  // Ticks every options.tick until Stop(); Wake() starts the next tick early.
  void Run();
  void Stop();
  // Asks for an early tick (a guest started or stopped, an API call). Thread-safe, cheap.
  void Wake();
  // A lifecycle event said the domain `uuid` stopped: if the next listing lacks it, it is
  // forgotten at once instead of after GuestRules::absent_listings listings. Thread-safe, cheap.
  void NoteStopped(const std::string& uuid);
  // A balloon-change event (libvirt's VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE) said the domain's
  // balloon now holds `actual_bytes`. Thread-safe, cheap (the last value per guest is kept).
  // Between ticks, Run() folds the kept values into the tracker and the published view (and
  // /metrics), at most once per min_wake_interval: the view's actual sizes follow the balloon
  // within about a second instead of a tick, and the guest's history (its balloon progress,
  // policy/balloon_progress.h NoteBalloonSize) sees a balloon that went down and came back up
  // between two ticks (a guest deflating it on OOM), which the tick's own look would miss. A
  // tick's bulk survey supersedes what was kept before it.
  void NoteBalloonChange(const std::string& uuid, int64_t actual_bytes);
  // A guest's agent sent a spike report (PSI trigger): asks for an early tick that applies
  // this guest's decision first, counts it, and logs it ("agent spike uuid=..."), at most one
  // line per guest per 10 s with the number of spikes not logged in between. Thread-safe, cheap:
  // called on the agent listener's threads.
  void WakeForSpike(const std::string& uuid);

  // The latest published view: immutable, swapped once per tick, with the overrides and host
  // policy stored since it was published laid over it (stored_controls.h), so a read that follows
  // a write sees it. Thread-safe.
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> Published() const;

  // Holds the plan's guests at or below their new targets until `until`,
  // from the next tick on (which publishes ReclaimEvent APPLIED); the hold's
  // end publishes EXPIRED. Thread-safe, never waits for a tick.
  void AddReclaimHold(plimsoll::v1::ReclaimPlan plan, absl::Time until);

  // Hands reloaded settings to the loop: applied at the start of the next
  // tick (and that tick is started early). Thread-safe; a second call before
  // that tick replaces the options and keeps a pending policy/actuator that
  // the second call leaves unchanged.
  void Reconfigure(LoopReconfig reconfig);

  // Folds the balloon changes kept since the last tick or fold (NoteBalloonChange) into the
  // tracker and republishes the view with them. Loop thread only: Run() calls it between ticks,
  // tests between Tick()s. Returns how many guests' sizes changed.
  int FoldBalloonChanges();

  int64_t ticks() const { return tick_; }

  // The phases of the last tick (zeros before the first). Loop thread only, like
  // Tick(): benchmarks read it between ticks to split a tick's cost.
  const TickTimes& last_tick_times() const { return last_tick_times_; }

 private:
  // What the operator's settings make of one guest this tick.
  struct ActiveReclaim {
    plimsoll::v1::ReclaimPlan plan;
    absl::Time until;
    // Guests whose hold ended early (distress); the rest of the plan still holds.
    absl::flat_hash_set<std::string> released;
  };

  // Takes a pending Reconfigure() into use (loop thread, start of a tick).
  void ApplyReconfig();
  // Reads the host policy overlay; switches the policy when asked.
  void ApplyHostPolicy();
  // Starts pending reclaims and ends expired ones (publishing EXPIRED).
  void UpdateReclaims(absl::Time now);
  // Fills every tracked guest's control (TrackedGuest::control) from overrides_ and reclaims_.
  void ComputeControls();
  // Ends reclaim `id`'s hold on `uuid` (it is in distress: `why`): RELEASED event, metric, log.
  void ReleaseHold(const std::string& id, const std::string& uuid, const std::string& name,
                   const std::string& why);
  void PublishEvent(plimsoll::v1::WatchEvent event);
  bool EnsureConnected(absl::Time now);
  void Collect(absl::Time now, bool* collected);
  // The snapshot's guests are the tracker's ByName(), in its order (Apply relies on it).
  std::optional<policy::Snapshot> BuildSnapshot(absl::Time now);
  // Applies BuildSnapshot's `snapshot` and the decisions made on it; moves their reasons out
  // into the guests' records.
  void Apply(const policy::Snapshot& snapshot, policy::Decisions& decisions, absl::Time now);
  // The order Apply goes through the decisions: serve_first_'s guests, then the rest in order.
  std::vector<size_t> ApplyOrder(const policy::Decisions& decisions) const;
  // The line of this tick into the view: line_figures_ with the offer, the staleness (`stale`:
  // why the line cannot be trusted this tick; empty: it can), the tick and the time. Logs a
  // change of over_line or stale.
  void PublishLine(absl::Time now, const std::string& stale, plimsoll::v1::HostLine* out);
  void Publish(absl::Time now, const std::string& line_stale);
  // Fills a view with the guest's fresh agent signals (nothing when there are none).
  void AddAgentSignals(policy::GuestView& v) const;
  void PublishAgent(const TrackedGuest& g, absl::Time now, plimsoll::v1::Guest* out) const;
  // Steps every guest's check of its agent's claimed reclaim against its QEMU's RSS read this
  // tick (`stats`: the survey's records), and logs each window it closes.
  void CheckReclaimClaims(absl::Time now, const absl::flat_hash_map<std::string, hypervisor::BalloonStats>& stats);
  void CountError(LibvirtOperation operation);
  // Submits a SetTarget call for the guest; "" when accepted, else why its domain is busy.
  std::string SubmitTarget(const TrackedGuest& g, int64_t target, absl::Time now, BusyReason* why);
  // A fired envelope rule's metrics (and the safety net's own series for its four rules).
  void CountEnvelopeRule(EnvelopeRule rule);
  // What the envelope reads of a tracked guest.
  static EnvelopeGuest EnvelopeOf(const TrackedGuest& g);
  // Records the balloon calls that returned or timed out since the last time (never waits).
  void TakeCallResults(absl::Time now);
  void TargetCallReturned(TrackedGuest* g, const BalloonCalls::Result& r, absl::Time now);
  void StatsCallReturned(TrackedGuest* g, const BalloonCalls::Result& r, absl::Time now);
  // A guest skipped as busy: state, detail, metric, and a log line at most once a minute.
  void NoteBusy(TrackedGuest* g, BusyReason reason, const std::string& why, absl::Time now);

  LoopDeps deps_;
  LoopOptions options_;
  // The configured policy: deps_.policy, or the one a reload built (owned_base_policy_).
  const policy::Policy* base_policy_;
  std::unique_ptr<policy::Policy> owned_base_policy_;
  // The policy in force: base_policy_, or one built for the host policy's name.
  const policy::Policy* policy_;
  std::unique_ptr<policy::Policy> runtime_policy_;
  std::string refused_policy_;  // a host-policy name MakePolicy refused (logged once)
  std::string renamed_policy_;  // a deprecated host-policy name taken under its current one (logged once)
  // The host settings in force this tick (config overlaid with the host policy).
  int64_t reserve_bytes_;
  std::optional<int64_t> budget_cap_;
  bool paused_ = false;
  std::shared_ptr<const OverrideStore::Snapshot> overrides_;
  std::vector<ActiveReclaim> reclaims_;                      // loop thread only
  std::vector<plimsoll::v1::ReclaimPlan> started_reclaims_;  // this tick, announced after Apply
  GuestTracker tracker_;
  bool agents_told_ = false;  // the agent store has been given the tracked guests once
  // The policy's memory, committed as each Decide returns it. A move the envelope, a pause or a
  // busy domain kept from being made, or whose call failed, is not undone here: the policy learns
  // it from the next snapshot's history (its target unchanged, no call in flight).
  policy::PolicyState policy_state_;
  std::atomic<int64_t> tick_{0};
  TickTimes last_tick_times_;
  // The Plimsoll line: the figures of the last tick that had a snapshot (ComputeLine), the gate
  // that turns its headroom into an offer, and what the last published line said (for the log).
  plimsoll::v1::HostLine line_figures_;
  // The policy's host-level line and pool of the last decided tick, for the view; and when the
  // line was last logged (with a tick's moves, or after a minute of holds).
  struct PolicyHost {
    std::string summary;
    int pool_members = 0;
    int64_t pool_lent_bytes = 0;
    int64_t pool_reserve_bytes = 0;
    bool pool_covers = false;
  };
  PolicyHost policy_host_;
  absl::Time policy_host_logged_at_ = absl::InfinitePast();
  OfferGate offer_gate_;
  bool line_logged_over_ = false;
  // The last published view's arena size: the next view's first block (view_arena.h).
  size_t view_arena_bytes_ = 0;
  std::optional<std::string> line_logged_stale_;
  // The guests that spiked before this tick, first spike first: Apply serves them first.
  std::vector<std::string> serve_first_;

  bool was_connected_ = false;
  absl::Duration reconnect_backoff_;
  absl::Time next_connect_attempt_ = absl::InfinitePast();
  std::optional<host::HostMemory> last_host_;
  // When last_host_ was read (deps_.clock), and whether the last Collect's read failed, which
  // makes last_host_ stale: no guest is shrunk on it (Apply).
  absl::Time last_host_at_ = absl::InfinitePast();
  bool host_stale_ = false;
  // When a survey last read the guests' disk reads (deps_.clock): the next one is due
  // block_stats_interval later.
  absl::Time last_block_read_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> published_ ABSL_GUARDED_BY(mu_);
  // The stored controls and configured host settings published_ was built from, and the last
  // view with later writes laid over it (Published()), with what it was made of.
  std::shared_ptr<const OverrideStore::Snapshot> published_controls_ ABSL_GUARDED_BY(mu_);
  HostBase published_base_ ABSL_GUARDED_BY(mu_);
  mutable std::shared_ptr<const plimsoll::v1::ListGuestsResponse> overlaid_ ABSL_GUARDED_BY(mu_);
  mutable std::shared_ptr<const OverrideStore::Snapshot> overlaid_for_ ABSL_GUARDED_BY(mu_);
  mutable std::shared_ptr<const plimsoll::v1::ListGuestsResponse> overlaid_of_ ABSL_GUARDED_BY(mu_);
  WakeGate gate_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ActiveReclaim> pending_reclaims_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> stopped_hints_ ABSL_GUARDED_BY(mu_);
  // Balloon sizes from events since the last tick or fold, by uuid (the last one wins), and the
  // earliest real time they may be folded (a min_wake_interval after the last view).
  absl::flat_hash_map<std::string, int64_t> balloon_changes_ ABSL_GUARDED_BY(mu_);
  absl::Time fold_not_before_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<LoopReconfig> pending_reconfig_ ABSL_GUARDED_BY(mu_);

  // Declared at the end, so destroyed before the rest: its workers are joined before the rest of
  // the loop goes (the calls use only the borrowed actuator and hypervisor). Loop thread only.
  std::unique_ptr<BalloonCalls> calls_;
  // Last, so that it is destroyed first: its thread wakes the loop (mu_, gate_).
  std::unique_ptr<BalloonPressureReader> pressure_reader_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_CONTROL_LOOP_H_
