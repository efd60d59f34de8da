// The page-cache-aware policy: take back each guest's cold page cache, protect its hot cache and
// its anonymous memory, and give memory back at once when a guest needs it. docs/policy.md tells
// why each rule is there; in short:
//
// Per guest (guest_signals.h reads the stats):
// - floor = hard demand + headroom (never below min_bytes): anon + unreclaimable with the agent;
//   without it, what MemAvailable does not cover plus fallback_cache_keep of the page cache;
//   while an allocation is under way it leads it by hard_lead_reports times its last rise (not
//   for a self-deflated guest), and the lead goes once the allocation is done.
// - allowance: the size the guest is known to be calm at, found by feedback, as Senpai does for
//   cgroups. While a new report shows stall and refaults under their targets and no refault rise,
//   the allowance is probed down by probe_fraction of the guest's size per probe_interval, but
//   only once the previous step has landed and been measured; memory the agent shows unused
//   above the working set goes faster (fast_take_fraction of it per step). When stall or refaults reach a
//   target, it is raised at once (multiplicatively, quadratic in the overshoot, at least the
//   refaults of refault_window up to the page cache held) and probing pauses for a cooldown
//   that doubles per episode (slow to take, fast to give); within an episode, one backoff per
//   measurement (a report that saw the balloon travel measured nothing), none while the
//   pressure falls. Within a cooldown unused memory still goes, down to a guard above the
//   measured edge. Refaults without stall count from the second report, and not while the guest
//   has a headroom of free memory (its kernel is not evicting: a refill, held on its first
//   report, then calm). Recovery holds at most recovery_reports. The first pressure after our
//   own step down below the last size measured calm goes back a step above that size (the
//   edge step; the law if that is not enough), and probes then stop there for
//   calm_reset_seconds (the edge stays found). Pressure measured the same at two sizes is
//   futile (memory does not relieve it; growth filled with cache that keeps nothing it
//   refaults shows it at once): the guest is then measured against that baseline, not the
//   plain targets.
// - a guest whose stats went stale or implausible is never shrunk, and after blind_grace_seconds
//   is given memory back step by step: what we took was based on numbers that no longer hold.
// - stuck, churning and self-deflated balloons (balloon_progress.h) get their target reset to
//   what they reached and are not inflated again before a retry time that doubles each time.
//
// Host (once per tick, with the guests' proposals):
// - free = min(guest budget - sum of actual, host MemAvailable - reserve), as for MoM.
// - Growth is granted from free memory only (squeezed: free before grow): hard demand (OOM,
//   self-deflation, rising anon) first, then pressure, then blind guests; within a class the
//   guest paying the most shares per page (ESX's rho) first. Only these may use the free margin.
// - Reclaim mode, with hysteresis: entered when free < low_free_fraction of the budget or host
//   PSI some avg10 >= host_psi_high; left when free >= high_free_fraction and PSI <= host_psi_low.
// - Reclaim rounds, each shared by shares with ESX's idle-memory tax (idle_tax.h), never below a
//   guest's floor, at most reclaim_step per guest per tick (scaled, not shifted, when it binds):
//   0. overcommit (the guests hold more than the budget or the host allows): from every guest
//      that follows its balloon, under pressure or not: the budget is a hard limit and shares
//      decide who loses;
//   1. the margin (up to high_free_fraction free in reclaim mode; host_psi_reclaim_fraction of the
//      budget per tick while host PSI is high): from calm guests not cooling down after a
//      backoff, never past the rho of a guest under pressure;
//   2. growth pressured guests were not granted: the same, down to the rho of the guest it is for;
//   3. growth hard demand was not granted: from any calm guest.
// - Outside an overcommit no guest is shrunk while under pressure, and none on stale or
//   implausible stats, nor before a report newer than its last target change has been seen.
//
// Memory kept between ticks, per guest in this policy's own slot type (policy_state.h): string-keyed
// doubles, times unix seconds, sizes bytes (to be replaced by a typed struct):
//   allow       allowance: the size the guest is believed to be calm at
//   probe_t     when the allowance was last probed down
//   move_t      when this policy last changed the guest's target
//   cool_until  no probing before this time (set by a backoff)
//   cool_len    the next cooldown's length (doubles per pressure episode, reset after
//               calm_reset_seconds)
//   ep_len      the current episode's cooldown length; pz: 1 while it lasts (from a pressured
//               report to the second calm one in a row); ep_calm: calm reports in a row since
//               its last pressured one; src: the signal source of the last decision (an episode
//               does not carry over a change); refill_n: refill reports in a row
//   hard grow_t hard demand at the last decision; when the target last grew for hard demand
//   grow_alloc  1 when that growth was for an allocation (not an OOM kill or self-deflation)
//   rise_t      when hard demand last rose past the slack (an allocation under way)
//   flat_n      new reports in a row since, without such a rise
//   calm_t      when the guest was last under pressure
//   blind_t     since when its stats have been stale or implausible (absent while they are good)
//   retry_at    no inflation before this time (stuck, churning, self-deflated)
//   retry_len   the next retry delay (doubles per event, reset when the balloon follows again)
//   state       0 ok, 1 stuck, 2 churning, 3 self_deflated; ev_t: when it last left 0
//   fz_size fz_sev fz_hard  the pressure baseline: the size a pressured guest was measured at,
//               its overshoot and hard demand there (fz_size 0 while the guest is calm)
//   fz_grown_t fz_grown_sev  when it was first measured grown past the baseline, and how much
//               pressure it showed then; fz_cache: its page cache at the baseline
//   pc rep_act  the page cache and the actual size at the last new report
//   fz_over     new reports in a row over futile_rise_ratio times the baseline
//   fz_calm     new reports in a row calm by the plain targets (a futile episode ends on two)
//   bo_sev      the overshoot of the episode's last backoff; sev: the last new report's
//   ep_size ep_stall ep_max  the size the episode began at; 1 if any of its reports stalled
//               over target; the largest size reached since (while cooling down)
//   bo_base bo_hard  the size the episode's last backoff grew from (its last pressured size),
//               and the hard demand then; bo_t: when it was decided; rec_n: reports
//               held as recovery since
//   calm_act calm_hard  the size the guest was last measured calm at (landed, report newer
//               than our last move), and its hard demand then
//   edge_to edge_t edge_hard  where the last edge step put the guest, when, and its hard demand
//               then: probes stop there for calm_reset_seconds while hard demand stays put
//   lead        how far the floor leads an allocation under way (hard_lead_reports)
//   rf_n        new reports in a row pressured by refaults alone (pressure from the second on)
//   smove_t     when the target last moved by half of futile_size_step or more
//   futile      1 when the guest's pressure did not respond to its size (see the params)
//   rep_t psi_tot mf swap_in oom stall refault   guest_signals.h SignalMemory
//   p_tgt p_act p_dir p_t p_start infl defl p_raise   balloon_progress.h ProgressMemory
// and in the host slot: reclaim (0/1, the hysteresis mode) and psi_latch (0/1).
#ifndef PLIMSOLL_POLICY_RULE_HEAP_POLICY_H_
#define PLIMSOLL_POLICY_RULE_HEAP_POLICY_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "policy/balloon_progress.h"
#include "policy/policy.h"

