#include "policy/rule_heap_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "policy/balloon_progress.h"
#include "policy/guest_safety.h"
#include "policy/guest_signals.h"
#include "policy/idle_tax.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {
namespace {

enum StateCode { kOk = 0, kStuck = 1, kChurning = 2, kSelfDeflated = 3 };

const char* StateName(int code) {
  switch (code) {
    case kStuck:
      return "stuck";
    case kChurning:
      return "churning";
    case kSelfDeflated:
      return "self_deflated";
    default:
      return "ok";
  }
}

// This policy's memory is still string-keyed doubles (the keys are listed in the header); it
// lives in this policy's own slot type until the policy is retired.
struct GuestPolicyState {
  absl::flat_hash_map<std::string, double> values;
};

std::optional<double> Get(const GuestPolicyState& state, absl::string_view key) {
  auto it = state.values.find(key);
  if (it == state.values.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

double GetOr(const GuestPolicyState& state, absl::string_view key, double fallback) {
  return Get(state, key).value_or(fallback);
}

void Put(GuestPolicyState* state, absl::string_view key, const std::optional<double>& value) {
  if (value.has_value()) {
    state->values[std::string(key)] = *value;
  } else {
    state->values.erase(key);
  }
}

SignalMemory LoadSignals(const GuestPolicyState& s) {
  SignalMemory m;
  m.report_s = Get(s, "rep_t");
  m.psi_total_us = Get(s, "psi_tot");
  m.major_fault = Get(s, "mf");
  m.swap_in_kib = Get(s, "swap_in");
  m.oom_kill = Get(s, "oom");
  m.stall_pct = Get(s, "stall");
  m.refault_bytes_per_s = Get(s, "refault");
  return m;
}

void StoreSignals(const SignalMemory& m, GuestPolicyState* s) {
  Put(s, "rep_t", m.report_s);
  Put(s, "psi_tot", m.psi_total_us);
  Put(s, "mf", m.major_fault);
  Put(s, "swap_in", m.swap_in_kib);
  Put(s, "oom", m.oom_kill);
  Put(s, "stall", m.stall_pct);
  Put(s, "refault", m.refault_bytes_per_s);
}

ProgressMemory LoadProgress(const GuestPolicyState& s) {
  ProgressMemory m;
  m.target = Get(s, "p_tgt");
  m.actual = Get(s, "p_act");
  m.window_direction = static_cast<int>(GetOr(s, "p_dir", 0));
  m.window_start_s = GetOr(s, "p_t", 0);
  m.window_start_actual = GetOr(s, "p_start", 0);
  m.inflate_pages = Get(s, "infl");
  m.deflate_pages = Get(s, "defl");
  m.raise_s = GetOr(s, "p_raise", -1e18);
  return m;
}

void StoreProgress(const ProgressMemory& m, GuestPolicyState* s) {
  Put(s, "p_tgt", m.target);
  Put(s, "p_act", m.actual);
  Put(s, "p_dir", m.window_direction);
  Put(s, "p_t", m.window_start_s);
  Put(s, "p_start", m.window_start_actual);
  Put(s, "infl", m.inflate_pages);
  Put(s, "defl", m.deflate_pages);
  if (m.raise_s > -1e17) Put(s, "p_raise", m.raise_s);
}

// Everything one guest contributes to a tick, from assessment to decision.
struct Work {
  const GuestView* guest = nullptr;
  GuestPolicyState next;
  bool hold = false;   // no stats: held, takes no part in sharing out
  bool blind = false;  // stale or implausible stats: never shrunk, may get memory back
  std::string hold_reason;

  double actual = 0;
  double tolerance = 0;
  GuestSignals signals;
  double floor = 0;
  double working_set = 0;
  double allow = 0;
  double severity = 0;      // overshoot over the targets (a futile guest: over its baseline)
  double raw_severity = 0;  // overshoot over the plain targets
  bool futile = false;      // its pressure did not respond to its size
  bool fast = false;        // this decision takes unused memory above the working set
  bool demand_rising = false;  // hard demand rose past the slack since the previous report
  bool under_pressure = false;
  bool mild = false;
  bool in_retry = false;
  int state = kOk;
  std::string action = "hold";
  std::string action_detail;  // numbers behind the action, appended after it
  std::string event_detail;

  // Sharing out.
  double desired = 0;  // what the guest asks for before the host has its say
  // Growth class: 3 hard demand (OOM, self-deflation, floor rising), 2 pressure, 1 blind return,
  // 0 none of these (only from memory above the free margin).
  int grow_class = 0;
  double priority = 0;
  bool donor = false;       // calm and measured: may give memory for others and for the margin
  bool shrinkable = false;  // measured, following its balloon: may give in an overcommit
  bool cooling = false;     // backed off recently: not a donor except for hard demand
  bool hard_unconfirmed = false;  // a floor over actual on the agent's word, libvirt not agreeing
  // Hard demand the neighbours pay for, at most up to this size: on the agent's word, what
  // libvirt sees of it (actual - MemAvailable + headroom).
  double hard_cap = HUGE_VAL;
  double granted = 0;
  double taken = 0;
  double target = 0;  // the outcome, before clamping
};

double Seconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

std::string OptPct(const std::optional<double>& v) {
  return v.has_value() ? FormatFixed(*v, 2) : std::string("-");
}

std::string OptRate(const std::optional<double>& v) {
  return v.has_value() ? absl::StrCat(FormatMib(*v), "/s") : std::string("-");
}

class Decider {
 public:
  Decider(const PagecacheParams& params, const Snapshot& snapshot, const PolicyState& state)
      : p_(params), snapshot_(snapshot), state_(state), now_(Seconds(snapshot.now)) {}

  Decisions Run();

 private:
  const GuestPolicyState& Previous(absl::string_view uuid) const {
    const GuestPolicyState* m = FindGuestState<GuestPolicyState>(state_, uuid);
    return m == nullptr ? empty_ : *m;
  }
  const GuestPolicyState& PreviousHost() const {
    const GuestPolicyState* m = state_.host.Get<GuestPolicyState>();
    return m == nullptr ? empty_ : *m;
  }
  void Assess(const GuestView& guest, Work* w) const;
  void AssessBlind(const GuestView& guest, Work* w) const;
  void ShareOut(std::vector<Work>* works, Decisions* decisions) const;
  GuestDecision Finish(Work* w) const;

  const PagecacheParams& p_;
  const Snapshot& snapshot_;
  const PolicyState& state_;
  const double now_;
  const GuestPolicyState empty_;
};

void Decider::AssessBlind(const GuestView& guest, Work* w) const {
  // Stale or implausible stats: never shrink; after a grace period, hand back what may have
  // been taken, a step per decision, out of free memory like any growth.
  w->blind = true;
  w->action = "hold";
  // What was learnt before the gap about an episode does not carry over it.
  w->next.values.erase("pz");
  w->next.values.erase("bo_sev");
  // Nor what it showed about the guest's edge: sizes measured before the gap.
  for (const char* key : {"calm_act", "calm_hard", "edge_to", "edge_t", "edge_hard"}) {
    w->next.values.erase(key);
  }
  const double max_bytes = static_cast<double>(guest.max_bytes);
  const double blind_t = GetOr(w->next, "blind_t", now_);
  w->next.values["blind_t"] = blind_t;
  w->floor = static_cast<double>(FloorBytes(guest));
  w->working_set = max_bytes;
  w->allow = std::max(w->actual, static_cast<double>(guest.target_bytes));
  w->desired = std::clamp(w->allow, w->floor, max_bytes);
  if (now_ - blind_t >= p_.blind_grace_seconds && w->desired < max_bytes) {
    w->desired = std::min(max_bytes, w->desired + p_.blind_return_fraction * max_bytes);
    w->action = "blind_return";
    w->grow_class = 1;
  }
}

void Decider::Assess(const GuestView& guest, Work* w) const {
  const GuestPolicyState& prev = Previous(guest.uuid);
  w->guest = &guest;
  w->next = prev;
  w->actual = static_cast<double>(guest.actual_bytes);
  w->state = static_cast<int>(GetOr(prev, "state", kOk));
  std::optional<std::string> why = UnsafeToActReason(guest);
  if (!why.has_value()) {
    if (auto implausible = ImplausibleStatsReason(guest); implausible.has_value()) {
      why = absl::StrCat("stats_implausible ", *implausible);
    }
  }
  if (why.has_value()) {
    w->hold_reason = *why;
    // Without any stats, or without a size to start from, there is nothing to do but hold.
    if (!guest.has_stats || guest.actual_bytes <= 0 || guest.max_bytes <= 0) {
      w->hold = true;
      return;
    }
    AssessBlind(guest, w);
    return;
  }
  w->next.values.erase("blind_t");
  GuestPolicyState& next = w->next;
  const double max_bytes = static_cast<double>(guest.max_bytes);
  const double last_target = static_cast<double>(guest.target_bytes);

  // Signals and balloon progress.
  SignalMemory signal_memory;
  w->signals = ReadSignals(guest, now_, LoadSignals(prev), &signal_memory);
  const std::optional<double> previous_refault = LoadSignals(prev).refault_bytes_per_s;
  StoreSignals(signal_memory, &next);
  ProgressMemory progress = LoadProgress(prev);
  const ProgressVerdict verdict = CheckProgress(guest, now_, p_.progress, &progress);
  StoreProgress(progress, &next);
  w->tolerance = verdict.tolerance_bytes;
  const GuestSignals& s = w->signals;
  // Seconds since the previous report (0 on the first one).
  const double report_gap = s.report_s - LoadSignals(prev).report_s.value_or(s.report_s);

  // Demand: the floor never goes, the working set is what we believe is in use.
  const double headroom = std::max(p_.headroom_min_bytes, p_.headroom_fraction * max_bytes);
  // An allocation under way (hard demand rising between two reports): the floor leads it.
  double lead = GetOr(prev, "lead", 0);
  if (s.new_report) {
    // A rise over a long gap (stats back after a blind spell) is not a rate: the lead is
    // damped beyond hard_lead_interval_seconds between reports.
    const double rise = (s.hard_bytes - GetOr(prev, "hard", s.hard_bytes)) *
                        std::min(1.0, p_.hard_lead_interval_seconds / std::max(report_gap, 1e-3));
    // Not when the balloon deflated itself on this report, nor while the guest waits out the
    // retry after such a deflation: the guest took what it needed on its own, and a lead on
    // top (851 MiB for a guest needing 444) was then held for the whole retry delay. The lab's
    // idle guest deflated itself on a tick without a report and showed the rest of its
    // allocation on the next one, 0.2 s later: led to 851 MiB, it held that for 60 s.
    const bool self_deflated = verdict.event == ProgressEvent::kSelfDeflated ||
                               (w->state == kSelfDeflated && now_ < GetOr(prev, "retry_at", 0));
    w->demand_rising = s.source == SignalSource::kAgent && rise > p_.fast_take_demand_slack_bytes;
    lead = w->demand_rising && !self_deflated ? p_.hard_lead_reports * rise : 0;
  } else {
    w->demand_rising = lead > 0;
  }
  next.values["lead"] = lead;
  if (w->demand_rising) next.values["rise_t"] = now_;
  // New reports in a row without such a rise.
  if (s.new_report) next.values["flat_n"] = w->demand_rising ? 0 : GetOr(prev, "flat_n", 0) + 1;
  double floor_raw = s.hard_bytes + headroom + lead;
  double working_set = floor_raw;
  if (s.source == SignalSource::kAgent) {
    working_set = floor_raw + s.active_file_bytes;
  } else if (s.source == SignalSource::kLibvirt) {
    floor_raw += p_.fallback_cache_keep * s.cache_bytes;
    working_set = floor_raw;
  }
  w->floor = std::min(std::max(floor_raw, static_cast<double>(FloorBytes(guest))), max_bytes);
  w->working_set = std::clamp(working_set, w->floor, max_bytes);

  // Memory kept between ticks.
  const bool first_sight = !Get(prev, "allow").has_value();
  double allow = GetOr(prev, "allow", w->actual);
  double cool_until = GetOr(prev, "cool_until", 0);
  double cool_len = GetOr(prev, "cool_len", p_.cooldown_min_seconds);
  double calm_t = GetOr(prev, "calm_t", now_);
  double retry_at = GetOr(prev, "retry_at", 0);
  double retry_len = GetOr(prev, "retry_len", p_.retry_min_seconds);
  double probe_t = GetOr(prev, "probe_t", 0);
  const double move_t = GetOr(prev, "move_t", 0);

  // Balloons that do not follow: reset the target near what was reached, retry later.
  bool reset = false;
  const bool inflating = w->actual > last_target + w->tolerance;
  switch (verdict.event) {
    case ProgressEvent::kStuck:
      w->state = kStuck;
      reset = true;
      if (inflating) allow = w->actual;
      break;
    case ProgressEvent::kChurning:
      next.values["ep_stall"] = 1;  // a retry's cooldown, not a refault transient's
      w->state = kChurning;
      reset = true;
      allow = w->actual;
      cool_until = now_ + cool_len;
      cool_len = std::min(2 * cool_len, p_.cooldown_max_seconds);
      break;
    case ProgressEvent::kSelfDeflated:
      next.values["ep_stall"] = 1;
      w->state = kSelfDeflated;
      reset = true;
      // The retry time keeps inflation away; a cooldown on top kept even the probes that end
      // the retry (a lab guest held 250 MiB it did not use for 70 s after its retry time).
      allow = std::min(max_bytes, w->actual * (1 + p_.self_deflate_margin));
      calm_t = now_;
      break;
    case ProgressEvent::kNone:
      break;
  }
  if (reset) {
    retry_at = now_ + retry_len;
    retry_len = std::min(2 * retry_len, p_.retry_max_seconds);
    w->event_detail = verdict.detail;
    w->action = "reset";
    next.values["ev_t"] = now_;
  } else if (w->state != kOk && now_ >= retry_at &&
             (verdict.arrived || (std::fabs(w->actual - last_target) <= w->tolerance &&
                                  move_t > GetOr(prev, "ev_t", 0) && move_t >= retry_at))) {
    // The balloon followed a target again after its retry time: trust it again. A probe smaller
    // than the tolerance is "there" before it moves, so a target set since the event and met
    // counts too: a lab guest otherwise stayed self_deflated, never taken fast, for good.
    w->state = kOk;
    retry_len = p_.retry_min_seconds;
  }
  w->in_retry = now_ < retry_at;

  // Pressure, against Senpai-style targets.
  const double stall = s.stall_pct.value_or(0);
  const double refault = s.refault_bytes_per_s.value_or(0);
  // A guest with a headroom of free memory is not short of memory: its kernel evicts page cache
  // only once free memory is down to its watermarks (a few MiB), so what it reads back now was
  // evicted before (a cache refilling after a backoff, files dropped at boot), and more memory
  // would not lower it. Its refaults hold it (no probe), they do not back it off. The lab's hot
  // guest, at 808 MiB with 16 MiB of anon and 145 MiB of cache, reported 774 MiB/s of refaults
  // without stall on its agent's second report, was backed off to its max, and held there 30 s.
  // Stall and OOM kills count whatever the free memory.
  const bool free_headroom =
      guest.unused_bytes.has_value() && static_cast<double>(*guest.unused_bytes) >= headroom;
  const double refault_severity = refault / p_.refault_target_bytes_per_second;
  const bool refill = free_headroom && refault_severity >= 1 &&
                      stall < p_.stall_target_pct && s.new_oom_kills == 0;
  const double raw_severity =
      std::max(stall / p_.stall_target_pct, free_headroom ? 0.0 : refault_severity);
  w->severity = raw_severity;
  // Does the pressure respond to the guest's size? Compared only on measurements taken after
  // the balloon landed, at sizes far enough apart to matter.
  double fz_size = GetOr(prev, "fz_size", 0);
  double fz_sev = GetOr(prev, "fz_sev", 0);
  bool futile = GetOr(prev, "futile", 0) != 0;
  // Reports in a row over the futile line: real guests' PSI jumps 2x between two reports (a
  // TCG guest under a loaded host read 25%, 89%, 46%, 94%), so one reading over it is not yet
  // a rise.
  double fz_over = GetOr(prev, "fz_over", 0);
  if (s.new_report && fz_size > 0) {
    fz_over = raw_severity > p_.futile_rise_ratio * fz_sev ? fz_over + 1 : 0;
  }
  // Small moves do not void a measurement: under an overcommit a pressured guest is granted
  // its growth a few MiB per tick, and waiting for a report newer than every move meant a lab
  // guest was never measured at all.
  const bool measured_here = s.new_report && s.report_s > GetOr(prev, "smove_t", 0) && !reset &&
                             std::fabs(w->actual - last_target) <= w->tolerance;
  // Calm reports in a row (by the plain targets). A futile episode ends on the second: the lab's
  // looping reader read 0% stall on one report between two of 49% (spike reports ~1 s apart),
  // and that one reading, taken as the end of the episode, had the guest backed off from its
  // floor to 814 MiB and judged futile all over again.
  double fz_calm = GetOr(prev, "fz_calm", 0);
  if (s.new_report) fz_calm = raw_severity < 1 ? fz_calm + 1 : 0;
  next.values["fz_calm"] = fz_calm;
  const bool calm_here = measured_here && raw_severity < 1;
  if (s.new_oom_kills > 0 || (calm_here && (!futile || fz_calm >= 2))) {
    // An OOM kill is demand whatever the baseline says; calm by the plain targets ends the
    // episode.
    futile = false;
    fz_size = 0;
    next.values.erase("fz_grown_t");
    next.values.erase("fz_grown_sev");
  } else if (calm_here) {
    // A futile guest's first calm reading: calm, but the baseline stands until a second.
  } else if (measured_here) {
    const double apart = p_.futile_size_step_fraction * max_bytes;
    // Only like with like: pressure from a demand that changed in between (an allocation under
    // way) says nothing about the size, so the comparison starts over.
    if (std::fabs(s.hard_bytes - GetOr(prev, "fz_hard", s.hard_bytes)) > apart) {
      fz_size = 0;
      futile = false;
    }
    if (fz_size <= 0) {
      next.values["fz_hard"] = s.hard_bytes;
      next.values["fz_cache"] = s.cache_bytes;
      fz_size = w->actual;
      fz_sev = raw_severity;
    } else if (w->actual >= fz_size + apart) {
      // Grown since the baseline: did the memory help? That shows only slowly (a hot set
      // refills as it is read: the simulator's host_pressure had a recovering guest judged
      // futile at the first report and probed again at once, in a loop), so the verdict waits
      // futile_settle_seconds at the larger size and wants the pressure neither below the
      // baseline's nor falling.
      const double grown_t = GetOr(prev, "fz_grown_t", now_);
      const double grown_sev = GetOr(prev, "fz_grown_sev", raw_severity);
      // ...unless the growth is already full of page cache and, on a later report, what the
      // guest refaulted no longer adds to it: what it re-reads now pushes out what it read
      // before, so the growth is too small to hold it, and waiting adds nothing. (A hot set
      // refilling keeps what it refaults: its cache grows by it.) The lab's looping reader
      // filled 297 MiB of growth within a second and refaulted 500 MiB/s with its cache
      // flat, and spent the 10 s at its max all the same.
      // The growth is full when the cache grew by most of it, or by half of it with less than
      // a headroom free (its kernel is evicting again, whatever else took the rest): the lab's
      // looping reader, grown 643 -> 1024 MiB with 596 MiB of cache already, grew its cache by
      // 263 MiB only (69%), and spent the 10 s at its max all the same.
      const double refaulted = refault * report_gap;
      const bool filled =
          Get(prev, "fz_grown_t").has_value() && refaulted > 0 &&
          s.cache_bytes - GetOr(prev, "fz_cache", s.cache_bytes) >=
              (free_headroom ? p_.futile_fill_fraction : p_.futile_fill_low_free_fraction) *
                  (w->actual - fz_size) &&
          s.cache_bytes - GetOr(prev, "pc", s.cache_bytes) < p_.futile_kept_fraction * refaulted;
      if (now_ - grown_t >= p_.futile_settle_seconds || filled) {
        futile = raw_severity >= p_.futile_same_ratio * fz_sev &&
                 raw_severity >= p_.futile_same_ratio * grown_sev;
        next.values["fz_hard"] = s.hard_bytes;
        next.values["fz_cache"] = s.cache_bytes;
        fz_size = w->actual;
        fz_sev = raw_severity;
        next.values.erase("fz_grown_t");
        next.values.erase("fz_grown_sev");
      } else {
        next.values["fz_grown_t"] = grown_t;
        next.values["fz_grown_sev"] = grown_sev;
      }
    } else if (w->actual <= fz_size - apart) {
      // Shrunk since the baseline (an overcommit share, a probe of a futile guest): did it hurt?
      // The baseline stays at the larger size, so a slow drift down is compared with it too.
      if (fz_over == 0) futile = true;
      if (fz_over >= 2) futile = false;
    } else if (!futile) {
      // The same size: the baseline follows the upper envelope of the readings, so noise
      // under it does not lower the line.
      fz_sev = std::max(raw_severity, 0.8 * fz_sev + 0.2 * raw_severity);
    }
  }
  if (futile && GetOr(prev, "futile", 0) == 0) {
    // The backoffs that led here answered pressure memory does not relieve: their cooldown
    // has no edge to protect, and what they gave is not an allocation about to be filled.
    cool_until = now_;
    cool_len = p_.cooldown_min_seconds;
    next.values.erase("grow_t");
    // Nor was the size they started from an edge: the lab's looping reader, calm at 1024 MiB
    // at boot and stalled once the host's reclaim took it to 757 MiB, was given its max back
    // by an edge step, and that edge held it there (hold_edge) after it was judged futile.
    for (const char* key : {"edge_to", "edge_t", "edge_hard"}) next.values.erase(key);
  }
  bool futile_rising = false;
  if (futile && fz_sev > 0) {
    // Measured against its own baseline: only a rise above it is pressure we can relieve, and
    // only on a second reading in a row; the first one holds the guest where it is.
    w->severity = raw_severity / (p_.futile_rise_ratio * std::max(1.0, fz_sev));
    if (w->severity >= 1 && fz_over >= 2) {
      futile = false;
    } else if (w->severity >= 1) {
      futile_rising = true;
      w->severity = 0.99;
    }
  }
  next.values["fz_over"] = fz_over;
  w->futile = futile;
  w->raw_severity = raw_severity;
  next.values["fz_size"] = fz_size;
  next.values["fz_sev"] = fz_sev;
  next.values["futile"] = futile ? 1 : 0;
  const bool refault_rising = !futile && previous_refault.has_value() && s.new_report &&
                              refault > 2 * *previous_refault &&
                              refault >= 0.25 * p_.refault_target_bytes_per_second;
  // Refaults without stall are pressure on the second report in a row; the first only holds
  // the guest. After a large inflation a guest refaults the few pages of its own binaries it
  // lost (the lab's idle guest: 1.4 MiB/s with 17 MiB of page cache and no stall, once), and
  // taken as pressure that transient cooled it down for 30 s while it held 380 MiB it did not
  // use. Stall, an OOM kill or a futile guest's rise act at once, as before.
  // Only where a stall is measured: refaults are the one signal of a guest without PSI
  // (libvirt-only, or a kernel booted with psi=0), and there they act at once.
  const bool refault_only = !futile && w->severity >= 1 && s.source == SignalSource::kAgent &&
                            s.stall_pct.has_value() && stall < p_.stall_target_pct &&
                            s.new_oom_kills == 0;
  // An episode does not carry over a change of signal source, as it does not over a blind
  // spell: libvirt's major faults count first reads too, the agent's refaults do not, and the
  // lab's hot guest, pressured at boot on libvirt's 2.7 MiB/s of major faults, carried that
  // episode into its agent's first reports and was backed off on them.
  const bool same_source =
      GetOr(prev, "src", static_cast<double>(s.source)) == static_cast<double>(s.source);
  next.values["src"] = static_cast<double>(s.source);
  if (!same_source) {
    // Written now, not on the next new report: a change on a tick without one would otherwise
    // leave the old source's episode for the next tick to continue.
    for (const char* key : {"pz", "bo_sev", "ep_calm", "calm_act", "calm_hard", "edge_to",
                            "edge_t", "edge_hard"}) {
      next.values.erase(key);
    }
  }
  const bool in_episode = same_source && GetOr(prev, "pz", 0) != 0;
  double rf_n = same_source ? GetOr(prev, "rf_n", 0) : 0;
  if (s.new_report) rf_n = refault_only ? rf_n + 1 : 0;
  next.values["rf_n"] = rf_n;
  // Within an episode refaults alone are still pressure: a hot guest refilling after a backoff
  // read 0% stall and 42 MiB/s once, and that report, taken as a transient, ended the episode
  // so the next one (1.5% stall, falling) began a new one and backed off again.
  const bool refault_transient = refault_only && rf_n < 2 && !in_episode;
  w->under_pressure = (w->severity >= 1 && !refault_transient) || s.new_oom_kills > 0;
  // A refill holds the guest on its first report only: then the free memory above the
  // headroom is taken like any unused memory, and once it is gone the refaults are pressure.
  // Held for as long as it refaulted, a guest with its memory free was never a donor.
  double refill_n = same_source ? GetOr(prev, "refill_n", 0) : 0;
  if (s.new_report) refill_n = refill ? refill_n + 1 : 0;
  next.values["refill_n"] = refill_n;
  w->mild = !w->under_pressure &&
            (refault_rising || futile_rising || refault_transient || (refill && refill_n < 2));
  if (w->under_pressure) calm_t = now_;
  if (now_ - calm_t >= p_.calm_reset_seconds) cool_len = p_.cooldown_min_seconds;

  // An episode ends on its second calm report in a row, not its first: spike reports come
  // ~0.5 s apart, and one calm one between two pressured ones is noise. The lab's idle guest
  // at its edge read 35%, 0% (0.6 s later), 17% (0.3 s later): the 0% ended the episode, and
  // the 17% began a new one with a fresh +50% backoff (704 -> 1024 MiB).
  const bool continuing = in_episode;
  // After a calm report within the episode, the pressure is compared with the episode's last
  // backoff only: any pressure is "above" the calm report's.
  // Recovery is a matter of a few reports (the cache refills as it is read): pressure still
  // there after recovery_reports of them is not enough memory, whatever its trend. Without the
  // bound, a guest reading 20% after a backoff at 40%, flat or between calm reports, was held
  // for good.
  const bool after_calm = GetOr(prev, "ep_calm", 0) > 0;
  const bool recovering =
      continuing && s.new_oom_kills == 0 &&
      w->severity <= p_.recovering_ratio * GetOr(prev, "bo_sev", 0) &&
      (after_calm || w->severity <= GetOr(prev, "sev", 0)) &&
      GetOr(prev, "rec_n", 0) < p_.recovery_reports;
  // Within an episode, one measurement per backoff, as for probes: a report whose interval
  // began before our last move, or with the balloon still travelling, measured the size before
  // the memory arrived. Spike reports come ~0.5 s apart, faster than a balloon and a refilling
  // cache answer: the lab's hot guest went 304 -> 455 -> 683 -> 1024 MiB in 1.1 s on them.
  const bool landed = std::fabs(w->actual - last_target) <= w->tolerance;
  // A report sampled after our last move, with the balloon landed: it measured this size.
  const bool measured_size = s.new_report && landed && s.report_s > move_t && !reset;
  if (w->under_pressure && s.new_report && continuing && stall >= p_.stall_target_pct) {
    next.values["ep_stall"] = 1;
  }
  // Nor did a short report interval during which the balloon travelled far (the previous
  // report saw it elsewhere): a balloon moves hundreds of MiB in well under a second, so such
  // an interval measured mostly the journey. The lab's idle guest, backed off 463 -> 705 MiB,
  // read 6% stall on the report 0.8 s later that saw it arrive, and was backed off again to
  // 1024 MiB. A longer interval was spent mostly at the new size and counts.
  const bool travelled = report_gap < p_.travel_report_seconds &&
                         std::fabs(w->actual - GetOr(prev, "rep_act", w->actual)) >=
                             0.5 * p_.futile_size_step_fraction * max_bytes;
  // A report whose interval began before the episode's last backoff measured the size before
  // it, however small the backoff was: an edge step of 7 MiB, then a report 0.6 s later with
  // the same refault rate (the agent's rate spans the backoff) was backed off by the law.
  const double prev_report_s = LoadSignals(prev).report_s.value_or(-1e18);
  const bool pending = continuing && s.new_oom_kills == 0 &&
                       (!landed || travelled || prev_report_s < GetOr(prev, "smove_t", 0) ||
                        prev_report_s < GetOr(prev, "bo_t", 0));
  if (w->under_pressure && s.new_report && verdict.event == ProgressEvent::kSelfDeflated) {
    // The pressure that made the guest deflate its balloon: it took what it needed itself. A
    // backoff on top (+50% of what it reached) was held for the whole retry delay. The episode
    // that follows is measured from here, not against an older backoff.
    next.values.erase("bo_sev");
    next.values["bo_base"] = w->actual;
  } else if (w->under_pressure && s.new_report && (recovering || pending)) {
    // The memory given helps and the cache refills, or it is still on its way: wait for it,
    // the cooldown runs on.
    cool_until = std::max(cool_until, now_ + GetOr(next, "ep_len", cool_len));
    w->action = recovering ? "hold_recovering" : "hold_pending";
    if (recovering) next.values["rec_n"] = GetOr(prev, "rec_n", 0) + 1;
  } else if (w->under_pressure && s.new_report) {
    // Back off: give memory back now, multiplicatively, and stop probing for a while.
    const double base = std::max(w->actual, last_target);
    const double overshoot = std::max(0.0, w->severity - 1);
    const double fraction = std::clamp(p_.backoff_min_fraction + p_.backoff_gain * overshoot * overshoot,
                                       p_.backoff_min_fraction, p_.backoff_max_fraction);
    // A futile guest's refaults are not what more memory would hold (they did not fall when it
    // had more), so only the overshoot over its baseline counts.
    // The refault term is at most the page cache the guest holds (at least one headroom): a
    // reader re-reading a hot file at GB/s refaults at the speed it reads, not in proportion to
    // what is missing (the lab's hot guest, 6 MiB short with 145 MiB of cache, refaulted
    // 63 MiB/s: ten seconds of it asked for 631 MiB).
    const double refault_grow =
        futile || free_headroom ? 0.0
               : std::min(refault * p_.refault_window_seconds, std::max(s.cache_bytes, headroom));
    double grow = std::max(base * fraction, refault_grow);
    // Pressure that comes with hard demand rising is mostly the allocation itself: the floor
    // leads it (hard_lead_reports), and a full backoff on top counted it twice (the lab's idle
    // guest, 318 MiB of anon and 15 MiB of cache, was given 726 MiB and held there through its
    // retry delay).
    // Beyond the lead, what the pressure can still ask for is the cache the allocation
    // squeezes: at most the page cache the guest holds.
    if (w->demand_rising) grow = std::min(grow, s.cache_bytes);
    // The first pressure measured after our own step down, with hard demand not risen, answers
    // that step: the guest was measured calm one step up, so it goes back there and a step
    // more (at least backoff_min, at most what the law gives), not by the law's up to half of
    // its size. If that is not enough, the report measured there says so (after recovery_reports
    // at the latest) and the law applies. The lab's hot guest, calm at
    // 323 MiB and stalled at 310 MiB, was given 464 MiB and its cooldown guard then held it at
    // 384 MiB; the idle guest, calm at 469.5 and stalled at 461.8, was given 704 MiB.
    // The pressure often shows while the balloon is still on its way (a spike report 0.4 s
    // after the probe): the step is to the target, wherever the balloon is. Any step counts,
    // those inside the balloon's landing tolerance (16 MiB) too: a probe is ~6 MiB.
    const double calm_act = GetOr(prev, "calm_act", 0);
    const double stepped_to = std::min(w->actual, last_target);
    const bool edge_step = same_source && !continuing && !w->demand_rising &&
                           s.new_oom_kills == 0 && !futile && s.report_s > move_t &&
                           calm_act - stepped_to >= p_.min_change_bytes &&
                           s.hard_bytes <= GetOr(prev, "calm_hard", 0) +
                                               p_.fast_take_demand_slack_bytes;
    if (edge_step) {
      grow = std::min(grow, std::max(2 * calm_act - stepped_to - base,
                                     base * p_.backoff_min_fraction));
      w->action_detail = absl::StrCat(" edge_calm=", FormatMib(calm_act));
    }
    if (s.new_oom_kills > 0) grow = std::max(grow, base * p_.oom_backoff_fraction);
    allow = std::max(allow, std::min(max_bytes, base + grow));
    if (edge_step) {
      // Remembered: probes stop here (see edge_floor below).
      next.values["edge_to"] = allow;
      next.values["edge_t"] = now_;
      next.values["edge_hard"] = s.hard_bytes;
    }
    // One episode of pressure is one backoff for the cooldown, however many reports it lasts:
    // the cooldown runs from its last pressured report with the length of its first. Doubling
    // per report had a hot guest refilling its cache (pressured for ~30 s) cool down for the
    // 10-minute maximum after a single overshoot.
    const bool stalled = stall >= p_.stall_target_pct;
    if (!continuing) {
      next.values["ep_len"] = cool_len;
      next.values["ep_size"] = w->actual;
      next.values["ep_max"] = w->actual;
      next.values["ep_stall"] = stalled;
      // The doubling makes finding the edge again rare; an allocation's pressure found none
      // (the floor answers it), so it leaves the next cooldown as it was.
      if (!w->demand_rising) cool_len = std::min(2 * cool_len, p_.cooldown_max_seconds);
    } else if (stalled) {
      next.values["ep_stall"] = 1;
    }
    next.values["bo_sev"] = w->severity;
    // The size an allocation under way was pressured at is not the edge of a working set:
    // the demand outgrew it, and the floor moves with the demand. Kept as the cooldown's
    // edge, it held a lab guest 25% above a size its finished allocation no longer fitted
    // (612 MiB for 318 MiB of anon and 15 MiB of cache) for the rest of a 60 s cooldown.
    if (w->demand_rising) {
      next.values.erase("bo_base");
    } else {
      next.values["bo_base"] = base;
      next.values["bo_hard"] = s.hard_bytes;
    }
    cool_until = now_ + GetOr(next, "ep_len", cool_len);
    next.values["bo_t"] = now_;
    next.values["rec_n"] = 0;
    w->action = "backoff";
  } else if (!w->under_pressure && !w->mild && !reset && !first_sight && s.new_report &&
             !w->in_retry && std::fabs(w->actual - last_target) <= w->tolerance &&
             s.report_s > probe_t) {
    // Probe down: the previous step landed, was measured, and the guest stayed calm. Smaller
    // steps the closer it is to its targets, and inside what looks like its working set.
    const double from = std::min(allow, w->actual);
    const double fraction = s.source == SignalSource::kAgent ? p_.probe_fraction
                                                             : p_.fallback_probe_fraction;
    double step = fraction * w->actual * std::max(0.25, 1 - w->severity);
    if (from - step < w->working_set) step *= 0.5;
    step = std::min(step, p_.probe_max_bytes);
    bool due = now_ - probe_t >= p_.probe_interval_seconds - 1e-6;
    // What the agent shows unused above the working set goes faster, and without waiting for
    // the probe interval: one measured step per report.
    // The working set is an estimate (Active(file) lags, the kernel's own memory is only in
    // the headroom): above it plus one more headroom is surely unused. A lab guest re-reading a
    // 128 MiB file, taken fast down to its estimate (294 MiB), stalled 50% at once. A futile
    // guest's cache is of no use to it, so it goes down to the estimate.
    // The margin is for cache the estimate misses, so never more than the cache there is: an
    // idle guest with 16 MiB of cache after a 300 MiB allocation kept two headrooms (256 MiB)
    // above its anon for good.
    // Within a cooldown the size the episode was last pressured at is a measured edge, and the
    // cooldown keeps a guard above it: cooldown_take_margin of what the guest held there above
    // its hard demand (hard demand is counted on every report and the floor follows it; the
    // rest is what the edge leaves uncertain: 25% of its whole size held the lab's idle guest,
    // 318 MiB of anon and 15 MiB of cache, stalled at 464 MiB, at 580 MiB for a 60 s cooldown).
    // That guard replaces the margin for what the estimate misses: both stacked held the lab's
    // hot guest at 418 MiB, above its estimate and margin (401 MiB) and 34% above the 311 MiB
    // it had stalled at, for the cooldown.
    const double bo_base = GetOr(next, "bo_base", 0);
    const double edge_guard =
        now_ < cool_until && bo_base > 0
            ? bo_base + p_.cooldown_take_margin *
                            std::max(0.0, bo_base - GetOr(next, "bo_hard", 0))
            : 0.0;
    // An edge a probe found (edge_step) stays found: probes and takes stop a step above it for
    // calm_reset_seconds, while hard demand stays where it was (if it falls, so may the edge;
    // if it rises, the floor follows it and the edge is stale).
    // Probing on after the cooldown found it again at once, and each time cost the guest a
    // stall: the lab's hot guest, calm at 309 MiB, stalled at 303 MiB 43 s after it had at 302,
    // and its throughput dipped 10% for each.
    double edge_floor = 0;
    if (!w->futile && now_ - GetOr(next, "edge_t", -1e18) < p_.calm_reset_seconds &&
        std::fabs(s.hard_bytes - GetOr(next, "edge_hard", 0)) <= p_.fast_take_demand_slack_bytes) {
      edge_floor = GetOr(next, "edge_to", 0);
    } else {
      next.values.erase("edge_to");
      next.values.erase("edge_t");
      next.values.erase("edge_hard");
    }
    const double margin = w->futile || edge_guard > 0 ? 0.0 : std::min(headroom, s.cache_bytes);
    const double unused_above =
        from - std::max({w->working_set, w->floor, edge_guard, edge_floor}) - margin;
    // A futile guest's overshoot says nothing about its cache, only whether it rose over its
    // baseline, so calm is quiet enough for it.
    const double quiet = w->futile ? 1.0 : p_.fast_take_quiet;
    // Not while its demand grows or soon after it was given memory: memory just granted looks
    // unused until the allocation that asked for it catches up. An allocation has caught up
    // once its hard demand stopped rising for demand_settle_seconds and two reports, both
    // calm: the lead the floor gave it is then what it did not use (a lab guest's 300 MiB
    // allocation ended in 2 s; the 290 MiB of lead above its floor were held 30 s after).
    // Growth after an OOM kill or a self-deflation waits the cooldown: the memory a kill
    // freed looks unused too.
    const double since_growth = now_ - GetOr(next, "grow_t", -1e18);
    const bool allocation_done = GetOr(next, "grow_alloc", 0) != 0 && fz_calm >= 2 &&
                                 GetOr(next, "flat_n", 0) >= 2 &&
                                 now_ - GetOr(next, "rise_t", -1e18) >= p_.demand_settle_seconds;
    const bool settled_demand =
        (since_growth >= p_.cooldown_min_seconds || allocation_done) &&
        s.hard_bytes <= GetOr(prev, "hard", s.hard_bytes) + p_.fast_take_demand_slack_bytes;
    // Nor for a balloon that has not been following (stuck, churning): it is retried gently.
    if (s.source == SignalSource::kAgent && w->severity < quiet && settled_demand &&
        w->state == kOk && unused_above > step) {
      const double reclaim_step =
          std::max(p_.reclaim_step_min_bytes, p_.reclaim_step_fraction * w->actual);
      // Half of what is unused per step, but no less than a probe step: halving alone stalls
      // short of the mark (a lab guest stopped 13 MiB above it, its last half smaller than a
      // probe, and a cooldown then held it there).
      step = std::min(std::max(p_.fast_take_fraction * unused_above, step), reclaim_step);
      due = true;
      w->fast = true;
    }
    // A cooldown guards the edge of the working set a backoff found, so it stops the probes,
    // not the fast take of memory above that set: the lab's idle guest, given 833 MiB for a
    // 300 MiB allocation, kept 370 MiB it never touched for its whole 60 s cooldown.
    double lowest = w->floor;
    if (now_ < cool_until) {
      // Within a cooldown only unused memory goes, on two calm reports in a row, and never
      // below the guard above the size the episode was last pressured at: the working set
      // estimate lags, and a take back to the edge the backoff just left would find it again
      // every cooldown.
      if (!w->fast || fz_calm < 2) due = false;
      lowest = std::max(lowest, edge_guard);
    }
    const bool edge_binds = edge_floor > lowest && from - step < edge_floor;
    lowest = std::max(lowest, edge_floor);
    const double probed = std::max(lowest, from - step);
    if (due && edge_binds && probed >= allow) {
      w->action = "hold_edge";
      w->action_detail = absl::StrCat(" edge_floor=", FormatMib(edge_floor));
    }
    if (due && probed < allow) {
      allow = probed;
      probe_t = now_;
      w->action = w->fast ? "take_unused" : "probe";
    }
  } else if (w->under_pressure || w->mild) {
    w->action = "hold_pressure";
    // Holding means where it is: a balloon still inflating towards an older target stops there.
    if (w->mild && s.new_report && w->actual > last_target + w->tolerance) {
      allow = std::max(allow, w->actual);
    }
  }
  // The largest size the guest reached since its episode began: memory granted and taken back
  // within the cooldown was still granted.
  if (now_ < cool_until) next.values["ep_max"] = std::max(GetOr(next, "ep_max", 0), w->actual);
  if (!w->under_pressure && !w->mild && s.new_report && now_ < cool_until && fz_calm >= 2 &&
      GetOr(next, "ep_stall", 1) == 0 &&
      GetOr(next, "ep_max", HUGE_VAL) <= GetOr(next, "ep_size", 0) + w->tolerance) {
    // An episode of refaults without stall that passed on its own, at the size it began at:
    // no memory answered it, so there is no edge for the cooldown to protect. The lab's hot
    // guest refilled the cache an inflation had cost it (63 MiB/s, no stall, one report) and
    // then sat 30 s at 704 MiB with 145 MiB of cache.
    cool_until = now_;
  }
  // The episode: from a pressured report to the second calm one in a row. A refill report is
  // neither: it continues an episode (the cache refilling after its backoff) but does not end it.
  const double ep_calm =
      w->under_pressure || refill || !same_source
          ? 0
          : GetOr(prev, "ep_calm", 0) + (s.new_report ? 1 : 0);
  const bool episode =
      w->under_pressure || (continuing && (refill || ep_calm < 2));
  if (!w->under_pressure && !w->mild && s.new_report && !reset && !w->in_retry && !episode) {
    // Calm again without the growth a backoff asked for: it did not need it. Kept, the
    // request made the guest a grower, never a donor, for the whole cooldown, while a
    // pressured neighbour found no donor (the soak: 10-minute plateaus, one guest at 40% stall
    // next to a calm one holding 700 MiB of cache).
    allow = std::min(allow, std::max(last_target, w->actual));
  }
  const bool floor_driven = allow < w->floor;
  allow = std::clamp(allow, w->floor, max_bytes);
  if (floor_driven) w->action = "floor";
  w->allow = allow;

  // What the guest asks for.
  w->desired = allow;
  if (w->in_retry) {
    w->desired = w->state == kSelfDeflated ? std::max(allow, w->actual) : w->actual;
    if (w->state != kSelfDeflated && floor_driven) w->desired = std::max(w->actual, w->floor);
  }
  const bool grows = w->desired > w->actual + 0.5;
  // A floor the neighbours would pay for needs libvirt to see the demand (guest_signals.h):
  // on the agent's word alone the growth waits for free memory, like pressure's.
  // The room is the headroom alone: the lead an allocation under way adds rests on the same
  // claim.
  w->hard_unconfirmed =
      floor_driven &&
      !HostSeesHardDemand(guest, s, std::max(p_.headroom_min_bytes,
                                             p_.headroom_fraction * static_cast<double>(guest.max_bytes)));
  const bool hard = s.new_oom_kills > 0 || w->state == kSelfDeflated || (floor_driven && !w->hard_unconfirmed);
  // The neighbours pay only for what libvirt sees, whatever the agent's claim (AnonPages, or an
  // OOM kill it counted): a liar squeezed to where its MemAvailable is under the headroom would
  // otherwise be believed in full (seen on real guests with pagecache_law: 288 MiB in one tick).
  // A self-deflation is the host's own evidence (the balloon rose), so it is not capped.
  if (s.source == SignalSource::kAgent && w->state != kSelfDeflated) {
    w->hard_cap = w->actual - static_cast<double>(guest.usable_bytes.value_or(0)) +
                  std::max(p_.headroom_min_bytes, p_.headroom_fraction * static_cast<double>(guest.max_bytes));
  }
  // Unconfirmed hard demand is class 0: class 2's shortfall is reclaimed from calm neighbours.
  w->grow_class = !grows ? 0 : hard ? 3 : (w->under_pressure && !w->hard_unconfirmed) ? 2 : 0;
  w->priority = w->severity;
  w->cooling = now_ < cool_until;
  // Measured: a report newer than our last change of its target.
  const bool measured = s.report_s > move_t;
  w->shrinkable = !w->in_retry && measured && !reset;
  w->donor = w->shrinkable && !w->under_pressure && !w->mild;

  next.values["allow"] = allow;
  next.values["hard"] = s.hard_bytes;
  if (s.new_report) {
    next.values["pc"] = s.cache_bytes;
    next.values["rep_act"] = w->actual;
    next.values["pz"] = episode ? 1 : 0;
    next.values["ep_calm"] = ep_calm;
    next.values["sev"] = w->severity;
    if (!episode) next.values.erase("bo_sev");  // the episode is over
    if (measured_size && !w->under_pressure && raw_severity < 1) {
      // The last size the guest was measured calm at (see edge_step); a hold for refaults
      // rising under their target is calm there too.
      next.values["calm_act"] = w->actual;
      next.values["calm_hard"] = s.hard_bytes;
    }
  }
  next.values["cool_until"] = cool_until;
  next.values["cool_len"] = cool_len;
  next.values["calm_t"] = calm_t;
  next.values["retry_at"] = retry_at;
  next.values["retry_len"] = retry_len;
  next.values["probe_t"] = probe_t;
  next.values["state"] = w->state;
}

void Decider::ShareOut(std::vector<Work>* works, Decisions* decisions) const {
  const HostView& host = snapshot_.host;
  const double budget = static_cast<double>(host.guest_budget_bytes);
  double sum_actual = 0;
  for (const Work& w : *works) sum_actual += w.actual;
  const double host_room = static_cast<double>(host.mem_available_bytes) -
                           static_cast<double>(host.host_reserve_bytes) + sum_actual;
  const double limit = std::min(budget, host_room);  // what all guests together may hold
  const double free = limit - sum_actual;
  const double free_fraction = free / budget;

  // Hysteresis, remembered in the host slot.
  const GuestPolicyState& prev_host = PreviousHost();
  bool psi_latch = GetOr(prev_host, "psi_latch", 0) != 0;
  if (host.psi_some_avg10.has_value()) {
    if (*host.psi_some_avg10 >= p_.host_psi_high) psi_latch = true;
    if (*host.psi_some_avg10 <= p_.host_psi_low) psi_latch = false;
  } else {
    psi_latch = false;
  }
  bool reclaim = GetOr(prev_host, "reclaim", 0) != 0;
  if (free_fraction < p_.low_free_fraction || psi_latch) reclaim = true;
  if (free_fraction >= p_.high_free_fraction && !psi_latch) reclaim = false;
  GuestPolicyState& host_next = decisions->next_state.host.Set(GuestPolicyState());
  host_next.values["psi_latch"] = psi_latch;
  host_next.values["reclaim"] = reclaim;

  // Free before grow: growth comes out of memory that is free now. Hard demand first, then
  // pressure, then blind guests; within a class, the guest paying the most shares per page
  // (ESX's rho) first.
  double committed = 0;
  std::vector<Work*> growers;
  for (Work& w : *works) {
    if (w.hold) {
      committed += std::max(w.actual, static_cast<double>(w.guest->target_bytes));
      continue;
    }
    committed += w.actual;
    if (w.desired > w.actual + 0.5) growers.push_back(&w);
  }
  const auto rho_of = [](const Work* w) {
    return static_cast<double>(std::max<int64_t>(w->guest->shares, 1)) / std::max(w->desired, 1.0);
  };
  std::stable_sort(growers.begin(), growers.end(), [&](const Work* a, const Work* b) {
    if (a->grow_class != b->grow_class) return a->grow_class > b->grow_class;
    const double ra = rho_of(a);
    const double rb = rho_of(b);
    if (ra != rb) return ra > rb;
    return a->priority > b->priority;
  });
  double hard_shortfall = 0;
  double pressure_shortfall = 0;
  double pressure_rho = 0;  // the highest rho among pressured guests still short
  double granted_total = 0;
  for (Work* w : growers) {
    const double want = w->desired - w->actual;
    const double ceiling = w->grow_class > 0 ? limit : limit - p_.high_free_fraction * budget;
    const double grant = std::clamp(ceiling - committed, 0.0, want);
    committed += grant;
    granted_total += grant;
    w->granted = grant;
    w->target = w->actual + grant;
    const double short_by = want - grant;
    if (short_by <= 0.5) continue;
    if (w->grow_class == 3) hard_shortfall += std::min(short_by, std::max(0.0, w->hard_cap - w->target));
    if (w->grow_class == 2) {
      pressure_shortfall += short_by;
      pressure_rho = std::max(pressure_rho, rho_of(w));
    }
  }

  // Reclaim, in rounds. Each shares its amount by shares and idle tax (idle_tax.h), never below
  // a guest's floor; a guest gives at most reclaim_step per tick in all, and when that binds the
  // whole round is scaled down so the split stays proportional. What probes free anyway counts
  // first.
  // 0. overcommit: the guests' total is over what the budget and the host allow. Every guest
  //    that follows its balloon shares it, under pressure or not: the budget is a hard limit,
  //    and shares decide who loses in a contention.
  // 1. the free margin (reclaim mode) and host PSI: from calm guests not cooling down after a
  //    backoff, and never from one paying more per page (rho) than a guest under pressure.
  // 2. what pressured guests could not be granted: from the same guests, down to the rho of the
  //    guest it goes to.
  // 3. what hard demand (OOM, self-deflation, rising anon) could not be granted: from any calm
  //    guest.
  double probe_free = 0;
  std::vector<Work*> shrinkable;
  double protect_rho = HUGE_VAL;
  for (Work& w : *works) {
    if (w.hold) continue;
    const bool growing = w.desired > w.actual + 0.5;
    if (w.blind) {
      if (!growing) w.target = w.desired;  // never below where it is
      continue;
    }
    if (!growing) {
      w.target = std::min(w.desired, w.actual);
      probe_free += w.actual - w.target;
    }
    // A guest asking to grow takes part in an overcommit like any other (shares decide), but
    // is never a donor.
    if (w.shrinkable) shrinkable.push_back(&w);
    if (w.under_pressure || w.mild) {
      protect_rho = std::min(protect_rho, static_cast<double>(std::max<int64_t>(w.guest->shares, 1)) /
                                              std::max(w.actual, 1.0));
    }
  }
  const double overcommit = std::max(0.0, committed - limit);
  double margin = 0;
  if (reclaim) {
    margin += std::max(0.0, p_.high_free_fraction * budget - std::max(0.0, limit - committed));
  }
  if (psi_latch) margin += p_.host_psi_reclaim_fraction * budget;
  const double deficit = overcommit + margin + pressure_shortfall + hard_shortfall;
  double probe_left = probe_free;
  const auto after_probes = [&probe_left](double amount) {
    const double covered = std::min(amount, probe_left);
    probe_left -= covered;
    return amount - covered;
  };
  double taken_total = 0;
  enum class Who { kShrinkable, kDonors, kDonorsCooling };
  const auto round = [&](double amount, Who who_may, double ratio_cap) {
    if (amount <= 0) return;
    std::vector<ReclaimCandidate> candidates;
    std::vector<Work*> who;
    for (Work* w : shrinkable) {
      if (who_may != Who::kShrinkable && (!w->donor || w->desired > w->actual + 0.5)) continue;
      if (who_may == Who::kDonors && w->cooling) continue;
      ReclaimCandidate c;
      c.size = w->target;
      c.active = std::clamp(std::min(w->allow, w->working_set), w->floor, w->target);
      c.lowest = std::min(w->floor, w->target);
      c.shares = static_cast<double>(w->guest->shares);
      candidates.push_back(c);
      who.push_back(w);
    }
    std::vector<double> take = DistributeReclaim(candidates, amount, p_.idle_tax, ratio_cap);
    double scale = 1;
    for (size_t i = 0; i < who.size(); ++i) {
      const Work& w = *who[i];
      const double step = std::max(p_.reclaim_step_min_bytes, p_.reclaim_step_fraction * w.actual);
      const double room = std::max(0.0, w.target - std::max(w.floor, w.actual - step));
      if (take[i] > room) scale = std::min(scale, room / take[i]);
    }
    for (size_t i = 0; i < who.size(); ++i) {
      Work& w = *who[i];
      const double t = take[i] * scale;
      if (t <= 0) continue;
      w.taken += t;
      w.target -= t;
      taken_total += t;
      w.allow = std::min(w.allow, w.target);
      w.next.values["allow"] = w.allow;
      w.action = "reclaim";
    }
  };
  round(after_probes(overcommit), Who::kShrinkable, HUGE_VAL);
  round(after_probes(margin), Who::kDonors, protect_rho);
  round(after_probes(pressure_shortfall), Who::kDonors,
        std::min(protect_rho, pressure_rho > 0 ? pressure_rho : HUGE_VAL));
  round(after_probes(hard_shortfall), Who::kDonorsCooling, HUGE_VAL);
  const double to_reclaim = std::max(0.0, deficit - probe_free);

  decisions->summary = absl::StrCat(
      "pagecache: mode=", reclaim ? "reclaim" : "relaxed", " free=", FormatMib(free),
      " free_pct=", FormatFixed(100 * free_fraction, 1),
      " low_pct=", FormatFixed(100 * p_.low_free_fraction, 1),
      " high_pct=", FormatFixed(100 * p_.high_free_fraction, 1), " budget=", FormatMib(budget),
      " limited_by=", host_room < budget ? "host" : "budget",
      " host_psi=", OptPct(host.psi_some_avg10), " psi_latch=", psi_latch ? 1 : 0,
      " granted=", FormatMib(granted_total),
      " shortfall=", FormatMib(hard_shortfall + pressure_shortfall),
      " overcommit=", FormatMib(overcommit), " deficit=", FormatMib(deficit),
      " probe_free=", FormatMib(probe_free),
      " reclaimed=", FormatMib(taken_total),
      " unmet=", FormatMib(std::max(0.0, to_reclaim - taken_total)),
      " guests=", works->size(), " shrinkable=", shrinkable.size());
}

GuestDecision Decider::Finish(Work* w) const {
  const GuestView& guest = *w->guest;
  if (w->hold) {
    GuestDecision d = HoldDecision(guest, absl::StrCat("pagecache: hold ", w->hold_reason));
    d.state = StateName(w->state);
    absl::StrAppend(&d.reason, " state=", d.state);
    return d;
  }
  GuestDecision d;
  d.uuid = guest.uuid;
  d.target_bytes = ClampTarget(guest, w->target);
  if (w->blind) {
    // Never below the current target or actual size, whatever the arithmetic says.
    d.target_bytes = std::max(d.target_bytes, std::min(guest.target_bytes, guest.max_bytes));
    d.state = StateName(w->state);
    d.reason = absl::StrCat("pagecache: hold ", w->hold_reason, " action=", w->action);
    if (w->granted > 0) absl::StrAppend(&d.reason, " granted=", FormatMib(w->granted));
    absl::StrAppend(&d.reason, " -> ", FormatMib(d.target_bytes), " state=", d.state);
    if (d.target_bytes != guest.target_bytes) w->next.values["move_t"] = now_;
    return d;
  }
  if (std::fabs(static_cast<double>(d.target_bytes - guest.target_bytes)) < p_.min_change_bytes &&
      guest.target_bytes >= FloorBytes(guest)) {
    d.target_bytes = guest.target_bytes;
  }
  if (d.target_bytes != guest.target_bytes) w->next.values["move_t"] = now_;
  // The fast take waits after growth for hard demand only: memory granted to an allocation
  // looks unused until the allocation catches up, memory granted to refill a cache does not.
  if (d.target_bytes > guest.target_bytes && (w->grow_class == 3 || w->demand_rising)) {
    w->next.values["grow_t"] = now_;
    // Growth for an allocation alone may be taken back once the allocation is done.
    const bool allocation = w->signals.new_oom_kills == 0 && w->state != kSelfDeflated;
    w->next.values["grow_alloc"] = allocation ? 1 : 0;
  }
  if (std::fabs(static_cast<double>(d.target_bytes - guest.target_bytes)) >=
      0.5 * p_.futile_size_step_fraction * static_cast<double>(guest.max_bytes)) {
    w->next.values["smove_t"] = now_;
  }
  d.state = StateName(w->state);
  d.floor_bytes = static_cast<int64_t>(w->floor);
  d.working_set_bytes = static_cast<int64_t>(w->working_set);
  const GuestSignals& s = w->signals;
  d.distress = s.new_oom_kills > 0        ? std::string("oom_kill")
               : w->state == kSelfDeflated ? std::string("self_deflated")
               : w->under_pressure         ? absl::StrCat("pressure severity=", FormatFixed(w->severity, 2))
                                           : std::string();
  d.reason = absl::StrCat(
      "pagecache: src=", SignalSourceName(s.source), " actual=", FormatMib(w->actual),
      " hard=", FormatMib(s.hard_bytes), " cache=", FormatMib(s.cache_bytes),
      guest.unused_bytes.has_value() ? absl::StrCat(" free=", FormatMib(*guest.unused_bytes))
                                     : std::string(),
      " floor=", FormatMib(w->floor), " ws=", FormatMib(w->working_set),
      " allow=", FormatMib(w->allow), " stall_pct=", OptPct(s.stall_pct),
      " refault=", OptRate(s.refault_bytes_per_s), " severity=", FormatFixed(w->severity, 2),
      w->futile ? absl::StrCat(" futile=1 raw_severity=", FormatFixed(w->raw_severity, 2))
                : std::string(),
      " level=", w->under_pressure ? "pressured" : w->mild ? "rising" : "calm",
      " new_report=", s.new_report ? 1 : 0, " action=", w->action, w->action_detail);
  if (w->granted > 0) absl::StrAppend(&d.reason, " granted=", FormatMib(w->granted));
  if (w->desired > w->actual + 0.5 && w->granted + 0.5 < w->desired - w->actual) {
    absl::StrAppend(&d.reason, " wanted=", FormatMib(w->desired - w->actual));
  }
  if (w->taken > 0) absl::StrAppend(&d.reason, " taken=", FormatMib(w->taken));
  if (w->hard_unconfirmed) {
    absl::StrAppend(&d.reason, " hard_demand_unconfirmed usable=",
                    guest.usable_bytes.has_value() ? FormatMib(*guest.usable_bytes) : "-");
  } else if (w->grow_class == 3 && w->hard_cap < w->desired) {
    absl::StrAppend(&d.reason, " hard_demand_seen_to=", FormatMib(std::max(w->hard_cap, w->actual)),
                    " usable=", FormatMib(guest.usable_bytes.value_or(0)));
  }
  if (w->in_retry) absl::StrAppend(&d.reason, " retry_wait=1");
  absl::StrAppend(&d.reason, " -> ", FormatMib(d.target_bytes), " state=", d.state);
  if (!w->event_detail.empty()) absl::StrAppend(&d.reason, " ", w->event_detail);
  return d;
}

Decisions Decider::Run() {
  Decisions decisions;
  decisions.guests.reserve(snapshot_.guests.size());
  if (snapshot_.host.guest_budget_bytes <= 0) {
    const std::string why =
        absl::StrCat("pagecache: hold guest_budget_bytes=", snapshot_.host.guest_budget_bytes);
    for (const GuestView& guest : snapshot_.guests) {
      decisions.guests.push_back(HoldDecision(guest, why));
      auto it = state_.guests.find(guest.uuid);
      if (it != state_.guests.end()) decisions.next_state.guests[guest.uuid] = it->second;
    }
    decisions.next_state.host = state_.host;
    decisions.summary = absl::StrCat(why, " guests=", snapshot_.guests.size());
    return decisions;
  }
  std::vector<Work> works(snapshot_.guests.size());
  for (size_t i = 0; i < works.size(); ++i) Assess(snapshot_.guests[i], &works[i]);
  ShareOut(&works, &decisions);
  int counts[4] = {0, 0, 0, 0};
  int pressured = 0;
  int held = 0;
  for (Work& w : works) {
    decisions.guests.push_back(Finish(&w));
    ++counts[std::clamp(w.state, 0, 3)];
    pressured += w.under_pressure ? 1 : 0;
    held += (w.hold || w.blind) ? 1 : 0;
    decisions.next_state.guests[w.guest->uuid].Set(std::move(w.next));
  }
  absl::StrAppend(&decisions.summary, " pressured=", pressured, " held=", held,
                  " stuck=", counts[kStuck], " churning=", counts[kChurning],
                  " self_deflated=", counts[kSelfDeflated]);
  return decisions;
}

}  // namespace

absl::string_view PagecachePolicy::name() const { return "pagecache"; }

Decisions PagecachePolicy::Decide(const Snapshot& snapshot, const PolicyState& state) const {
  return Decider(params_, snapshot, state).Run();
}

std::optional<double> PagecacheMemoryValue(const PolicyState& state, absl::string_view uuid,
                                           absl::string_view key) {
  const GuestPolicyState* m = FindGuestState<GuestPolicyState>(state, uuid);
  if (m == nullptr) return std::nullopt;
  auto it = m->values.find(key);
  if (it == m->values.end()) return std::nullopt;
  return it->second;
}

}  // namespace plimsoll::policy
