#include "server/api/testing/fake_control_core.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/api/control_validation.h"
#include "server/api/line_freshness.h"
#include "server/api/reclaim_planner.h"

namespace plimsoll::server {
namespace {

absl::Status NotFound(const std::string& guest) {
  return absl::NotFoundError(absl::StrCat("no guest named or with UUID \"", guest, "\""));
}

}  // namespace

FakeControlCore::FakeControlCore(Clock* clock, std::unique_ptr<OverrideStore> store)
    : clock_(clock), store_(store ? std::move(store) : std::make_unique<OverrideStore>(clock)), hub_(clock) {}

void FakeControlCore::SetView(plimsoll::v1::ListGuestsResponse view) {
  absl::MutexLock l(&mu_);
  view_ = std::move(view);
}

void FakeControlCore::set_daemon_dry_run(bool dry_run) {
  absl::MutexLock l(&mu_);
  daemon_dry_run_ = dry_run;
}

std::shared_ptr<const plimsoll::v1::ListGuestsResponse> FakeControlCore::View() const {
  auto view = std::make_shared<plimsoll::v1::ListGuestsResponse>();
  {
    absl::MutexLock l(&mu_);
    *view = view_;
    view->mutable_host()->set_dry_run(daemon_dry_run_);
  }
  auto snap = store_->snapshot();
  for (auto& g : *view->mutable_guests()) {
    if (auto it = snap->guests.find(absl::AsciiStrToLower(g.uuid())); it != snap->guests.end()) {
      *g.mutable_override() = it->second;
      if (it->second.exclude()) g.set_management_state(plimsoll::v1::MANAGEMENT_STATE_EXCLUDED);
      if (it->second.has_pin_bytes()) g.set_management_state(plimsoll::v1::MANAGEMENT_STATE_PINNED);
    } else {
      g.clear_override();
    }
  }
  auto* host = view->mutable_host();
  host->set_paused(snap->host.paused());
  *host->mutable_host_policy() = snap->host;
  host->set_guest_overrides(static_cast<int64_t>(snap->guests.size()));
  host->set_state_file(store_->state_file());
  host->set_state_problem(std::string(store_->load_problem().message()));
  host->set_watch_subscribers(hub_.subscribers());
  host->set_watch_events_dropped(static_cast<int64_t>(hub_.dropped_total()));
  return view;
}

std::vector<std::string> FakeControlCore::calls() const {
  absl::MutexLock l(&mu_);
  return calls_;
}

Caller FakeControlCore::last_caller() const {
  absl::MutexLock l(&mu_);
  return last_caller_;
}

void FakeControlCore::Record(const std::string& call, const Caller& caller) {
  absl::MutexLock l(&mu_);
  calls_.push_back(call);
  last_caller_ = caller;
}

absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> FakeControlCore::SetGuestPolicy(
    const plimsoll::v1::SetGuestPolicyRequest& request, const Caller& caller) {
  Record("SetGuestPolicy", caller);
  auto view = View();
  const plimsoll::v1::Guest* g = FindGuest(*view, request.guest());
  if (g == nullptr) return NotFound(request.guest());
  auto set = store_->Set({g->uuid(), g->name()}, request.override(), request.replace(), caller.identity, g);
  if (!set.ok()) return set.status();
  plimsoll::v1::WatchEvent e;
  e.mutable_guest_override()->set_guest_name(g->name());
  e.mutable_guest_override()->set_guest_uuid(g->uuid());
  *e.mutable_guest_override()->mutable_override() = *set;
  hub_.Publish(std::move(e));
  plimsoll::v1::SetGuestPolicyResponse r;
  *r.mutable_override() = *set;
  return r;
}

absl::StatusOr<plimsoll::v1::ClearGuestPolicyResponse> FakeControlCore::ClearGuestPolicy(
    const plimsoll::v1::ClearGuestPolicyRequest& request, const Caller& caller) {
  Record("ClearGuestPolicy", caller);
  auto view = View();
  const std::optional<GuestKey> found = FindOverrideKey(*view, *store_, request.guest());
  if (!found.has_value()) return NotFound(request.guest());
  const GuestKey& key = *found;
  auto cleared = store_->Clear(key, {request.fields().begin(), request.fields().end()}, caller.identity);
  if (!cleared.ok()) return cleared.status();
  plimsoll::v1::ClearGuestPolicyResponse r;
  r.set_existed(cleared->existed);
  if (!OverrideIsEmpty(cleared->remaining)) *r.mutable_override() = cleared->remaining;
  if (cleared->existed) {
    plimsoll::v1::WatchEvent e;
    e.mutable_guest_override()->set_guest_name(key.name);
    e.mutable_guest_override()->set_guest_uuid(key.uuid);
    *e.mutable_guest_override()->mutable_override() = r.override();
    e.mutable_guest_override()->set_cleared(!r.has_override());
    hub_.Publish(std::move(e));
  }
  return r;
}

absl::StatusOr<plimsoll::v1::ListGuestPoliciesResponse> FakeControlCore::ListGuestPolicies() {
  Record("ListGuestPolicies", {});
  plimsoll::v1::ListGuestPoliciesResponse r;
  for (auto& o : store_->List()) *r.add_overrides() = std::move(o);
  return r;
}

absl::StatusOr<plimsoll::v1::SetHostPolicyResponse> FakeControlCore::SetHostPolicy(
    const plimsoll::v1::SetHostPolicyRequest& request, const Caller& caller) {
  Record("SetHostPolicy", caller);
  auto hp = store_->SetHostPolicy(request, caller.identity);
  if (!hp.ok()) return hp.status();
  plimsoll::v1::WatchEvent e;
  *e.mutable_host_policy()->mutable_policy() = *hp;
  hub_.Publish(std::move(e));
  plimsoll::v1::SetHostPolicyResponse r;
  *r.mutable_policy() = *hp;
  return r;
}

absl::StatusOr<plimsoll::v1::ReclaimPlan> FakeControlCore::Reclaim(const plimsoll::v1::ReclaimRequest& request,
                                                                   const Caller& caller) {
  Record("Reclaim", caller);
  auto view = View();
  if (absl::Status s = CheckReclaimAllowed(request, view->host().paused(), view->host().dry_run()); !s.ok()) {
    return s;
  }
  plimsoll::v1::ReclaimPlan plan = PlanReclaim(*view, request.bytes());
  if (absl::Status s = CheckReclaimPlanSufficient(request, plan); !s.ok()) return s;
  int n;
  {
    absl::MutexLock l(&mu_);
    n = ++reclaims_;
  }
  const absl::Time now = clock_->Now();
  const double hold = ReclaimHoldSeconds(request);
  plan.set_id(absl::StrCat("reclaim-", n));
  plan.set_dry_run(request.dry_run());
  plan.set_applied(!request.dry_run());
  plan.set_hold_seconds(hold);
  plan.set_created_unix_micros(absl::ToUnixMicros(now));
  if (!request.dry_run()) {
    plan.set_hold_until_unix_micros(absl::ToUnixMicros(now + absl::Seconds(hold)));
    plimsoll::v1::WatchEvent e;
    e.mutable_reclaim()->set_phase(plimsoll::v1::ReclaimEvent::PHASE_APPLIED);
    *e.mutable_reclaim()->mutable_plan() = plan;
    hub_.Publish(std::move(e));
  }
  return plan;
}

absl::StatusOr<plimsoll::v1::HostLine> FakeControlCore::GetHostLine() {
  Record("GetHostLine", Caller());
  return LineAsOf(*View(), clock_->Now());
}

std::unique_ptr<WatchSubscription> FakeControlCore::Watch(const WatchFilter& filter) {
  return hub_.Subscribe(filter);
}

}  // namespace plimsoll::server