namespace plimsoll::policy {

struct PagecacheParams {
  // Demand.
  double headroom_min_bytes = 128.0 * (1 << 20);
  double headroom_fraction = 0.05;    // of max_bytes; the larger of the two is used
  double fallback_cache_keep = 0.25;  // libvirt-only guests: share of Cached kept as maybe hot

  // Feedback: probing down.
  double probe_interval_seconds = 5;
  double probe_fraction = 0.02;           // of actual per probe, agent guests
  double fallback_probe_fraction = 0.01;  // libvirt-only guests: no PSI, slower
  double probe_max_bytes = 256.0 * (1 << 20);
  // Memory the agent shows unused (above hard demand, headroom and Active(file), plus one more
  // headroom) is taken faster: this fraction of it per measured step, at most the reclaim step, while the guest is
  // quiet (overshoot under fast_take_quiet). Free pages and inactive cache that nobody refaults
  // cost nothing to give; the small probes are for the uncertain part, the working set.
  double fast_take_fraction = 0.5;
  double fast_take_quiet = 0.5;
  // Hard demand rising by more than this since the last report stops fast takes (an
  // allocation under way); real guests' slab and agent memory move by a few MiB on their own.
  double fast_take_demand_slack_bytes = 16.0 * (1 << 20);
  // Hard demand that rose by more than that slack since the previous report is an allocation
  // under way: the floor leads it by this many times the rise (reports arrive ~1-2 s apart;
  // a lab guest allocating 300 MiB rose 94 MiB, then 195 MiB, in two reports, and a floor that
  // only followed it let the guest reach its OOM path and deflate the balloon itself).
  double hard_lead_reports = 2;
  // ...but a rise over a longer gap between reports (stats back after a blind spell) is scaled
  // down to this interval's share: it is not a rate.
  double hard_lead_interval_seconds = 10;
  // An allocation is done once its hard demand has not risen past that slack for this long
  // and two reports (both calm): the lead it was given and did not use may go fast.
  double demand_settle_seconds = 5;
  // Pressure that memory does not relieve is not demand (a reader looping over a file larger
  // than the guest stalls and refaults at any size). A guest under pressure is measured at a
  // baseline size and again at least futile_size_step of max away, each after its balloon
  // landed and with the same hard demand: smaller (an overcommit share) with pressure no more
  // than futile_rise_ratio of the baseline's, or larger (backoffs) and, futile_settle_seconds
  // later, pressure still at least futile_same_ratio of the baseline's and of its own first
  // reading there, means futile. A futile guest is under pressure only above
  // futile_rise_ratio times that baseline on two reports in a row (and then not futile any
  // more); the baseline follows the upper envelope of the readings at its size.
  double futile_size_step_fraction = 0.05;
  double futile_rise_ratio = 1.5;
  double futile_same_ratio = 0.9;
  double futile_settle_seconds = 10;
  // The verdict comes before futile_settle_seconds when the growth is filled with page cache
  // (its cache grew by futile_fill_fraction of the growth since the baseline) and, on a later
  // report, the cache kept less than futile_kept_fraction of what the guest refaulted.
  double futile_fill_fraction = 0.8;
  // ...or by this fraction of it when the guest has less than a headroom free.
  double futile_fill_low_free_fraction = 0.5;
  double futile_kept_fraction = 0.1;
  // The pressure a guest may show: below both targets it is calm and may be probed; at or
  // above either it is under pressure and gets memory back (Senpai's single target).
  double stall_target_pct = 0.5;
  double refault_target_bytes_per_second = 1.0 * (1 << 20);

