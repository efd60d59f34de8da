#include "server/api/loop_control_core.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "policy/policy.h"
#include "server/api/control_validation.h"
#include "server/api/guest_lookup.h"
#include "server/api/line_freshness.h"

namespace plimsoll::server {
namespace {

absl::Status NotFound(const std::string& guest) {
  return absl::NotFoundError(absl::StrCat("no guest named or with UUID \"", guest, "\""));
}

void PublishOverride(WatchHub* hub, const GuestKey& key, const plimsoll::v1::GuestOverride* now_in_force,
                     const std::vector<std::string>& warnings = {}) {
  plimsoll::v1::WatchEvent e;
  auto* o = e.mutable_guest_override();
  o->set_guest_name(key.name);
  o->set_guest_uuid(key.uuid);
  if (now_in_force != nullptr) {
    *o->mutable_override() = *now_in_force;
  } else {
    o->set_cleared(true);
  }
  for (const std::string& w : warnings) o->add_warnings(w);
  hub->Publish(std::move(e));
}

// What the loop's safety envelope will make of `o` for guest `g` (control_loop.h): a pin or min
// below the guest's envelope floor is held at it, a pin more than a step below its target is
// approached a step per tick. Nothing with force. From the last published view, so a floor not
// yet measured (0) says nothing about the floor.
std::vector<std::string> EnvelopeWarnings(const plimsoll::v1::Guest& g, const plimsoll::v1::GuestOverride& o) {
  std::vector<std::string> out;
  if (o.force()) return out;
  const int64_t floor = g.envelope_floor_bytes();
  const std::string below =
      absl::StrCat("is below guest \"", g.name(), "\"'s envelope floor of ", DescribeBytes(floor),
                   " (its hard demand + headroom, or the configured floor where the policy measures none)");
  if (floor > 0 && o.has_pin_bytes() && o.pin_bytes() < floor) {
    out.push_back(absl::StrCat("pin_bytes ", DescribeBytes(o.pin_bytes()), " ", below,
                               ": the guest is held there instead; set force (with a note) to go lower"));
  }
  if (floor > 0 && o.has_min_bytes() && !o.has_pin_bytes() && o.min_bytes() < floor) {
    out.push_back(absl::StrCat("min_bytes ", DescribeBytes(o.min_bytes()), " ", below,
                               ": the guest is not shrunk below it; set force (with a note) to go lower"));
  }
  const int64_t step = OverrideStepBytes(g.max_bytes());
  if (o.has_pin_bytes() && g.target_bytes() - o.pin_bytes() > step) {
    out.push_back(absl::StrCat("pin_bytes ", DescribeBytes(o.pin_bytes()), " is ",
                               DescribeBytes(g.target_bytes() - o.pin_bytes()), " below the guest's target: approached ",
                               DescribeBytes(step), " per tick; force applies it at once"));
  }
  return out;
}

}  // namespace

LoopControlCore::LoopControlCore(ControlLoop* loop, OverrideStore* store, WatchHub* hub, Clock* clock,
                                 ReclaimPlannerOptions planner)
    : loop_(loop), store_(store), hub_(hub), clock_(clock), planner_(planner) {}

absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> LoopControlCore::SetGuestPolicy(
    const plimsoll::v1::SetGuestPolicyRequest& request, const Caller& caller) {
  auto view = loop_->Published();
  const plimsoll::v1::Guest* g = FindGuest(*view, request.guest());
  if (g == nullptr) return NotFound(request.guest());
  const GuestKey key{g->uuid(), g->name()};
  auto set = store_->Set(key, request.override(), request.replace(), caller.identity, g);
  if (!set.ok()) return set.status();
  const std::vector<std::string> warnings = EnvelopeWarnings(*g, *set);
  if (set->force()) {
    // Audited: who and why, where operators look (the event below carries the same).
    PLOG_WARNING << "override forced guest=" << g->name() << " uuid=" << g->uuid() << " by=\"" << caller.identity
                 << "\" note=\"" << set->note() << "\" override={" << set->ShortDebugString()
                 << "}: its pin and min apply at once, below the guest's hard demand + headroom if so";
  } else {
    PLOG_INFO << "override set guest=" << g->name() << " uuid=" << g->uuid() << " by=\"" << caller.identity
              << "\" override={" << set->ShortDebugString() << "}";
  }
  for (const std::string& w : warnings) PLOG_INFO << "override guest=" << g->name() << ": " << w;
  PublishOverride(hub_, key, &*set, warnings);
  loop_->Wake();
  plimsoll::v1::SetGuestPolicyResponse r;
  *r.mutable_override() = *std::move(set);
  for (const std::string& w : warnings) r.add_warnings(w);
  return r;
}

absl::StatusOr<plimsoll::v1::ClearGuestPolicyResponse> LoopControlCore::ClearGuestPolicy(
    const plimsoll::v1::ClearGuestPolicyRequest& request, const Caller& caller) {
  auto view = loop_->Published();
  const std::optional<GuestKey> found = FindOverrideKey(*view, *store_, request.guest());
  if (!found.has_value()) return NotFound(request.guest());
  const GuestKey& key = *found;
  auto cleared = store_->Clear(key, {request.fields().begin(), request.fields().end()}, caller.identity);
  if (!cleared.ok()) return cleared.status();
  plimsoll::v1::ClearGuestPolicyResponse r;
  r.set_existed(cleared->existed);
  const bool remains = !OverrideIsEmpty(cleared->remaining);
  if (remains) *r.mutable_override() = cleared->remaining;
  if (cleared->existed) {
    PLOG_INFO << "override cleared guest=" << key.name << " uuid=" << key.uuid << " by=\"" << caller.identity
              << "\" fields=" << (request.fields().empty() ? "all" : absl::StrJoin(request.fields(), ","))
              << " remaining={" << cleared->remaining.ShortDebugString() << "}";
    PublishOverride(hub_, key, remains ? &cleared->remaining : nullptr);
    loop_->Wake();
  }
  return r;
}

absl::StatusOr<plimsoll::v1::HostLine> LoopControlCore::GetHostLine() {
  return LineAsOf(*loop_->Published(), clock_->Now());
}

absl::StatusOr<plimsoll::v1::ListGuestPoliciesResponse> LoopControlCore::ListGuestPolicies() {
  plimsoll::v1::ListGuestPoliciesResponse r;
  for (auto& o : store_->List()) *r.add_overrides() = std::move(o);
  return r;
}

absl::StatusOr<plimsoll::v1::SetHostPolicyResponse> LoopControlCore::SetHostPolicy(
    const plimsoll::v1::SetHostPolicyRequest& request, const Caller& caller) {
  if (request.policy().has_policy()) {
    // Whatever plimsolld can run, variants included ("pagecache:probe_fraction=0.01"): the
    // registry's error names the unknown policy or parameter.
    if (auto made = policy::MakePolicy(request.policy().policy()); !made.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("policy.policy: ", made.status().message()));
    }
  }
  auto hp = store_->SetHostPolicy(request, caller.identity);
  if (!hp.ok()) return hp.status();
  PLOG_INFO << "host policy set by=\"" << caller.identity << "\" policy={" << hp->ShortDebugString() << "}";
  plimsoll::v1::WatchEvent e;
  *e.mutable_host_policy()->mutable_policy() = *hp;
  hub_->Publish(std::move(e));
  loop_->Wake();
  plimsoll::v1::SetHostPolicyResponse r;
  *r.mutable_policy() = *std::move(hp);
  return r;
}

