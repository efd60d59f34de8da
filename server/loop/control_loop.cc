#include "server/loop/control_loop.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/mib_format.h"
#include "policy/guest_safety.h"
#include "server/agent/reclaim_names.h"
#include "server/api/control_validation.h"
#include "server/events/view_events.h"
#include "server/loop/view_arena.h"

namespace plimsoll::server {
namespace {

using plimsoll::v1::Direction;

plimsoll::v1::GuestRunState RunState(hypervisor::DomainRunState s) {
  switch (s) {
    case hypervisor::DomainRunState::kRunning:
      return plimsoll::v1::GUEST_RUN_STATE_RUNNING;
    case hypervisor::DomainRunState::kPaused:
      return plimsoll::v1::GUEST_RUN_STATE_PAUSED;
    case hypervisor::DomainRunState::kShutoff:
      return plimsoll::v1::GUEST_RUN_STATE_SHUTOFF;
    case hypervisor::DomainRunState::kCrashed:
      return plimsoll::v1::GUEST_RUN_STATE_CRASHED;
    case hypervisor::DomainRunState::kOther:
      return plimsoll::v1::GUEST_RUN_STATE_OTHER;
  }
  return plimsoll::v1::GUEST_RUN_STATE_OTHER;
}

const char* DirectionName(Direction d) {
  switch (d) {
    case plimsoll::v1::DIRECTION_INFLATE:
      return "inflate";
    case plimsoll::v1::DIRECTION_DEFLATE:
      return "deflate";
    default:
      return "hold";
  }
}

void SetSignal(plimsoll::v1::MemorySignal* s, int64_t bytes, double age) {
  s->set_bytes(bytes);
  s->set_provenance(plimsoll::v1::PROVENANCE_LIBVIRT);
  s->set_age_seconds(age);
}

// Makes the next Collect switch stats on again at once (new period, new connection).
void ResetStatsEnabled(TrackedGuest* g) {
  g->stats_enabled = false;
  g->enable_stats_retry_at = absl::InfinitePast();
  g->enable_stats_backoff = absl::ZeroDuration();
}

// Retry window for switching balloon stats on after a failure: 10 s doubling to 10 min.
constexpr absl::Duration kEnableStatsRetryMin = absl::Seconds(10);
constexpr absl::Duration kEnableStatsRetryMax = absl::Minutes(10);

// The view before the first tick: no guests, and a line that offers nothing and says why.
std::shared_ptr<const plimsoll::v1::ListGuestsResponse> InitialView() {
  auto view = std::make_shared<plimsoll::v1::ListGuestsResponse>();
  view->mutable_host_line()->set_stale(true);
  view->mutable_host_line()->set_stale_reason("no tick yet");
  view->mutable_host_line()->set_explanation("stale: no tick yet; offered=0MiB");
  return view;
}

}  // namespace

ControlLoop::ControlLoop(LoopDeps deps, LoopOptions options)
    : deps_(deps),
      options_(options),
      base_policy_(deps.policy),
      policy_(deps.policy),
      reserve_bytes_(options.host_reserve_bytes),
      budget_cap_(options.guest_memory_budget_bytes),
      overrides_(std::make_shared<const OverrideStore::Snapshot>()),
      tracker_(options.rules),
      offer_gate_(options.offer_hold),
      reconnect_backoff_(options.reconnect_min),
      published_(InitialView()),
      gate_(options.min_wake_interval),
      calls_(std::make_unique<BalloonCalls>(
          BalloonCalls::Options{options.balloon_workers, options.balloon_call_deadline}, deps.clock)) {
  BalloonPressureReader::Options reader;
  reader.enabled = options.balloon_pressure_stats;
  reader.inline_reads = options.balloon_workers == 0;
  pressure_reader_ = std::make_unique<BalloonPressureReader>(deps.hypervisor, reader, [this] { Wake(); });
}

void ControlLoop::PublishEvent(plimsoll::v1::WatchEvent event) {
  if (deps_.hub != nullptr) deps_.hub->Publish(std::move(event));
}

void ControlLoop::Reconfigure(LoopReconfig reconfig) {
  absl::MutexLock l(&mu_);
  if (pending_reconfig_.has_value()) {
    if (reconfig.policy == nullptr) reconfig.policy = std::move(pending_reconfig_->policy);
    if (reconfig.actuator == nullptr) reconfig.actuator = pending_reconfig_->actuator;
  }
  pending_reconfig_ = std::move(reconfig);
  gate_.Wake(absl::Now());
}

void ControlLoop::ApplyReconfig() {
  std::optional<LoopReconfig> r;
  {
    absl::MutexLock l(&mu_);
    r.swap(pending_reconfig_);
  }
  if (!r.has_value()) return;
  const LoopOptions& n = r->options;
  if (n.stats_period_seconds != options_.stats_period_seconds) {
    // Collect switches the new period on in every guest this tick.
    for (const auto& [uuid, g] : tracker_.guests()) ResetStatsEnabled(tracker_.Find(uuid));
  }
  options_.tick = n.tick;
  options_.stats_period_seconds = n.stats_period_seconds;
  options_.rules = n.rules;
  options_.host_reserve_bytes = n.host_reserve_bytes;
  options_.guest_memory_budget_bytes = n.guest_memory_budget_bytes;
  options_.log_every_decision = n.log_every_decision;
  options_.min_wake_interval = n.min_wake_interval;
  options_.block_stats_interval = n.block_stats_interval;
  options_.line = n.line;
  options_.offer_hold = n.offer_hold;
  offer_gate_.set_hold(n.offer_hold);
  {
    absl::MutexLock l(&mu_);
    gate_.set_min_interval(n.min_wake_interval);
  }
  // Floors are recomputed from the rules at the next Reconcile (this tick).
  tracker_.set_rules(n.rules);
  if (r->actuator != nullptr) deps_.actuator = r->actuator;
  if (r->policy != nullptr) {
    const std::string old(policy_->name());
    const bool base_in_force = policy_ == base_policy_;
    owned_base_policy_.swap(r->policy);  // r->policy now holds the previous owned base (if any)
    base_policy_ = owned_base_policy_.get();
    if (base_in_force) {
      policy_ = base_policy_;
      policy_state_ = {};
      if (old != policy_->name()) {
        PLOG_INFO << "policy switched from=" << old << " to=" << policy_->name()
                  << " by config reload; policy state reset";
      }
    } else {
      PLOG_INFO << "configured policy is now " << base_policy_->name() << "; the host policy's "
                << policy_->name() << " stays in force until it is cleared";
    }
  }
  // The previous owned base policy (in r) is destroyed here; nothing points to it any more.
}

void ControlLoop::ApplyHostPolicy() {
  if (deps_.overrides != nullptr) {
    std::shared_ptr<const OverrideStore::Snapshot> next = deps_.overrides->snapshot();
    if (next != overrides_) {
      // The guests' controls point into the snapshot being replaced; ComputeControls refills them.
      tracker_.ForEachGuest([](TrackedGuest& g) { g.control.override = nullptr; });
      overrides_ = std::move(next);
    }
  }
  const plimsoll::v1::HostPolicy& hp = overrides_->host;
  reserve_bytes_ = hp.has_host_reserve_bytes() ? hp.host_reserve_bytes() : options_.host_reserve_bytes;
  budget_cap_ = hp.has_guest_memory_budget_bytes() ? std::optional<int64_t>(hp.guest_memory_budget_bytes())
                                                   : options_.guest_memory_budget_bytes;
  if (hp.paused() != paused_) {
    paused_ = hp.paused();
    PLOG_WARNING << (paused_ ? "management paused" : "management resumed") << " by host policy (by=\""
                 << hp.updated_by() << "\")"
                 << (paused_ ? ": deciding and reporting, moving no balloon" : ": the policy acts again");
  }
  std::string wanted = hp.has_policy() ? hp.policy() : std::string(base_policy_->name());
  // A host policy stored by an earlier plimsolld may name a policy by its old name: the same
  // policy runs, and the operator is told once how to store its current name.
  if (std::optional<std::string> renamed = policy::RenamedPolicy(wanted); renamed.has_value()) {
    if (renamed_policy_ != wanted) {
      PLOG_WARNING << "host policy asks for policy \"" << wanted << "\", a deprecated name of \"" << *renamed
                   << "\" (the same policy), which runs; store the current name: plimsollctl host set --policy="
                   << *renamed;
      renamed_policy_ = wanted;
    }
    wanted = *std::move(renamed);
  }
  if (wanted == policy_->name()) {
    refused_policy_.clear();
    return;
  }
  const std::string old(policy_->name());
  if (wanted == base_policy_->name()) {
    policy_ = base_policy_;
    runtime_policy_.reset();
  } else {
    auto made = policy::MakePolicy(wanted);
    if (!made.ok()) {
      if (refused_policy_ != wanted) {
        PLOG_ERROR << "host policy asks for policy \"" << wanted << "\": " << made.status().message()
                   << "; keeping policy=" << old;
        refused_policy_ = wanted;
      }
      return;
    }
    runtime_policy_ = std::move(*made);
    policy_ = runtime_policy_.get();
  }
  refused_policy_.clear();
  policy_state_ = {};
  PLOG_INFO << "policy switched from=" << old << " to=" << policy_->name() << " by host policy (by=\""
            << hp.updated_by() << "\"); policy state reset";
}

void ControlLoop::NoteStopped(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  stopped_hints_.insert(uuid);
}

void ControlLoop::NoteBalloonChange(const std::string& uuid, int64_t actual_bytes) {
  {
    absl::MutexLock l(&mu_);
    balloon_changes_[uuid] = actual_bytes;
  }
  if (deps_.metrics != nullptr) deps_.metrics->CountBalloonChangeEvent();
}

int ControlLoop::FoldBalloonChanges() {
  absl::flat_hash_map<std::string, int64_t> changes;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> current;
  {
    absl::MutexLock l(&mu_);
    changes.swap(balloon_changes_);
    current = published_;
  }
  int changed = 0;
  for (const auto& [uuid, bytes] : changes) {
    TrackedGuest* g = tracker_.Find(uuid);
    if (g == nullptr || bytes <= 0) continue;
    // A size between ticks: a balloon that reached its target and came back up is seen rising.
    policy::NoteBalloonSize(static_cast<double>(bytes), static_cast<double>(g->target_bytes), &g->history.progress);
    if (g->actual_bytes != bytes) {
      g->actual_bytes = bytes;
      ++changed;
    }
  }
  if (changed == 0 || current == nullptr) return changed;
  // The published view is immutable: a copy with the new sizes replaces it. O(guests), which
  // is why folds are at most one per min_wake_interval; the watch stream has nothing to say
  // about sizes (view_events.h), so no event is published.
  auto view = std::make_shared<plimsoll::v1::ListGuestsResponse>(*current);
  int64_t sum = 0;
  for (plimsoll::v1::Guest& out : *view->mutable_guests()) {
    if (const TrackedGuest* g = tracker_.Find(out.uuid()); g != nullptr && out.actual_bytes() != g->actual_bytes) {
      out.set_actual_bytes(g->actual_bytes);
    }
    sum += out.actual_bytes();
  }
  view->mutable_host()->set_guests_actual_bytes(sum);
  if (deps_.metrics != nullptr) deps_.metrics->PublishBalloonSizes(view);
  absl::MutexLock l(&mu_);
  published_ = std::move(view);
  return changed;
}

void ControlLoop::AddReclaimHold(plimsoll::v1::ReclaimPlan plan, absl::Time until) {
  absl::MutexLock l(&mu_);
  pending_reclaims_.push_back({std::move(plan), until, {}});
  gate_.Wake(absl::Now());
}

void ControlLoop::UpdateReclaims(absl::Time now) {
  // Expire first, so a new hold is in force for at least one tick.
  for (auto it = reclaims_.begin(); it != reclaims_.end();) {
    if (now < it->until) {
      ++it;
      continue;
    }
    PLOG_INFO << "reclaim hold expired id=" << it->plan.id() << " guests=" << it->plan.items_size()
              << ": the policy decides again";
    plimsoll::v1::WatchEvent e;
    e.mutable_reclaim()->set_phase(plimsoll::v1::ReclaimEvent::PHASE_EXPIRED);
    *e.mutable_reclaim()->mutable_plan() = it->plan;
    PublishEvent(std::move(e));
    it = reclaims_.erase(it);
  }
  std::vector<ActiveReclaim> pending;
  {
    absl::MutexLock l(&mu_);
    pending.swap(pending_reclaims_);
  }
  for (ActiveReclaim& r : pending) {
    PLOG_INFO << "reclaim hold started id=" << r.plan.id() << " planned=" << FormatMib(r.plan.planned_bytes())
              << " guests=" << r.plan.items_size() << " until=" << absl::FormatTime(r.until);
    started_reclaims_.push_back(r.plan);
    reclaims_.push_back(std::move(r));
  }
}

void ControlLoop::ReleaseHold(const std::string& id, const std::string& uuid, const std::string& name,
                              const std::string& why) {
  for (ActiveReclaim& r : reclaims_) {
    if (r.plan.id() != id || !r.released.insert(uuid).second) continue;
    PLOG_WARNING << "reclaim hold released id=" << id << " guest=" << name << " uuid=" << uuid << ": " << why
                 << "; the policy decides for it again";
    if (deps_.metrics) deps_.metrics->CountReclaimRelease();
    plimsoll::v1::WatchEvent e;
    e.mutable_reclaim()->set_phase(plimsoll::v1::ReclaimEvent::PHASE_RELEASED);
    *e.mutable_reclaim()->mutable_plan() = r.plan;
    e.mutable_reclaim()->set_guest_uuid(uuid);
    e.mutable_reclaim()->set_why(why);
    PublishEvent(std::move(e));
  }
}

void ControlLoop::ComputeControls() {
  const bool any_override = !overrides_->guests.empty();
  tracker_.ForEachGuest([&](TrackedGuest& g) {
    const std::string& uuid = g.info.uuid;
    GuestControl& c = g.control;
    c = GuestControl();
    const int64_t memory = g.info.max_bytes;
    c.ceiling = memory;
    c.floor = g.min_bytes;
    if (auto it = any_override ? overrides_->guests.find(absl::AsciiStrToLower(uuid)) : overrides_->guests.end();
        it != overrides_->guests.end()) {
      const plimsoll::v1::GuestOverride& o = it->second;
      c.override = &o;
      if (o.has_max_bytes()) c.ceiling = std::min(o.max_bytes(), memory);
      if (o.has_min_bytes()) c.floor = o.min_bytes();
      if (o.has_shares()) c.shares = static_cast<int64_t>(o.shares()) * 10;
      if (o.has_pin_bytes()) c.pin = std::min(std::max(o.pin_bytes(), kMinGuestSizeBytes), memory);
      c.exclude = o.exclude();
    }
    c.floor = std::min(c.floor, c.ceiling);
    for (const ActiveReclaim& r : reclaims_) {
      for (const auto& item : r.plan.items()) {
        if (item.guest_uuid() != uuid || r.released.contains(uuid)) continue;
        if (!c.hold.has_value() || item.new_target_bytes() < c.hold->max_target_bytes()) {
          c.hold.emplace();
          c.hold->set_reclaim_id(r.plan.id());
          c.hold->set_max_target_bytes(item.new_target_bytes());
          c.hold->set_hold_until_unix_micros(absl::ToUnixMicros(r.until));
        }
      }
    }
  });
}

EnvelopeGuest ControlLoop::EnvelopeOf(const TrackedGuest& g) {
  EnvelopeGuest e;
  e.target_bytes = g.target_bytes;
  e.actual_bytes = g.actual_bytes;
  e.max_bytes = g.info.max_bytes;
  e.configured_floor_bytes = g.min_bytes;
  e.has_stats = g.has_stats;
  e.stats_fresh = g.stats_fresh;
  e.stats_seen_changing = g.last_update_changed_at.has_value();
  e.stats_age_seconds = g.stats_age_seconds;
  e.missed_listings = g.missed_listings;
  e.target_unsure = g.target_unsure;
  return e;
}

void ControlLoop::CountEnvelopeRule(EnvelopeRule rule) {
  if (deps_.metrics == nullptr) return;
  deps_.metrics->CountEnvelopeRule(rule);
  // The safety net's rules keep their own series too (plimsoll_safety_holds_total).
  switch (rule) {
    case EnvelopeRule::kNoStats:
      deps_.metrics->CountSafetyHold(SafetyRule::kNoStats);
      break;
    case EnvelopeRule::kStaleStats:
      deps_.metrics->CountSafetyHold(SafetyRule::kStaleStats);
      break;
    case EnvelopeRule::kHostStale:
      deps_.metrics->CountSafetyHold(SafetyRule::kHostStale);
      break;
    case EnvelopeRule::kInflationStopped:
      deps_.metrics->CountSafetyHold(SafetyRule::kInflationStopped);
      break;
    default:
      break;
  }
}

void ControlLoop::CountError(LibvirtOperation operation) {
  if (deps_.metrics) deps_.metrics->CountLibvirtError(operation);
}

void ControlLoop::NoteBusy(TrackedGuest* g, BusyReason reason, const std::string& why, absl::Time now) {
  g->management = plimsoll::v1::MANAGEMENT_STATE_BUSY;
  g->detail = why;
  if (deps_.metrics) deps_.metrics->CountBalloonBusySkip(reason);
  if (now - g->busy_logged_at < absl::Minutes(1)) {
    ++g->busy_unlogged;
    return;
  }
  PLOG_WARNING << "guest busy guest=" << g->info.name << " uuid=" << g->info.uuid << " reason=" << BusyReasonName(reason)
               << ": " << why << "; its move waits, the other guests are served"
               << (g->busy_unlogged > 0 ? absl::StrCat(" (", g->busy_unlogged, " more skips since the last line)")
                                        : std::string());
  g->busy_logged_at = now;
  g->busy_unlogged = 0;
}

void ControlLoop::TakeCallResults(absl::Time now) {
  for (const BalloonCalls::Result& r : calls_->Take()) {
    TrackedGuest* g = tracker_.Find(r.call.uuid);
    if (g == nullptr) continue;  // gone meanwhile: nothing to record
    if (r.call.kind == BalloonCalls::Kind::kEnableStats) {
      StatsCallReturned(g, r, now);
    } else {
      TargetCallReturned(g, r, now);
    }
  }
}

void ControlLoop::TargetCallReturned(TrackedGuest* g, const BalloonCalls::Result& r, absl::Time now) {
  // The decision that issued the call is still the guest's last one: it is completed here.
  plimsoll::v1::Decision& rec = g->last_decision;
  const bool own_record = !r.late && rec.tick() == r.call.tick;
  // Formatted only for a line that says it: most calls return on time, unlogged.
  auto took = [&] { return absl::FormatDuration(absl::Trunc(now - r.call.submitted_at, absl::Milliseconds(100))); };
  if (r.status.ok()) {
    if (r.call.dry_run) {
      if (own_record && g->management == plimsoll::v1::MANAGEMENT_STATE_MANAGED) {
        g->management = plimsoll::v1::MANAGEMENT_STATE_DRY_RUN;
      }
      return;
    }
    // This call set the target, unless another call of the domain overlapped it: then either of
    // them may have been last (balloon_calls.h), and the loop sets it again before it believes it.
    // Of overlapping calls, the one submitted last is the better guess (still unsure, below).
    if (r.call.submitted_at >= g->target_call_at) {
      g->target_bytes = r.call.value;
      g->target_call_at = r.call.submitted_at;
    }
    const bool was_unsure = g->target_unsure;
    g->target_unsure = r.late || r.call.behind_another;
    if (g->target_unsure && !was_unsure) {
      PLOG_WARNING << "balloon target unsure guest=" << g->info.name << " uuid=" << g->info.uuid
                   << ": a call returned after its deadline, or overlapped another call to the domain; the target is set "
                      "again, alone, before it is believed";
    }
    if (g->management == plimsoll::v1::MANAGEMENT_STATE_APPLY_FAILED ||
        g->management == plimsoll::v1::MANAGEMENT_STATE_BUSY) {
      g->management = plimsoll::v1::MANAGEMENT_STATE_MANAGED;
    }
    g->detail.clear();
    if (own_record) rec.set_applied(true);
    if (r.late) {
      PLOG_WARNING << "balloon call returned late guest=" << g->info.name << " uuid=" << g->info.uuid
                   << " target=" << FormatMib(r.call.value) << " after=" << took()
                   << ": it did take effect, target recorded";
    }
    return;
  }
  if (r.late) {
    // Its timeout was reported already and it changed nothing: only say how it ended.
    PLOG_INFO << "balloon call returned late guest=" << g->info.name << " uuid=" << g->info.uuid
              << " target=" << FormatMib(r.call.value) << " after=" << took() << " without effect: " << r.status.message();
    return;
  }
  auto hold = [&](absl::string_view what) {
    if (!own_record) return;
    rec.set_reason(absl::StrCat(rec.reason(), " | ", what));
    rec.set_direction(plimsoll::v1::DIRECTION_HOLD);
    rec.set_target_bytes(rec.previous_target_bytes());
  };
  if (r.timed_out) {
    if (deps_.metrics) deps_.metrics->CountBalloonCallTimeout();
    g->management = plimsoll::v1::MANAGEMENT_STATE_BUSY;
    g->detail = std::string(r.status.message());
    hold(absl::StrCat("busy: ", r.status.message()));
    PLOG_WARNING << "balloon call timed out guest=" << g->info.name << " uuid=" << g->info.uuid
                 << " target=" << FormatMib(r.call.value) << ": " << r.status.message()
                 << "; target kept at " << FormatMib(g->target_bytes) << ", a new call may be issued";
    return;
  }
  if (absl::IsAborted(r.status)) {  // the actuator found a libvirt job: nothing was called
    const std::string why(r.status.message());
    NoteBusy(g, BusyReason::kJob, why, now);
    hold(absl::StrCat("busy: ", why));
    return;
  }
  CountError(LibvirtOperation::kSetTarget);
  g->management = plimsoll::v1::MANAGEMENT_STATE_APPLY_FAILED;
  g->detail = std::string(r.status.message());
  hold(absl::StrCat("apply failed, retried next tick: ", r.status.message()));
  if (!own_record) {
    PLOG_WARNING << "balloon call failed guest=" << g->info.name << " uuid=" << g->info.uuid
                 << " target=" << FormatMib(r.call.value) << " after=" << took() << ": " << r.status.message()
                 << "; retried";
  }
}

void ControlLoop::StatsCallReturned(TrackedGuest* g, const BalloonCalls::Result& r, absl::Time now) {
  if (r.late) return;  // its timeout counted as a failure already; the retry is scheduled
  if (r.status.ok()) {
    // A period changed since the call was made is switched on again (ResetStatsEnabled did).
    if (r.call.value != options_.stats_period_seconds) return;
    g->stats_enabled = true;
    g->enable_stats_backoff = absl::ZeroDuration();
    g->enable_stats_retry_at = absl::InfinitePast();
    return;
  }
  if (r.timed_out) {
    if (deps_.metrics) deps_.metrics->CountBalloonCallTimeout();
  } else {
    CountError(LibvirtOperation::kEnableStats);
  }
  g->enable_stats_backoff = g->enable_stats_backoff == absl::ZeroDuration()
                                ? kEnableStatsRetryMin
                                : std::min(2 * g->enable_stats_backoff, kEnableStatsRetryMax);
  g->enable_stats_retry_at = now + g->enable_stats_backoff;
  PLOG_WARNING << "enabling balloon stats failed guest=" << g->info.name
               << " retry_in=" << absl::FormatDuration(g->enable_stats_backoff) << ": " << r.status.message();
}

bool ControlLoop::EnsureConnected(absl::Time now) {
  if (deps_.hypervisor->IsConnected()) {
    was_connected_ = true;
    return true;
  }
  if (was_connected_) {
    PLOG_WARNING << "libvirt connection lost; guests held until it is back";
    was_connected_ = false;
    tracker_.MarkAllStale(now);
  }
  if (now < next_connect_attempt_) return false;
  absl::Status s = deps_.hypervisor->Connect();
  if (!s.ok()) {
    CountError(LibvirtOperation::kConnect);
    next_connect_attempt_ = now + reconnect_backoff_;
    PLOG_WARNING << "libvirt connect failed: " << s.message()
                 << " retry_in=" << absl::FormatDuration(reconnect_backoff_);
    reconnect_backoff_ = std::min(reconnect_backoff_ * 2, options_.reconnect_max);
    tracker_.MarkAllStale(now);
    return false;
  }
  PLOG_INFO << "libvirt connected";
  reconnect_backoff_ = options_.reconnect_min;
  was_connected_ = true;
  // Re-enable stats everywhere: a restarted libvirtd or QEMU may have lost the period.
  for (const auto& [uuid, g] : tracker_.guests()) ResetStatsEnabled(tracker_.Find(uuid));
  pressure_reader_->Reset();
  return true;
}

void ControlLoop::Collect(absl::Time now, bool* collected) {
  *collected = false;
  // One look at every domain and its stats (one bulk libvirt call where the driver can), the
  // disk reads in it every block_stats_interval. A tenth of the interval is slack: a tick due
  // at the interval and started a few milliseconds early still reads them. A clock stepped back
  // reads them at once rather than waiting for it to catch up.
  const absl::Duration interval = options_.block_stats_interval;
  const bool read_disks = now < last_block_read_ || now - last_block_read_ >= interval - interval / 10;
  absl::StatusOr<hypervisor::DomainSurvey> survey = deps_.hypervisor->SurveyDomains(read_disks);
  if (!survey.ok()) {
    CountError(LibvirtOperation::kListDomains);
    PLOG_WARNING << "listing domains failed: " << survey.status().message();
    tracker_.MarkAllStale(now);
    return;
  }
  const std::vector<hypervisor::DomainInfo>* domains = &survey->domains;
  absl::flat_hash_set<std::string> stopped;
  {
    absl::MutexLock l(&mu_);
    stopped.swap(stopped_hints_);
    // The survey is newer than every balloon event kept before it (an event after the survey
    // and before this line is lost; the next tick's survey has it).
    balloon_changes_.clear();
  }
  GuestTracker::ReconcileResult changes = tracker_.Reconcile(*domains, now, stopped);
  for (const std::string& uuid : changes.added) {
    const TrackedGuest* g = tracker_.Find(uuid);
    PLOG_INFO << "guest adopted guest=" << g->info.name << " uuid=" << uuid
              << " max=" << FormatMib(g->info.max_bytes) << " min=" << FormatMib(g->min_bytes)
              << " target=actual=" << FormatMib(g->target_bytes) << " free_page_reporting="
              << (!g->info.free_page_reporting.has_value() ? "unknown" : *g->info.free_page_reporting ? "on" : "off");
  }
  for (const std::string& uuid : changes.removed) {
    PLOG_INFO << "guest gone uuid=" << uuid;
    policy_state_.guests.erase(uuid);
    pressure_reader_->Forget(uuid);
    absl::MutexLock l(&mu_);
    gate_.Forget(uuid);
  }
  if (deps_.agents != nullptr &&
      (!changes.added.empty() || !changes.removed.empty() || changes.max_changed || !agents_told_)) {
    agents_told_ = true;
    // The agent channel accepts reports only for guests we manage, checked against their size.
    absl::flat_hash_map<std::string, agent::GuestLimits> known;
    for (const auto& [uuid, g] : tracker_.guests()) known[uuid].max_bytes = g.info.max_bytes;
    deps_.agents->SetKnownGuests(std::move(known));
  }
  for (const auto& [uuid, g] : tracker_.guests()) {
    if (!g.stats_enabled && now >= g.enable_stats_retry_at) {
      // On the pool like a target: a busy domain must not hold up the others' stats. Refused
      // (busy, pool full): tried again next tick. The result is taken by TakeCallResults.
      hypervisor::Hypervisor* hv = deps_.hypervisor;
      const int period = options_.stats_period_seconds;
      BalloonCalls::Call call;
      call.kind = BalloonCalls::Kind::kEnableStats;
      call.uuid = uuid;
      call.name = g.info.name;
      call.value = period;
      call.tick = tick_.load();
      calls_->Submit(std::move(call), [hv, uuid = uuid, period] { return hv->EnableStats(uuid, period); });
    }
  }
  if (!survey->stats_status.ok()) {
    CountError(LibvirtOperation::kBalloonStats);
    PLOG_WARNING << "reading balloon stats failed: " << survey->stats_status.message();
    tracker_.UpdateStats({}, now);
    CheckReclaimClaims(now, {});
  } else {
    const BalloonPressureReader::Counts before = pressure_reader_->counts();
    pressure_reader_->Read(now, &*survey);
    if (deps_.metrics != nullptr) {
      const BalloonPressureReader::Counts& after = pressure_reader_->counts();
      deps_.metrics->AddBalloonPressureReads(after.read - before.read, after.lacking - before.lacking,
                                             after.failed - before.failed);
    }
    tracker_.UpdateStats(survey->stats, now, survey->block_stats_read);
    CheckReclaimClaims(now, survey->stats);
    if (survey->block_stats_read) last_block_read_ = now;
  }
  auto host = deps_.host->Read();
  if (host.ok()) {
    if (host_stale_) {
      PLOG_INFO << "host memory read again after "
                << absl::FormatDuration(absl::Trunc(now - last_host_at_, absl::Milliseconds(100)))
                << ": guests may be shrunk again";
    }
    last_host_ = *host;
    last_host_at_ = now;
    host_stale_ = false;
  } else {
    // Deciding on the last good reading is better than not deciding (a guest may need memory
    // back), but the host it describes may be gone: a guest is never shrunk on it.
    host_stale_ = last_host_.has_value();
    PLOG_WARNING << "reading host memory failed: " << host.status().message()
                 << (host_stale_ ? absl::StrCat("; using the reading from ",
                                                absl::FormatDuration(absl::Trunc(now - last_host_at_,
                                                                                 absl::Milliseconds(100))),
                                                " ago, no guest is shrunk this tick")
                                 : std::string());
    if (host_stale_ && deps_.metrics != nullptr) deps_.metrics->CountHostStaleTick();
  }
  *collected = true;
}

void ControlLoop::CheckReclaimClaims(absl::Time now,
                                     const absl::flat_hash_map<std::string, hypervisor::BalloonStats>& stats) {
  if (deps_.agents == nullptr) return;
  const ReclaimClaimParams params;
  tracker_.ForEachGuest([&](TrackedGuest& g) {
    ReclaimClaimSample sample;
    sample.now = now;
    sample.claimed_total = deps_.agents->ReclaimAchievedTotal(g.info.uuid);
    ReclaimClaimState& state = g.reclaim_claims;
    if (!sample.claimed_total.has_value() && !state.claimed_seen.has_value() && !state.open) {
      state.recent.clear();  // no agent: no readings kept for it
      return;
    }
    // Disk reads are surveyed every block_stats_interval: between surveys, the last ones stand.
    sample.disk_read_bytes = g.stats.disk_read_bytes;
    if (auto it = stats.find(g.info.uuid); it != stats.end()) {
      sample.host_rss_bytes = it->second.rss_bytes;
      if (it->second.disk_read_bytes.has_value()) sample.disk_read_bytes = it->second.disk_read_bytes;
    }
    sample.balloon_actual_bytes = g.actual_bytes;
    const std::optional<ReclaimClaimWindow> w = StepReclaimClaims(params, sample, &state);
    if (!w.has_value()) return;
    // One line per window judged: claims are rare, and an unconfirmed one is worth a warning.
    const std::string line = absl::StrCat(
        "reclaim claim ", ReclaimVerdictName(w->verdict), " guest=", g.info.name, " uuid=", g.info.uuid,
        " claimed=", FormatMib(static_cast<double>(w->claimed_bytes)),
        " rss_fall=", FormatMib(static_cast<double>(w->rss_fall_bytes)),
        " confirmed=", FormatMib(static_cast<double>(w->confirmed_bytes)),
        " unconfirmed=", FormatMib(static_cast<double>(w->unconfirmed_bytes)),
        absl::StrFormat(" window=%.0fs", absl::ToDoubleSeconds(w->closed - w->opened)));
    if (w->verdict == ReclaimVerdict::kUnconfirmed) {
      PLOG_WARNING << line << ": QEMU's RSS did not fall with the claim; its reclaim bounds are paused for "
                   << absl::FormatDuration(ReclaimBoundsPauseLeft(state, now));
    } else {
      PLOG_INFO << line;
    }
  });
}

void ControlLoop::AddAgentSignals(policy::GuestView& v) const {
  std::optional<agent::AgentSignals> a = deps_.agents->FreshSignals(v.uuid);
  if (!a.has_value()) return;  // no agent, or its data expired: libvirt stats only
  v.anon_bytes = a->anon_bytes;
  if (a->shmem_bytes || a->sunreclaim_bytes) {
    v.unreclaimable_bytes = a->shmem_bytes.value_or(0) + a->sunreclaim_bytes.value_or(0);
  }
  v.active_file_bytes = a->active_file_bytes;
  v.inactive_file_bytes = a->inactive_file_bytes;
  v.refaults_per_second = a->file_refaults_per_second ? a->file_refaults_per_second : a->refaults_per_second;
  v.psi_some_avg10 = a->psi_some_avg10;
  v.psi_some_total_us = a->psi_some_total_us;
  v.balloon_inflate_pages = a->balloon_inflate;
  v.balloon_deflate_pages = a->balloon_deflate;
  v.oom_kill = a->oom_kill;
  v.agent_age_seconds = a->age_seconds;
  if (a->reclaim_state.has_value()) {
    const v1::ReclaimState st = *a->reclaim_state;
    v.agent_reclaims = !a->reclaim_dry_run &&
                       (st == v1::RECLAIM_STATE_IDLE || st == v1::RECLAIM_STATE_ACTIVE ||
                        st == v1::RECLAIM_STATE_STOPPED_PRESSURE);
  }
}

std::optional<policy::Snapshot> ControlLoop::BuildSnapshot(absl::Time now) {
  if (!last_host_.has_value()) return std::nullopt;
  policy::Snapshot snap;
  snap.now = now;
  snap.tick = tick_.load();
  const host::HostMemory& h = *last_host_;
  snap.host.mem_total_bytes = h.mem_total_bytes;
  snap.host.mem_free_bytes = h.mem_free_bytes;
  snap.host.mem_available_bytes = h.mem_available_bytes;
  snap.host.buffers_bytes = h.buffers_bytes;
  snap.host.cached_bytes = h.cached_bytes;
  snap.host.host_reserve_bytes = reserve_bytes_;
  snap.host.guest_budget_bytes = GuestBudget(h.mem_total_bytes, reserve_bytes_, budget_cap_);
  snap.host.in_guest_reclaim = options_.in_guest_reclaim;
  snap.host.psi_some_avg10 = h.psi_some_avg10;
  snap.host.psi_full_avg10 = h.psi_full_avg10;
  // The histories are derived from what the guests reported and the targets the calls set,
  // before the operator's controls change the ceiling the policy sees.
  snap.guests = tracker_.DerivedViews(now, [this](policy::GuestView& v) {
    if (deps_.agents != nullptr) AddAgentSignals(v);
  });
  // The views are ByName()'s, in its order: the guest of each view is found by its position.
  const std::vector<const TrackedGuest*>& tracked = tracker_.ByName();
  for (size_t i = 0; i < snap.guests.size(); ++i) {
    policy::GuestView& v = snap.guests[i];
    if (const BalloonCalls::Call* p = calls_->Pending(v.uuid);
        p != nullptr && p->kind == BalloonCalls::Kind::kSetTarget && v.history.has_value()) {
      v.history->pending_target_bytes = p->value;
    }
    const TrackedGuest* g = tracked[i];
    // A guest whose claims QEMU's RSS did not confirm has its bounds paused: its agent is not
    // reclaiming for the host, so it earns no pool privileges (reclaim_pool.h) meanwhile.
    if (v.agent_reclaims.value_or(false) && ReclaimBoundsPauseLeft(g->reclaim_claims, now) > absl::ZeroDuration()) {
      v.agent_reclaims = false;
    }
    const GuestControl& c = g->control;
    if (c.floor == 0 && c.ceiling == 0) continue;  // no <memory>: nothing to bound
    v.min_bytes = c.floor;
    v.max_bytes = c.ceiling;
    v.shares = c.shares;
    // Guests the operator fixed are fixed for the policy too, so it counts them as such. A pin
    // not forced is only the pinned guest's floor: the envelope still needs the policy's own
    // floor (hard demand + headroom) above it, which [pin, pin] would hide.
    if (c.pin.has_value() && c.override != nullptr && c.override->force()) {
      v.min_bytes = v.max_bytes = *c.pin;
    } else if (c.pin.has_value()) {
      v.min_bytes = *c.pin;
    } else if (c.exclude) {
      v.min_bytes = v.max_bytes = v.target_bytes;
    }
  }
  return snap;
}

// Never waited for here: submitted to the pool, taken when it returns (TakeCallResults).
std::string ControlLoop::SubmitTarget(const TrackedGuest& g, int64_t target, absl::Time now, BusyReason* why) {
  if (const BalloonCalls::Call* p = calls_->Pending(g.info.uuid); p != nullptr) {
    *why = BusyReason::kInFlight;
    return absl::StrCat(BalloonCallKindName(p->kind),
                        p->kind == BalloonCalls::Kind::kSetTarget ? absl::StrCat(" to ", FormatMib(p->value))
                                                                  : std::string(),
                        " issued ", absl::FormatDuration(absl::Trunc(now - p->submitted_at, absl::Milliseconds(100))),
                        " ago has not returned; not re-issued");
  }
  BalloonCalls::Call call;
  call.kind = BalloonCalls::Kind::kSetTarget;
  call.uuid = g.info.uuid;
  call.name = g.info.name;
  call.value = target;
  call.tick = tick_.load();
  call.dry_run = deps_.actuator->dry_run();
  Actuator* actuator = deps_.actuator;
  switch (calls_->Submit(std::move(call), [actuator, uuid = g.info.uuid, name = g.info.name, target] {
    return actuator->SetTarget(uuid, name, target);
  })) {
    case BalloonCalls::Submitted::kAccepted:
      return "";
    case BalloonCalls::Submitted::kBusy:
      *why = BusyReason::kInFlight;
      return "earlier balloon calls to this domain, past their deadline, are still running in libvirt";
    case BalloonCalls::Submitted::kPoolFull:
      *why = BusyReason::kPoolFull;
      return absl::StrCat("every balloon worker is busy and ", BalloonCalls::kQueueLimit, " calls wait");
  }
  return "unknown submission result";
}

void ControlLoop::Apply(const policy::Snapshot& snapshot, policy::Decisions& decisions, absl::Time now) {
  std::vector<TrackedGuest*> decided;  // in apply order, for the counts and logs at the end
  decided.reserve(decisions.guests.size());
  const EnvelopeHost host_facts{host_stale_, absl::ToDoubleSeconds(now - last_host_at_)};
  // The snapshot's guests are ByName()'s (BuildSnapshot): a decision in its place is the guest
  // there, found without a lookup; one out of place is looked up.
  const bool in_tracked_order = snapshot.guests.size() == tracker_.ByName().size();
  for (size_t i : ApplyOrder(decisions)) {
    policy::GuestDecision& d = decisions.guests[i];
    const policy::GuestView* view =
        i < snapshot.guests.size() && snapshot.guests[i].uuid == d.uuid ? &snapshot.guests[i] : nullptr;
    TrackedGuest* g = view != nullptr && in_tracked_order ? tracker_.AtByName(i) : tracker_.Find(d.uuid);
    if (g == nullptr) continue;  // a policy must not invent guests; ignore if it does
    const GuestControl& c = g->control;
    const int64_t previous = g->target_bytes;
    Move move = Constrain(d, std::move(d.reason), view, EnvelopeOf(*g), c, host_facts);
    for (EnvelopeRule rule : move.fired) CountEnvelopeRule(rule);
    if (!move.hold_released.empty()) {
      ReleaseHold(c.hold->reclaim_id(), d.uuid, g->info.name, move.hold_released);
      g->control.hold.reset();
    }
    g->envelope_floor = move.envelope_floor_bytes;
    int64_t target = move.target_bytes;
    std::string reason = std::move(move.reason);
    Direction direction = move.direction;
    const bool reassert = move.reassert;
    if (direction != plimsoll::v1::DIRECTION_HOLD && paused_) {
      absl::StrAppend(&reason, " | management paused: not applied");
    } else if ((direction != plimsoll::v1::DIRECTION_HOLD || reassert) && !paused_) {
      BusyReason why = BusyReason::kInFlight;
      const std::string busy = SubmitTarget(*g, target, now, &why);
      if (!busy.empty()) {
        absl::StrAppend(&reason, " | busy: ", busy);
        NoteBusy(g, why, busy, now);
        target = previous;
        direction = plimsoll::v1::DIRECTION_HOLD;
      }
    }
    if (c.exclude) {
      g->management = plimsoll::v1::MANAGEMENT_STATE_EXCLUDED;
    } else if (paused_) {
      g->management = plimsoll::v1::MANAGEMENT_STATE_PAUSED;
    } else if (c.pin.has_value() && g->management != plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON &&
               g->management != plimsoll::v1::MANAGEMENT_STATE_BUSY) {
      g->management = plimsoll::v1::MANAGEMENT_STATE_PINNED;
    }
    plimsoll::v1::Decision& rec = g->last_decision;
    rec.set_tick(tick_.load());
    rec.set_unix_micros(absl::ToUnixMicros(now));
    rec.set_policy(std::string(policy_->name()));
    rec.set_direction(direction);
    rec.set_previous_target_bytes(previous);
    rec.set_target_bytes(target);
    rec.set_reason(std::move(reason));
    rec.set_applied(false);  // until its call returns (TargetCallReturned)
    rec.set_policy_floor_bytes(d.floor_bytes);
    rec.set_seen_floor_bytes(move.seen_floor_bytes);
    rec.set_working_set_bytes(d.working_set_bytes);
    // "" (not yet tracked) reads as "ok": only real changes are worth a warning.
    if (!d.state.empty() && d.state != (g->balloon_state.empty() ? "ok" : g->balloon_state)) {
      PLOG_WARNING << "balloon state guest=" << g->info.name << " " << (g->balloon_state.empty() ? "ok" : g->balloon_state)
                   << " -> " << d.state << " target=" << FormatMib(target) << " actual=" << FormatMib(g->actual_bytes);
    }
    g->balloon_state = d.state;
    decided.push_back(g);
  }
  // The calls that returned meanwhile (all of them with workers = 0) complete their records.
  TakeCallResults(now);
  for (TrackedGuest* g : decided) {
    const plimsoll::v1::Decision& rec = g->last_decision;
    const Direction direction = rec.direction();
    if (deps_.metrics) deps_.metrics->CountDecision(direction);
    // Every move is logged; a hold only when it follows a move or a minute of silence,
    // so a quiet host does not write one line per guest per tick (unless asked to).
    if (options_.log_every_decision || direction != plimsoll::v1::DIRECTION_HOLD ||
        g->logged_direction != plimsoll::v1::DIRECTION_HOLD || now - g->logged_at >= absl::Minutes(1)) {
      g->logged_direction = direction;
      g->logged_at = now;
      const BalloonCalls::Call* p = calls_->Pending(g->info.uuid);
      const bool in_flight = p != nullptr && p->tick == rec.tick() && direction != plimsoll::v1::DIRECTION_HOLD;
      PLOG_INFO << "decision tick=" << tick_ << " guest=" << g->info.name << " uuid=" << g->info.uuid
                << " policy=" << policy_->name() << " direction=" << DirectionName(direction)
                << " prev_target=" << FormatMib(rec.previous_target_bytes())
                << " target=" << FormatMib(rec.target_bytes()) << " actual=" << FormatMib(g->actual_bytes)
                << " max=" << FormatMib(g->info.max_bytes) << " min=" << FormatMib(g->control.floor)
                << " unused=" << FormatMib(g->stats.unused_bytes) << " usable=" << FormatMib(g->stats.usable_bytes)
                << " cache=" << FormatMib(g->stats.disk_caches_bytes)
                << absl::StrFormat(" stats_age=%.1fs", g->stats_age_seconds)
                << " applied=" << (rec.applied() ? "true" : in_flight ? "in-flight" : "false") << " reason=\""
                << rec.reason() << "\"";
    }
  }
  policy_host_ = {decisions.summary, decisions.pool_members, decisions.pool_lent_bytes,
                  decisions.pool_reserve_bytes, decisions.pool_covers};
  // The host line explains the moves beside it (the share-out's take, the pool): logged with a
  // tick's moves, and otherwise once a minute, like a guest's holds.
  const bool moved = std::any_of(decided.begin(), decided.end(), [](const TrackedGuest* g) {
    return g->last_decision.direction() != plimsoll::v1::DIRECTION_HOLD;
  });
  if (options_.log_every_decision || moved || now - policy_host_logged_at_ >= absl::Minutes(1)) {
    policy_host_logged_at_ = now;
    PLOG_INFO << "policy host tick=" << tick_ << " policy=" << policy_->name() << " summary=\""
              << decisions.summary << "\"";
  }
}

std::vector<size_t> ControlLoop::ApplyOrder(const policy::Decisions& decisions) const {
  std::vector<size_t> order;
  order.reserve(decisions.guests.size());
  if (serve_first_.empty()) {  // the usual tick: no map of every guest's uuid
    for (size_t i = 0; i < decisions.guests.size(); ++i) order.push_back(i);
    return order;
  }
  absl::flat_hash_map<absl::string_view, size_t> index;
  for (size_t i = 0; i < decisions.guests.size(); ++i) index.emplace(decisions.guests[i].uuid, i);
  std::vector<bool> taken(decisions.guests.size(), false);
  for (const std::string& uuid : serve_first_) {
    auto it = index.find(uuid);
    if (it == index.end() || taken[it->second]) continue;
    taken[it->second] = true;
    order.push_back(it->second);
  }
  for (size_t i = 0; i < decisions.guests.size(); ++i) {
    if (!taken[i]) order.push_back(i);
  }
  return order;
}

void ControlLoop::PublishAgent(const TrackedGuest& g, absl::Time now, plimsoll::v1::Guest* out) const {
  const std::string& uuid = g.info.uuid;
  if (std::string channel = deps_.agents->ChannelProblem(uuid); !channel.empty()) {
    out->mutable_agent()->set_channel_problem(std::move(channel));
  }
  std::optional<agent::AgentSignals> a = deps_.agents->Signals(uuid);
  if (!a.has_value()) return;
  auto* st = out->mutable_agent();
  st->set_connected(a->connected);
  st->set_fresh(a->fresh);
  st->set_age_seconds(a->age_seconds);
  st->set_reports_accepted(a->reports_accepted);
  st->set_last_reject_reason(a->last_reject_reason);
  if (a->reclaim_state.has_value()) {
    // Shown whatever the report's age (`fresh` says it), in the documented words only.
    auto* r = st->mutable_reclaim();
    r->set_state(std::string(agent::ReclaimStateName(*a->reclaim_state)));
    r->set_reason(std::string(agent::DocumentedReclaimReason(a->reclaim_reason)));
    r->set_file_only(a->reclaim_file_only);
    r->set_dry_run(a->reclaim_dry_run);
    r->set_agent_keep_bytes(a->reclaim_keep_bytes.value_or(0));
    r->set_agent_keep_file_bytes(a->reclaim_keep_file_bytes.value_or(0));
    if (a->reclaim_bounds_sent.has_value()) {
      r->set_bounds_enabled(a->reclaim_bounds_sent->enabled());
      if (a->reclaim_bounds_sent->enabled()) {
        r->set_bounds_keep_bytes(a->reclaim_bounds_sent->keep_bytes());
        r->set_bounds_keep_file_bytes(a->reclaim_bounds_sent->keep_file_bytes());
      }
    }
    r->set_claimed_requested_bytes(a->reclaim_requested_total_bytes);
    r->set_claimed_bytes(a->reclaim_achieved_total_bytes);
    r->set_compactions(a->reclaim_compactions_total);
    r->set_failed_compactions(a->reclaim_failed_compactions_total);
    const ReclaimClaimState& c = g.reclaim_claims;
    r->set_confirmed_bytes(c.confirmed_bytes);
    r->set_unconfirmed_bytes(c.unconfirmed_bytes);
    r->set_unconfirmed_claims(c.unconfirmed_windows);
    r->set_pending_claim_bytes(c.open ? c.window_claimed : 0);
    r->set_last_verdict(std::string(ReclaimVerdictName(c.last_verdict)));
    r->set_bounds_pause_left_seconds(absl::ToDoubleSeconds(ReclaimBoundsPauseLeft(c, now)));
  }
  if (!a->fresh) return;  // stale agent data is shown as status only, never as signals
  auto* s = out->mutable_stats();
  auto agent_signal = [&](plimsoll::v1::MemorySignal* m, std::optional<int64_t> v) {
    if (!v) return;
    m->set_bytes(*v);
    m->set_provenance(plimsoll::v1::PROVENANCE_AGENT);
    m->set_age_seconds(a->age_seconds);
  };
  agent_signal(s->mutable_active_file(), a->active_file_bytes);
  agent_signal(s->mutable_inactive_file(), a->inactive_file_bytes);
  agent_signal(s->mutable_anon(), a->anon_bytes);
  if (a->shmem_bytes || a->sunreclaim_bytes) {
    agent_signal(s->mutable_unreclaimable(), a->shmem_bytes.value_or(0) + a->sunreclaim_bytes.value_or(0));
  }
  if (a->psi_some_avg10) s->set_psi_some_avg10(*a->psi_some_avg10);
  if (a->psi_full_avg10) s->set_psi_full_avg10(*a->psi_full_avg10);
  if (a->refaults_per_second) s->set_refaults_per_second(*a->refaults_per_second);
  if (a->oom_kill) s->set_oom_kill(*a->oom_kill);
  if (a->balloon_inflate) s->set_balloon_inflate_pages(*a->balloon_inflate);
  if (a->balloon_deflate) s->set_balloon_deflate_pages(*a->balloon_deflate);
}

void ControlLoop::PublishLine(absl::Time now, const std::string& stale, plimsoll::v1::HostLine* out) {
  *out = line_figures_;
  // A stale line offers nothing (a host never offers what it cannot back), and the gate, fed 0,
  // offers again only offer_hold after the data is good.
  const int64_t offered = offer_gate_.Update(stale.empty() ? line_figures_.headroom_bytes() : 0, now);
  out->set_offered_bytes(offered);
  out->set_stale(!stale.empty());
  out->set_stale_reason(stale);
  out->set_tick(tick_.load());
  out->set_computed_unix_micros(absl::ToUnixMicros(now));
  out->set_explanation(absl::StrCat(stale.empty() ? "" : absl::StrCat("stale: ", stale, "; "),
                                    line_figures_.explanation(), line_figures_.explanation().empty() ? "" : " ",
                                    "offered=", FormatMib(offered), " offer_hold=",
                                    absl::FormatDuration(offer_gate_.hold())));
  if (out->over_line() != line_logged_over_) {
    line_logged_over_ = out->over_line();
    if (line_logged_over_) {
      PLOG_WARNING << "host over its line: " << out->explanation()
                   << "; the guests' commitments exceed what the host can back";
    } else {
      PLOG_INFO << "host back under its line: " << out->explanation();
    }
  }
  if (!line_logged_stale_.has_value() || *line_logged_stale_ != stale) {
    if (!stale.empty()) {
      PLOG_WARNING << "host line stale (" << stale << "): offering nothing until it is good for "
                   << absl::FormatDuration(offer_gate_.hold());
    } else if (line_logged_stale_.has_value()) {
      PLOG_INFO << "host line good again: " << out->explanation();
    }
    line_logged_stale_ = stale;
  }
}

void ControlLoop::Publish(absl::Time now, const std::string& line_stale) {
  auto view = NewViewOnArena(view_arena_bytes_);
  int64_t actual_sum = 0;
  std::optional<int64_t> rss_sum;  // absent while no guest reports RSS
  for (const TrackedGuest* g : tracker_.ByName()) {
    plimsoll::v1::Guest* out = view->add_guests();
    out->set_name(g->info.name);
    out->set_uuid(g->info.uuid);
    out->set_run_state(RunState(g->info.state));
    out->set_management_state(g->management);
    out->set_max_bytes(g->info.max_bytes);
    const GuestControl& c = g->control;
    out->set_min_bytes(c.ceiling > 0 ? c.floor : g->min_bytes);
    if (c.override != nullptr) *out->mutable_override() = *c.override;
    if (c.hold.has_value()) *out->mutable_reclaim_hold() = *c.hold;
    out->set_target_bytes(g->target_bytes);
    out->set_actual_bytes(g->actual_bytes);
    // An empty string is the field's default: setting one would still put a string on the arena.
    if (!g->detail.empty()) out->set_state_detail(g->detail);
    actual_sum += g->actual_bytes;
    auto* s = out->mutable_stats();
    const double age = g->stats_age_seconds;
    if (g->stats.unused_bytes) SetSignal(s->mutable_unused(), *g->stats.unused_bytes, age);
    if (g->stats.usable_bytes) SetSignal(s->mutable_usable(), *g->stats.usable_bytes, age);
    if (g->stats.available_bytes) SetSignal(s->mutable_available(), *g->stats.available_bytes, age);
    if (g->stats.disk_caches_bytes) SetSignal(s->mutable_disk_caches(), *g->stats.disk_caches_bytes, age);
    if (g->stats.rss_bytes) {
      SetSignal(s->mutable_rss(), *g->stats.rss_bytes, 0);
      s->mutable_rss()->set_provenance(plimsoll::v1::PROVENANCE_HOST);
      rss_sum = rss_sum.value_or(0) + *g->stats.rss_bytes;
    }
    if (g->info.free_page_reporting.has_value()) out->set_free_page_reporting(*g->info.free_page_reporting);
    s->set_swap_in(g->stats.swap_in.value_or(0));
    s->set_swap_out(g->stats.swap_out.value_or(0));
    s->set_major_fault(g->stats.major_fault.value_or(0));
    s->set_minor_fault(g->stats.minor_fault.value_or(0));
    s->set_last_update_unix_seconds(g->stats.last_update.value_or(0));
    if (g->stats.disk_read_bytes) s->set_disk_read_bytes(*g->stats.disk_read_bytes);
    if (g->stats.disk_read_requests) s->set_disk_read_requests(*g->stats.disk_read_requests);
    if (const hypervisor::BalloonPressure& p = g->stats.pressure; p.any()) {
      auto* bp = s->mutable_balloon_pressure();
      if (p.oom_kills) bp->set_oom_kills(*p.oom_kills);
      if (p.alloc_stalls) bp->set_alloc_stalls(*p.alloc_stalls);
      if (p.direct_scans) bp->set_direct_scan_bytes(*p.direct_scans);
      if (p.direct_reclaims) bp->set_direct_reclaim_bytes(*p.direct_reclaims);
      if (p.async_scans) bp->set_async_scan_bytes(*p.async_scans);
      if (p.async_reclaims) bp->set_async_reclaim_bytes(*p.async_reclaims);
    }
    // From the read's own time: while libvirt is unreachable the reads grow old here too.
    if (g->stats.disk_read_bytes && g->disk_read_at.has_value()) {
      s->set_disk_read_age_seconds(absl::ToDoubleSeconds(now - *g->disk_read_at));
    }
    s->set_stats_age_seconds(age);
    s->set_stats_fresh(g->stats_fresh);
    if (g->last_decision.tick() > 0) *out->mutable_last_decision() = g->last_decision;
    if (!g->balloon_state.empty()) out->set_balloon_state(g->balloon_state);
    out->set_envelope_floor_bytes(g->envelope_floor);
    if (deps_.agents != nullptr) PublishAgent(*g, now, out);
  }
  auto* host = view->mutable_host();
  if (last_host_) {
    host->set_mem_total_bytes(last_host_->mem_total_bytes);
    host->set_mem_available_bytes(last_host_->mem_available_bytes);
    host->set_psi_memory_some_avg10(last_host_->psi_some_avg10.value_or(0));
    host->set_psi_memory_full_avg10(last_host_->psi_full_avg10.value_or(0));
    host->set_guest_budget_bytes(GuestBudget(last_host_->mem_total_bytes, reserve_bytes_, budget_cap_));
    host->set_host_data_age_seconds(absl::ToDoubleSeconds(now - last_host_at_));
    host->set_host_data_stale(host_stale_);
  }
  host->set_host_reserve_bytes(reserve_bytes_);
  host->set_guests_actual_bytes(actual_sum);
  if (rss_sum.has_value()) host->set_guests_rss_bytes(*rss_sum);
  host->set_policy(std::string(policy_->name()));
  host->set_policy_summary(policy_host_.summary);
  if (policy_host_.pool_members > 0) {
    auto* pool = host->mutable_reclaim_pool();
    pool->set_members(policy_host_.pool_members);
    pool->set_lent_bytes(policy_host_.pool_lent_bytes);
    pool->set_reserve_bytes(policy_host_.pool_reserve_bytes);
    pool->set_covers(policy_host_.pool_covers);
  }
  host->set_paused(paused_);
  if (deps_.overrides != nullptr) {
    *host->mutable_host_policy() = overrides_->host;
    host->set_guest_overrides(static_cast<int64_t>(overrides_->guests.size()));
    host->set_state_file(deps_.overrides->state_file());
    host->set_state_problem(std::string(deps_.overrides->load_problem().message()));
  }
  if (deps_.hub != nullptr) {
    host->set_watch_subscribers(deps_.hub->subscribers());
    host->set_watch_events_dropped(static_cast<int64_t>(deps_.hub->dropped_total()));
  }
  int64_t held = 0;
  for (const ActiveReclaim& r : reclaims_) {
    for (const auto& item : r.plan.items()) {
      if (tracker_.guests().contains(item.guest_uuid()) && !r.released.contains(item.guest_uuid())) {
        held += item.reclaim_bytes();
      }
    }
  }
  host->set_reclaim_held_bytes(held);
  host->set_dry_run(deps_.actuator->dry_run());
  host->set_libvirt_connected(deps_.hypervisor->IsConnected());
  host->set_tick(tick_.load());
  host->set_tick_seconds(absl::ToDoubleSeconds(options_.tick));
  PublishLine(now, line_stale, view->mutable_host_line());
  view_arena_bytes_ = view->GetArena()->SpaceAllocated();
  if (deps_.metrics) {
    deps_.metrics->Publish(view);
    if (deps_.agents != nullptr) {
      const agent::AgentCounters c = deps_.agents->counters();
      std::vector<std::pair<std::string, uint64_t>> rejected;
      for (agent::RejectReason r : agent::AllRejectReasons()) {
        rejected.emplace_back(std::string(agent::RejectReasonName(r)), c.rejected_for(r));
      }
      deps_.metrics->PublishAgentCounters(c.accepted, rejected);
    }
  }
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> previous;
  {
    absl::MutexLock l(&mu_);
    previous = std::move(published_);
    published_ = view;
    published_controls_ = overrides_;
    published_base_ = HostBase{options_.host_reserve_bytes, options_.guest_memory_budget_bytes};
  }
  // After the swap: a watcher that reacts to an event reads the view it describes.
  if (deps_.hub != nullptr) {
    // Nobody to tell: what changed is not worked out (a decision event per guest per tick). A
    // watcher subscribes before it reads its first view (Watch's snapshot), so one that comes
    // after this check starts from this view and misses nothing.
    if (deps_.hub->subscribers() > 0) {
      for (plimsoll::v1::WatchEvent& e : EventsBetween(previous.get(), *view)) deps_.hub->Publish(std::move(e));
    }
    for (plimsoll::v1::ReclaimPlan& plan : started_reclaims_) {
      plimsoll::v1::WatchEvent e;
      e.mutable_reclaim()->set_phase(plimsoll::v1::ReclaimEvent::PHASE_APPLIED);
      *e.mutable_reclaim()->mutable_plan() = std::move(plan);
      deps_.hub->Publish(std::move(e));
    }
  }
  started_reclaims_.clear();
}

int ControlLoop::BalloonCallsInPool() const { return calls_ == nullptr ? 0 : calls_->in_pool(); }

void ControlLoop::Tick() {
  const absl::Time start = deps_.clock->Now();
  TickTimes times;
  ++tick_;
  {
    absl::MutexLock l(&mu_);
    serve_first_ = gate_.StartTick();
  }
  ApplyReconfig();
  ApplyHostPolicy();
  UpdateReclaims(start);
  absl::Time lap = deps_.clock->Now();
  // The time since the previous lap, which becomes now.
  auto since_lap = [&] {
    const absl::Time now = deps_.clock->Now();
    const absl::Duration d = now - lap;
    lap = now;
    return d;
  };
  bool collected = false;
  const bool connected = EnsureConnected(start);
  if (connected) Collect(start, &collected);
  // Why the Plimsoll line cannot be trusted this tick (empty: it can).
  std::string line_stale = !connected ? "libvirt is disconnected"
                           : !collected ? "the running domains could not be listed this tick"
                                        : "";
  ComputeControls();
  // After Collect (its stats calls, and the states it resets from the stats) and before Apply.
  TakeCallResults(start);
  times.collect = since_lap();
  if (collected) {
    std::optional<policy::Snapshot> snap = BuildSnapshot(start);
    if (snap.has_value()) {
      // The state is moved in (the policy updates its memory in place, not a copy of 10,000
      // guests' of it) and comes back in the decisions.
      policy::Decisions decisions = policy_->Decide(*snap, std::move(policy_state_));
      policy_state_ = std::move(decisions.next_state);
      times.decide = since_lap();
      // Before Apply moves the state out: the line reads the decisions' floors and working sets.
      line_figures_ = ComputeLine(*snap, decisions, options_.line);
      if (host_stale_) {
        line_stale = absl::StrFormat("host memory not read on the last tick (data age=%.1fs)",
                                     absl::ToDoubleSeconds(start - last_host_at_));
      }
      if (decisions.guests.size() != snap->guests.size()) {
        PLOG_ERROR << "policy " << policy_->name() << " returned " << decisions.guests.size()
                   << " decisions for " << snap->guests.size() << " guests; nothing applied";
      } else {
        Apply(*snap, decisions, start);
      }
    } else {
      PLOG_WARNING << "no host memory reading yet; nothing decided this tick";
      line_stale = "no host memory reading yet";
    }
  }
  times.apply = since_lap();  // also frees the snapshot and the decisions
  Publish(start, line_stale);
  times.publish = since_lap();
  times.total = lap - start;
  last_tick_times_ = times;
  if (deps_.metrics) deps_.metrics->ObserveTick(absl::ToDoubleSeconds(times.total));
}

void ControlLoop::Run() {
  // Scheduling is in real time (absl::Now), like the waits; the tick itself reads deps_.clock.
  while (true) {
    const absl::Time started = absl::Now();
    Tick();
    mu_.Lock();
    fold_not_before_ = absl::Now() + gate_.min_interval();
    while (!stop_) {
      const absl::Time next = gate_.NextTickAt(started, options_.tick);
      const absl::Time now = absl::Now();
      if (now >= next) break;
      const bool have_changes = !balloon_changes_.empty();
      if (have_changes && now >= fold_not_before_) {
        mu_.Unlock();
        FoldBalloonChanges();
        mu_.Lock();
        fold_not_before_ = absl::Now() + gate_.min_interval();
        continue;
      }
      // Woken for Stop(), for the first wake, which may bring `next` forward (the wakes after
      // it coalesce without waking this thread), and for the first balloon change since the
      // last fold.
      const bool was_woken = gate_.woken();
      auto changed = [this, was_woken, have_changes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || gate_.woken() != was_woken || balloon_changes_.empty() == have_changes;
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), have_changes ? std::min(next, fold_not_before_) : next);
    }
    const bool stop = stop_;
    const bool woken = gate_.woken();
    mu_.Unlock();
    if (stop) return;
    if (woken && absl::Now() < started + options_.tick && deps_.metrics != nullptr) {
      deps_.metrics->CountWokenTick();
    }
  }
}

