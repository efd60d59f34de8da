#include "policy/pagecache_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "policy/balloon_progress.h"
#include "policy/burst_headroom.h"
#include "policy/guest_safety.h"
#include "policy/guest_signals.h"
#include "policy/history_deriver.h"
#include "policy/reason_format.h"
#include "policy/reclaim_pool.h"

namespace plimsoll::policy {
namespace {

// One row per tunable: its name in a spec, its field, the factor from the spec's unit to the
// field's, and the range the spec's value must be in. The parser and the list of names both
// read this table, so a tunable cannot be settable and unlisted (or the reverse). Some fields
// are constants, not tunables (docs/policy.md "Parameters"): the profile's bucket and memory,
// and the smallest move worth a balloon operation.
struct Row {
  const char* name;
  double* field;
  double scale, lo, hi;
};

std::vector<Row> Rows(PagecacheParams* p) {
  constexpr double kMibBytes = 1 << 20;
  return {
      {"headroom_min_mib", &p->law.headroom_min_bytes, kMibBytes, 0, 1e9},
      {"headroom_fraction", &p->law.headroom_fraction, 1, 0, 1},
      {"probe_fraction", &p->law.probe_fraction, 1, 0, 1},
      {"probe_interval_s", &p->law.probe_interval_seconds, 1, 0, 1e6},
      {"stall_target_pct", &p->law.stall_target_pct, 1, 0, 100},
      {"refault_target_mib_s", &p->law.refault_target_bytes_per_second, kMibBytes, 0, 1e9},
      {"backoff_fraction", &p->law.backoff_fraction, 1, 0, 1},
      {"cooldown_min_s", &p->law.cooldown_min_seconds, 1, 0, 1e6},
      {"cooldown_max_s", &p->law.cooldown_max_seconds, 1, 0, 1e7},
      {"futile_ratio", &p->law.futile.ratio, 1, 0, 100},
      {"profile_ratio", &p->law.profile.ratio, 1, 0, 100},
      {"burst_window_s", &p->law.burst.window_seconds, 1, 0, 1e7},
      {"follow_retry_s", &p->law.follow.retry_seconds, 1, 0, 1e7},
      {"edge_window_s", &p->law.edge.window_seconds, 1, 0, 1e7},
      {"idle_tax", &p->share.idle_tax, 1, 0, 0.99},
      {"step_fraction", &p->share.step_fraction, 1, 0, 1},
      {"blind_after_s", &p->blind_after_seconds, 1, 0, 1e7},
  };
}

// b_i of a guest costed by RSS (reclaim_pool.h): its largest burst of hard demand per report
// and of RSS per decision within the window, and at least its headroom.
double PoolBurst(const GuestView& g, const LawMemory& m, const LawParams& law) {
  return std::max({m.burst.burst_bytes, m.rss_rise.burst_bytes, LawHeadroom(g, law)});
}

// Drops the memory of guests that are not in the snapshot.
void ForgetAbsentGuests(const Snapshot& snapshot, absl::flat_hash_map<std::string, StateSlot>* memory) {
  absl::flat_hash_set<absl::string_view> present;
  present.reserve(snapshot.guests.size());
  for (const GuestView& g : snapshot.guests) present.insert(g.uuid);
  absl::erase_if(*memory, [&](const auto& entry) { return !present.contains(entry.first); });
}

}  // namespace

absl::Status SetPagecacheParam(absl::string_view name, double value, PagecacheParams* params) {
  for (const Row& r : Rows(params)) {
    if (name != r.name) continue;
    if (!(value >= r.lo && value <= r.hi)) {
      return absl::InvalidArgumentError(absl::StrCat("pagecache parameter ", name, "=", value,
                                                     " is outside [", r.lo, ", ", r.hi, "]"));
    }
    *r.field = value * r.scale;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown pagecache parameter \"", name,
                                                 "\"; known: ", absl::StrJoin(PagecacheParamNames(), ", ")));
}

std::vector<std::string> PagecacheParamNames() {
  PagecacheParams unused;
  std::vector<std::string> names;
  for (const Row& r : Rows(&unused)) names.push_back(r.name);
  return names;
}

absl::StatusOr<PagecacheParams> ParsePagecacheParams(absl::string_view spec) {
  PagecacheParams params;
  for (absl::string_view item : absl::StrSplit(spec, ':', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    double value = 0;
    if (eq == absl::string_view::npos || !absl::SimpleAtod(item.substr(eq + 1), &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pagecache parameter \"", item, "\" is not name=number"));
    }
    if (absl::Status s = SetPagecacheParam(item.substr(0, eq), value, &params); !s.ok()) return s;
  }
  return params;
}