absl::StatusOr<plimsoll::v1::ReclaimPlan> LoopControlCore::Reclaim(const plimsoll::v1::ReclaimRequest& request,
                                                                   const Caller& caller) {
  auto published = loop_->Published();
  auto stored = store_->snapshot();
  // The stored pause, not the last tick's: a pause acknowledged a moment ago already refuses.
  if (absl::Status s = CheckReclaimAllowed(request, stored->host.paused(), published->host().dry_run()); !s.ok()) {
    return s;
  }
  // Overrides stored since the view was published count already (a fresh pin or exclude is skipped).
  plimsoll::v1::ListGuestsResponse view = *published;
  for (auto& g : *view.mutable_guests()) {
    if (auto it = stored->guests.find(g.uuid()); it != stored->guests.end()) {
      *g.mutable_override() = it->second;
    } else {
      g.clear_override();
    }
  }
  plimsoll::v1::ReclaimPlan plan = PlanReclaim(view, request.bytes(), planner_);
  if (absl::Status s = CheckReclaimPlanSufficient(request, plan); !s.ok()) return s;
  const absl::Time now = clock_->Now();
  const double hold = ReclaimHoldSeconds(request);
  plan.set_id(absl::StrCat("reclaim-", ++reclaims_));
  plan.set_dry_run(request.dry_run());
  // A plan that takes from no guest sets no target and holds nothing.
  plan.set_applied(!request.dry_run() && plan.items_size() > 0);
  plan.set_hold_seconds(hold);
  plan.set_created_unix_micros(absl::ToUnixMicros(now));
  PLOG_INFO << "reclaim id=" << plan.id() << " by=\"" << caller.identity << "\" requested=" << request.bytes()
            << " planned=" << plan.planned_bytes() << " dry_run=" << (request.dry_run() ? "true" : "false")
            << " summary=\"" << plan.summary() << "\"";
  if (plan.applied()) {
    const absl::Time until = now + absl::Seconds(hold);
    plan.set_hold_until_unix_micros(absl::ToUnixMicros(until));
    loop_->AddReclaimHold(plan, until);  // wakes the loop
  }
  return plan;
}

std::unique_ptr<WatchSubscription> LoopControlCore::Watch(const WatchFilter& filter) {
  return hub_->Subscribe(filter);
}

}  // namespace plimsoll::server