void ControlLoop::Stop() {
  absl::MutexLock l(&mu_);
  stop_ = true;
}

void ControlLoop::Wake() {
  absl::MutexLock l(&mu_);
  gate_.Wake(absl::Now());
}

void ControlLoop::WakeForSpike(const std::string& uuid) {
  std::optional<int64_t> unlogged;
  {
    absl::MutexLock l(&mu_);
    unlogged = gate_.Spike(uuid, absl::Now());
  }
  if (deps_.metrics != nullptr) deps_.metrics->CountAgentSpike();
  if (unlogged.has_value()) {
    PLOG_INFO << "agent spike uuid=" << uuid << ": early tick requested"
              << (*unlogged > 0 ? absl::StrCat(" (", *unlogged, " more spikes from this guest since its last line)")
                                : std::string());
  }
}

std::shared_ptr<const plimsoll::v1::ListGuestsResponse> ControlLoop::Published() const {
  std::shared_ptr<const OverrideStore::Snapshot> stored =
      deps_.overrides != nullptr ? deps_.overrides->snapshot() : nullptr;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view;
  HostBase base;
  {
    absl::MutexLock l(&mu_);
    if (stored == nullptr || stored == published_controls_) return published_;
    if (overlaid_ != nullptr && overlaid_for_ == stored && overlaid_of_ == published_) return overlaid_;
    view = published_;
    base = published_base_;
  }
  // A write since the view was published: the copy is made outside the lock (O(guests), until
  // the next tick publishes a view with the write in it) and kept for the reads that follow.
  auto overlaid = std::make_shared<const plimsoll::v1::ListGuestsResponse>(WithStoredControls(*view, *stored, base));
  absl::MutexLock l(&mu_);
  if (published_ == view) {
    overlaid_ = overlaid;
    overlaid_for_ = stored;
    overlaid_of_ = view;
  }
  return overlaid;
}

}  // namespace plimsoll::server