absl::string_view PagecachePolicy::name() const { return name_; }

Decisions PagecachePolicy::Decide(const Snapshot& snapshot, PolicyState state) const {
  Decisions decisions;
  const size_t n = snapshot.guests.size();
  decisions.guests.reserve(n);
  const double now_s = absl::ToDoubleSeconds(snapshot.now - absl::UnixEpoch());
  // The next state is this one, updated in place (the law keeps no host memory): the memory of
  // guests in the snapshot carries on, that of guests no longer in it goes.
  decisions.next_state.guests = std::move(state.guests);
  auto& memory_of = decisions.next_state.guests;
  if (snapshot.host.guest_budget_bytes <= 0) {
    ForgetAbsentGuests(snapshot, &memory_of);
    const std::string why =
        absl::StrCat("pagecache: hold guest_budget_bytes=", snapshot.host.guest_budget_bytes);
    for (const GuestView& g : snapshot.guests) {
      decisions.guests.push_back(HoldDecision(g, why));
      // A kill counted now is the law's to see when it acts again (as for a held guest).
      if (g.history.has_value() && g.history->new_oom_kills.value_or(0) > 0) {
        StateSlot& slot = memory_of[g.uuid];
        LawMemory* m = slot.GetMutable<LawMemory>();
        if (m == nullptr) m = &slot.Set(LawMemory());
        m->unseen_oom_kills += *g.history->new_oom_kills;
      }
    }
    decisions.summary = absl::StrCat(why, " guests=", n);
    return decisions;
  }

  // Every guest's slot first, then no insertion: the pointers into the map stay valid.
  std::vector<LawMemory*> memories(n);
  const size_t slots_before = memory_of.size();
  memory_of.reserve(slots_before + n);
  for (size_t i = 0; i < n; ++i) {
    StateSlot& slot = memory_of[snapshot.guests[i].uuid];
    memories[i] = slot.GetMutable<LawMemory>();
    // A guest first seen, or a slot of another policy's: the law starts afresh on it.
    if (memories[i] == nullptr) memories[i] = &slot.Set(LawMemory());
  }
  // Slots that were there and are not the snapshot's guests: gone guests' memory (the usual
  // tick has none, and no set of the snapshot's uuids is made).
  const size_t created = memory_of.size() - slots_before;
  if (slots_before > n - created) ForgetAbsentGuests(snapshot, &memory_of);
  // In-guest reclaim (reclaim_pool.h): who is costed by RSS, whether their lent memory covers
  // the reserve (from the bursts measured up to now and the RSS read now), and who is pooled.
  std::vector<bool> costed(n, false);
  std::vector<bool> pooled(n, false);
  std::vector<bool> in_grace(n, false);  // pooled on the grace after it last qualified
  std::vector<double> agent_wait_left(n, 0);  // > 0: the balloon leaves its cold cache to its agent
  std::vector<bool> gave_back(n, false);  // its agent gave back a step since the brake's last take
  ReclaimPool pool;
  if (snapshot.host.in_guest_reclaim) {
    std::vector<PoolMember> members;
    for (size_t i = 0; i < n; ++i) {
      const GuestView& g = snapshot.guests[i];
      LawMemory& m = *memories[i];
      if (!CostedByRss(g, snapshot.host)) {
        m.rss_rise.hard_bytes.reset();  // a rise is measured between two readings
        continue;
      }
      costed[i] = true;
      UpdateBurst(static_cast<double>(*g.host_rss_bytes), now_s, params_.law.burst, &m.rss_rise);
      members.push_back({static_cast<double>(std::max(g.actual_bytes, g.target_bytes)),
                         static_cast<double>(*g.host_rss_bytes), PoolBurst(g, m, params_.law)});
    }
    pool = SizePool(members);
    for (size_t i = 0; i < n; ++i) {
      const GuestView& g = snapshot.guests[i];
      LawMemory& m = *memories[i];
      if (!costed[i] || !ReclaimsInGuest(g, snapshot.host) || UnsafeToActReason(g).has_value() ||
          ImplausibleStatsReason(g).has_value()) {
        m.pooled_s = -std::numeric_limits<double>::infinity();  // privileges end at once
        continue;
      }
      const double lent = static_cast<double>(std::max(g.actual_bytes, g.target_bytes) - *g.host_rss_bytes);
      if (pool.covers && lent >= LawStep(g, params_.law)) {
        pooled[i] = true;
        m.pooled_s = now_s;
      } else if (now_s >= m.pooled_s && now_s - m.pooled_s <= kPoolGraceSeconds) {
        // A pooled guest that allocates spends what it lent: its RSS rises to its balloon size
        // and the rise grows the reserve, so it stops lending a step and the pool may stop
        // covering, in the middle of the burst the pool is there for. Probed or given its burst
        // room back then, its balloon would take what it is faulting in, or deflate. (A clock
        // stepped back ends the grace.)
        pooled[i] = true;
        in_grace[i] = true;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const GuestView& g = snapshot.guests[i];
      LawMemory& m = *memories[i];
      if (costed[i]) {
        // Its agent gave back a step since the brake was last needed: the guest holds a step
        // less above its balloon than it did at its most since the last take. Judged with the
        // balloon landed: on the way RSS falls with the inflation before libvirt's size does.
        const double use = static_cast<double>(*g.host_rss_bytes - g.actual_bytes);
        const bool landed = std::abs(static_cast<double>(g.actual_bytes - g.target_bytes)) <=
                            LandingToleranceBytes(static_cast<double>(g.target_bytes));
        m.brake_use_peak = std::max(m.brake_use_peak, use);
        gave_back[i] = landed && use <= m.brake_use_peak - LawStep(g, params_.law);
      }
      if (pooled[i] || !AgentMayReclaim(g, snapshot.host)) {
        m.agent_wait_since_s.reset();
        if (!AgentMayReclaim(g, snapshot.host)) m.braked_bytes = 0;  // the balloon's own rules again
        continue;
      }
      // A clock stepped back starts the wait afresh rather than stretching it; a braked guest
      // whose agent reclaims waits until it is given back what was braked.
      const bool reclaims = ReclaimsInGuest(g, snapshot.host);
      // A brake its agent has not answered with a step within a wait after the last take, it
      // will not: a reader refilling its cache as fast as its agent drops it (a looping stream)
      // has only the balloon as its cap. Forgotten, its wait over, and not braked again for a
      // release interval: the law's own rules take it.
      if (reclaims && m.braked_bytes > 0 && !gave_back[i] && now_s - m.braked_s >= kAgentWaitSeconds) {
        m.braked_bytes = 0;
        m.brake_forgot_s = now_s;
        m.agent_wait_since_s = now_s - kAgentWaitSeconds;
      }
      if (!m.agent_wait_since_s.has_value() || now_s < *m.agent_wait_since_s || (reclaims && m.braked_bytes > 0)) {
        m.agent_wait_since_s = now_s;
      }
      agent_wait_left[i] = std::max(0.0, kAgentWaitSeconds - (now_s - *m.agent_wait_since_s));
      // A guest whose agent has not said it reclaims by the end of its wait (none at all, say)
      // will not give braked memory back in the guest: forgotten.
      if (!reclaims && agent_wait_left[i] <= 0) m.braked_bytes = 0;
    }
  }
  std::vector<ShareOutGuest> share(n);
  std::vector<std::optional<LawOutcome>> outcomes(n);
  std::vector<std::string> held(n);
  std::vector<bool> blind(n, false);  // held, and given its ceiling back out of free memory
  std::vector<bool> unconfirmed(n, false);  // hard demand the agent claims and libvirt does not show
  for (size_t i = 0; i < n; ++i) {
    const GuestView& g = snapshot.guests[i];
    LawMemory& memory = *memories[i];
    ShareOutGuest& s = share[i];
    s.actual = static_cast<double>(g.actual_bytes);
    s.target = static_cast<double>(g.target_bytes);
    s.ceiling = static_cast<double>(g.max_bytes);
    s.shares = static_cast<double>(g.shares);
    std::optional<std::string> unsafe = UnsafeToActReason(g);
    if (!unsafe.has_value()) unsafe = ImplausibleStatsReason(g);
    if (unsafe.has_value()) {
      // Held: never shrunk by the law nor by the host; what the law knew stays for when the
      // stats come back.
      held[i] = *unsafe;
      if (g.history.has_value()) memory.unseen_oom_kills += g.history->new_oom_kills.value_or(0);
      s.proposal = s.target;
      // Growth class none: granted only out of free memory, after every guest in pressure or
      // hard demand, and never taken from a neighbour; held, it is never shrunk by the host.
      // Blind by how long the host has watched its stats stand still (a paused or busy domain,
      // or libvirt lost, is not the guest hiding).
      blind[i] = params_.blind_after_seconds > 0 && (!g.has_stats || !g.stats_fresh) &&
                 g.stats_still_seconds >= params_.blind_after_seconds && s.target < s.ceiling;
      if (blind[i]) {
        s.proposal = s.ceiling;
        // Kept as a guest never seen is: when its stats come back the law starts from its size
        // then (a = A), not from the allowance it had before, which would cut it in one step.
        memory.allowance_bytes.reset();
        memory.asked_bytes.reset();
        memory.landed_hard_bytes.reset();
        memory.rise_report_s.reset();
        memory.rise_bytes = 0;
      }
      s.floor = static_cast<double>(FloorBytes(g));
      s.active = s.actual;
      s.may_shrink = false;
    } else {
      outcomes[i] = StepLaw(g, now_s, params_.law, &memory, pooled[i], agent_wait_left[i]);
      const LawOutcome& o = *outcomes[i];
      s.proposal = o.proposal_bytes;
      // The brake released (reclaim_pool.h): what was braked, out of free memory only (growth
      // of no class, after every guest in pressure or hard demand).
      const bool releasing = memory.braked_s < memory.release_from_s ||
                             now_s - memory.release_from_s >= kBrakeReleaseIntervalSeconds;
      // Given back only once its agent gave back a step: not a guest refilling its cache as fast
      // as it is reclaimed, for which the balloon is the only cap.
      if (memory.braked_bytes > 0 && pool.covers && costed[i] && ReclaimsInGuest(g, snapshot.host) &&
          now_s - memory.braked_s >= kBrakeSettleSeconds && releasing && gave_back[i]) {
        const double commitment = static_cast<double>(std::max(g.actual_bytes, g.target_bytes));
        s.proposal = std::max(s.proposal, std::min(s.ceiling, commitment + memory.braked_bytes));
      }
      s.floor = o.floor_bytes;
      s.active = std::min(s.actual, o.working_set_bytes);
      // Hard demand the neighbours would pay for needs libvirt to see it (guest_signals.h), and
      // they pay only for what libvirt sees: on the agent's word, up to libvirt's own hard
      // demand (actual - MemAvailable) plus the headroom. The room is the headroom alone: a
      // burst rests on the same claim. Without the cap, a liar squeezed to where its
      // MemAvailable is below the headroom (at its min, say) was believed in full, once: seen
      // on real guests, 288 MiB taken from a neighbour in one tick (test_lying_agent_e2e.py).
      const double room = LawHeadroom(g, params_.law);
      unconfirmed[i] = o.floor_bytes > s.actual && !HostSeesHardDemand(g, o.signals, room);
      // Whether the claim is confirmed or not: an OOM kill the agent counted makes the growth
      // hard even when libvirt does not see the floor (then the cap is under actual, and the
      // neighbours pay nothing).
      if (o.floor_bytes > s.actual && o.signals.source == SignalSource::kAgent) {
        s.hard_cap = s.actual - static_cast<double>(g.usable_bytes.value_or(0)) + room;
      }
      if (o.signals.new_oom_kills > 0 || (o.floor_bytes > s.actual && !unconfirmed[i])) {
        s.grow = GrowClass::kHardDemand;
      } else if (o.pressure >= 1 || unconfirmed[i]) {
        s.grow = GrowClass::kPressure;
      }
    }
  }

  // A costed guest costs at least its floor, whatever its RSS. The reserve again, with the
  // bursts this tick's reports measured: the budget keeps the larger.
  double reserve = 0;
  if (pool.covers) {
    double squares = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!costed[i]) continue;
      share[i].cost_cap = std::max(static_cast<double>(*snapshot.guests[i].host_rss_bytes), share[i].floor);
      const double b = PoolBurst(snapshot.guests[i], *memories[i], params_.law);
      squares += b * b;
    }
    reserve = std::max(pool.reserve, std::sqrt(squares));
    pool.reserve = reserve;
    decisions.pool_reserve_bytes = static_cast<int64_t>(reserve);
  } else {
    // Not covering, the budget counts balloon sizes and keeps no reserve apart; a guest on its
    // grace keeps no burst room in its law's floor, so the share-out does not take it below its
    // burst room (nor grows it: no deflate), and the line commits the bursts in full: the pool
    // stopped covering because they came together, so no sqrt(n) here.
    double bursts = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!in_grace[i]) continue;
      const double b = PoolBurst(snapshot.guests[i], *memories[i], params_.law);
      share[i].floor = std::max(share[i].floor, std::min(share[i].actual, share[i].floor + b));
      bursts += b;
    }
    decisions.pool_reserve_bytes = static_cast<int64_t>(bursts);
  }
  const ShareOutResult r = ShareOut(share, snapshot.host, params_.share, reserve);
  // The smallest take is a step, whoever asks for it: a floor that moves a few MiB with its
  // readings, and the budget round's share of an overcommit, moved targets down and up again
  // by a few MiB every tick (a 3 GiB guest's target went 1790/1794/1790 MiB for 37 ticks). What
  // is left untaken stays within the host's limit (and a landing tolerance): over it, every take
  // is made, however small, so a host is not left over its budget for a quieter balloon
  // (docs/policy.md, "The smallest take").
  std::vector<int64_t> targets(n);
  std::vector<std::string> small_take(n);
  double total = 0, room = 0;
  for (size_t i = 0; i < n; ++i) {
    const GuestView& g = snapshot.guests[i];
    targets[i] = outcomes[i].has_value() || blind[i] ? ClampTarget(g, r.targets[i]) : g.target_bytes;
    if (std::fabs(static_cast<double>(targets[i] - g.target_bytes)) < params_.min_change_bytes &&
        g.target_bytes >= FloorBytes(g)) {
      targets[i] = g.target_bytes;
    }
    total += ShareOutCost(share[i], static_cast<double>(targets[i]));
  }
  // Within a balloon's landing tolerance of the limit is at it: a limit set by the host's
  // MemAvailable moves a few MiB a tick, and each move would be taken and granted back.
  room = std::max(0.0, r.limit - total) + ProgressParams().tolerance_min_bytes;
  for (size_t i = 0; i < n; ++i) {
    const GuestView& g = snapshot.guests[i];
    const double take = static_cast<double>(g.target_bytes - targets[i]);
    const double step = LawStep(g, params_.law);
    if (!outcomes[i].has_value() || take <= 0 || take >= step || take > room || g.target_bytes > g.max_bytes) continue;
    small_take[i] = absl::StrCat(" take_under_step=", FormatMib(take), "<", FormatMib(step));
    targets[i] = g.target_bytes;
    room -= take;
  }
  for (size_t i = 0; i < n; ++i) {
    const GuestView& g = snapshot.guests[i];
    if (!outcomes[i].has_value()) {
      if (blind[i] && targets[i] > g.target_bytes) {
        GuestDecision d;
        d.uuid = g.uuid;
        d.target_bytes = targets[i];
        d.reason = absl::StrCat("pagecache: blind ", held[i], " >= blind_after_s=",
                                FormatFixed(params_.blind_after_seconds, 0), " granted=",
                                FormatMib(r.granted[i]), " -> ", FormatMib(targets[i]),
                                " | actual=", FormatMib(g.actual_bytes), " ceiling=",
                                FormatMib(g.max_bytes), " free=", FormatMib(r.free));
        decisions.guests.push_back(std::move(d));
        continue;
      }
      decisions.guests.push_back(HoldDecision(g, absl::StrCat("pagecache: hold ", held[i])));
      continue;
    }
    // The brake's ledger: a take by the budget from a guest whose agent may reclaim (it reclaims,
    // or has not reported yet: the first takes come before its first report) adds to it, a grant
    // gives back from it.
    std::string brake;
    LawMemory& bm = *memories[i];
    if (costed[i] && AgentMayReclaim(g, snapshot.host)) {
      const double moved = static_cast<double>(targets[i] - g.target_bytes);
      if (moved < 0 && r.taken[i] > 0 && now_s - bm.brake_forgot_s >= kBrakeReleaseIntervalSeconds) {
        bm.braked_bytes += std::min(r.taken[i], -moved);
        bm.braked_s = now_s;
        bm.brake_use_peak = static_cast<double>(*g.host_rss_bytes - g.actual_bytes);
      } else if (moved > 0 && bm.braked_bytes > 0) {
        brake = absl::StrCat(" released=", FormatMib(std::min(moved, bm.braked_bytes)));
        if (bm.release_from_s <= bm.braked_s) bm.release_from_s = now_s;  // a new release
        bm.braked_bytes = std::max(0.0, bm.braked_bytes - moved);
        // The law's allowance follows, or it would propose its old size again and take it back.
        bm.allowance_bytes = std::max(bm.allowance_bytes.value_or(0), static_cast<double>(targets[i]));
      }
      bm.braked_bytes = std::min(bm.braked_bytes, static_cast<double>(g.max_bytes - targets[i]));
      if (bm.braked_bytes > 0) absl::StrAppend(&brake, " braked=", FormatMib(bm.braked_bytes));
    }
    // What this decision asks, for the law to see next time whether it was made (StepLaw).
    memories[i]->asked_bytes = static_cast<double>(targets[i]);
    memories[i]->asked_from_bytes = static_cast<double>(g.target_bytes);
    const LawOutcome& o = *outcomes[i];
    GuestDecision d;
    d.uuid = g.uuid;
    d.state = o.state;
    d.floor_bytes = static_cast<int64_t>(o.floor_bytes);
    d.working_set_bytes = static_cast<int64_t>(o.working_set_bytes);
    if (o.signals.new_oom_kills > 0) {
      d.distress = "oom_kill";
    } else if (std::string_view(o.state) == "self_deflated") {
      d.distress = "self_deflated";
    } else if (o.pressure >= 1) {
      d.distress = absl::StrCat("pressure x=", FormatFixed(o.pressure, 2));
    }
    d.target_bytes = targets[i];
    d.reason = absl::StrCat("pagecache: ", o.reason);
    if (r.granted[i] > 0) absl::StrAppend(&d.reason, " granted=", FormatMib(r.granted[i]));
    if (r.taken[i] > 0) absl::StrAppend(&d.reason, " taken=", FormatMib(r.taken[i]));
    absl::StrAppend(&d.reason, small_take[i], brake);
    if (pooled[i]) {
      absl::StrAppend(&d.reason, " pooled rss=", FormatMib(*g.host_rss_bytes));
      if (in_grace[i]) {
        absl::StrAppend(&d.reason, " grace_left=",
                        FormatFixed(kPoolGraceSeconds - (now_s - memories[i]->pooled_s), 0), "s");
      }
    }
    if (unconfirmed[i]) {
      absl::StrAppend(&d.reason, " hard_demand_unconfirmed usable=",
                      g.usable_bytes.has_value() ? FormatMib(*g.usable_bytes) : "-");
    } else if (share[i].hard_cap < o.floor_bytes) {
      absl::StrAppend(&d.reason, " hard_demand_seen_to=", FormatMib(share[i].hard_cap),
                      " usable=", FormatMib(g.usable_bytes.value_or(0)));
    }
    absl::StrAppend(&d.reason, " -> ", FormatMib(d.target_bytes), " | src=",
                    SignalSourceName(o.signals.source), " actual=", FormatMib(g.actual_bytes),
                    " floor=", FormatMib(o.floor_bytes), " burst=", FormatMib(o.burst_bytes),
                    " ws=", FormatMib(o.working_set_bytes),
                    " allow=", FormatMib(o.proposal_bytes),
                    " stall_pct=", o.signals.stall_pct.has_value() ? FormatFixed(*o.signals.stall_pct, 2) : "-",
                    " refault=", o.signals.refault_bytes_per_s.has_value()
                                     ? absl::StrCat(FormatMib(*o.signals.refault_bytes_per_s), "/s")
                                     : "-",
                    " measured=", o.measured ? 1 : 0);
    if (o.disk_bytes_per_s.has_value()) {
      absl::StrAppend(&d.reason, " disk=", FormatMib(*o.disk_bytes_per_s), "/s");
    }
    if (o.rising_bytes > 0) absl::StrAppend(&d.reason, " rising=", FormatMib(o.rising_bytes));
    // With pressure_profile or a futile verdict, the x that decided is not the plain reading:
    // the plain one goes beside it, and the futile level it was measured against.
    if (std::isfinite(o.pressure) && std::fabs(o.raw_pressure - o.pressure) > 0.005) {
      absl::StrAppend(&d.reason, " raw_x=", FormatFixed(o.raw_pressure, 2));
    }
    if (o.futile_level > 0) absl::StrAppend(&d.reason, " futile=", FormatFixed(o.futile_level, 2));
    decisions.guests.push_back(std::move(d));
  }
  decisions.summary = absl::StrCat("pagecache: ", ShareOutSummary(r), " guests=", n);
  if (pool.members > 0) absl::StrAppend(&decisions.summary, " ", ReclaimPoolSummary(pool));
  decisions.pool_members = pool.members;
  decisions.pool_lent_bytes = static_cast<int64_t>(pool.lent);
  decisions.pool_covers = pool.covers;
  return decisions;
}

}  // namespace plimsoll::policy