  // Feedback: backing off. With overshoot x = max(stall / stall_target, refault /
  // refault_target) >= 1, the guest grows by
  //   max(actual * min(backoff_max, backoff_min + backoff_gain * (x - 1)^2),
  //       refault * refault_window_seconds)
  double backoff_min_fraction = 0.01;
  double backoff_max_fraction = 0.5;
  double backoff_gain = 0.01;
  // Within one episode, a report whose overshoot is at most this share of the one that last
  // backed off, and not above the previous report's, is recovery under way (the cache refills
  // as it is read): held, not backed off again. Backing off on it compounded: a lab guest
  // 6 MiB short went 308 -> 462 -> 693 MiB in one second.
  double recovering_ratio = 0.5;
  // ...and only for this many reports after the last backoff: a cache refills within seconds.
  double recovery_reports = 4;
  // A report less than this after the previous one, which saw the balloon at another size (by
  // half of futile_size_step or more), measured the balloon's journey, not its new size:
  // pending like a report from before the move.
  double travel_report_seconds = 2;
  // During a cooldown the fast take of unused memory needs two calm reports in a row and stops
  // above the size the episode was last pressured at, by this share of what the guest held
  // above its hard demand there (the working-set estimate lags; taking back to the edge the
  // backoff just left would find it again every cooldown).
  double cooldown_take_margin = 0.25;
  double refault_window_seconds = 10;
  double oom_backoff_fraction = 0.25;     // at least this much after an OOM kill
  double self_deflate_margin = 0.05;      // above what a self-deflated guest took
  double cooldown_min_seconds = 30;
  double cooldown_max_seconds = 600;
  double calm_reset_seconds = 600;

  // Guests whose stats went stale or implausible after we may have shrunk them: after
  // blind_grace_seconds they get blind_return_fraction of max back per decision (never shrunk).
  double blind_grace_seconds = 30;
  double blind_return_fraction = 0.10;

  // Balloons that do not follow.
  ProgressParams progress;
  double retry_min_seconds = 60;
  double retry_max_seconds = 960;

  // Host.
  double low_free_fraction = 0.05;
  double high_free_fraction = 0.10;
  double host_psi_high = 10;
  double host_psi_low = 2;
  double host_psi_reclaim_fraction = 0.02;
  double idle_tax = 0.75;
  double reclaim_step_fraction = 0.25;
  double reclaim_step_min_bytes = 256.0 * (1 << 20);

  // Changes smaller than this are not worth a balloon operation.
  double min_change_bytes = 1.0 * (1 << 20);
};

// Immutable after construction: thread-safe. All memory between ticks is in PolicyState (keys
// above); guests that left the snapshot are dropped from next_state.
class PagecachePolicy : public Policy {
 public:
  explicit PagecachePolicy(PagecacheParams params = PagecacheParams()) : params_(params) {}

  // "pagecache".
  absl::string_view name() const override;

  // One decision per guest in snapshot order, each with a reason carrying its numbers and a
  // state ("ok", "stuck", "churning", "self_deflated"). A snapshot with guest_budget_bytes <= 0
  // holds every guest.
  Decisions Decide(const Snapshot& snapshot, const PolicyState& state) const override;

  const PagecacheParams& params() const { return params_; }

 private:
  const PagecacheParams params_;
};

// For tests: the value this policy remembers under `key` (header comment) for guest `uuid` in
// `state`, or nullopt.
std::optional<double> PagecacheMemoryValue(const PolicyState& state, absl::string_view uuid,
                                           absl::string_view key);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_RULE_HEAP_POLICY_H_
