#include "server/api/reclaim_planner.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mib_format.h"
#include "server/api/control_validation.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = 1LL << 20;

struct Candidate {
  const plimsoll::v1::Guest* guest;
  int64_t current;
  int64_t floor;
  int64_t room;  // what it can give
  int32_t priority;
  uint32_t shares;
  int64_t policy_keep = 0;  // max(policy floor, working set); 0 without the policy's estimates
};

// Why a guest cannot give anything, or "" when it is a candidate.
std::string SkipReason(const plimsoll::v1::Guest& g) {
  if (g.override().exclude()) return "excluded by override";
  if (g.override().has_pin_bytes()) return absl::StrCat("pinned at ", FormatMib(g.override().pin_bytes()), " by override");
  if (g.run_state() != plimsoll::v1::GUEST_RUN_STATE_RUNNING) {
    return absl::StrCat("not running (", plimsoll::v1::GuestRunState_Name(g.run_state()), ")");
  }
  switch (g.management_state()) {
    case plimsoll::v1::MANAGEMENT_STATE_MANAGED:
    case plimsoll::v1::MANAGEMENT_STATE_DRY_RUN:
      break;
    case plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON:
      return "no balloon statistics: never pushed";
    case plimsoll::v1::MANAGEMENT_STATE_STALE_STATS:
      return absl::StrFormat("stale stats (age %.0fs): never shrunk", g.stats().stats_age_seconds());
    case plimsoll::v1::MANAGEMENT_STATE_APPLY_FAILED:
      return absl::StrCat("last balloon change failed: ", g.state_detail());
    case plimsoll::v1::MANAGEMENT_STATE_BUSY:
      return absl::StrCat("busy: ", g.state_detail());
    default:
      return absl::StrCat("not managed (", plimsoll::v1::ManagementState_Name(g.management_state()), ")");
  }
  if (!g.stats().stats_fresh()) return "stale stats: never shrunk";
  if (!g.stats().has_usable()) return "guest reports no usable memory (MemAvailable): cannot tell what it can spare";
  return "";
}

}  // namespace

plimsoll::v1::ReclaimPlan PlanReclaim(const plimsoll::v1::ListGuestsResponse& view, int64_t bytes,
                                      const ReclaimPlannerOptions& options) {
  plimsoll::v1::ReclaimPlan plan;
  plan.set_requested_bytes(bytes);
  std::vector<Candidate> candidates;
  for (const auto& g : view.guests()) {
    const std::string skip = SkipReason(g);
    if (!skip.empty()) {
      auto* s = plan.add_skipped();
      s->set_guest_name(g.name());
      s->set_guest_uuid(g.uuid());
      s->set_reason(skip);
      continue;
    }
    Candidate c{&g, g.target_bytes(), g.min_bytes(), 0, g.override().priority(),
                g.override().has_shares() ? g.override().shares() : kDefaultShares, 0};
    if (g.override().has_min_bytes()) c.floor = std::max(c.floor, g.override().min_bytes());
    const int64_t margin = std::max<int64_t>(options.keep_free_bytes,
                                             static_cast<int64_t>(options.keep_free_fraction * c.current));
    // The policy's own estimates when it has them: MemAvailable counts hot cache as spare,
    // the very error MoM makes; the working set does not. Without them (mom, proxmox,
    // static): MemAvailable minus a margin.
    const plimsoll::v1::Decision& last = g.last_decision();
    c.policy_keep = std::max(last.policy_floor_bytes(), last.working_set_bytes());
    const int64_t spare = c.policy_keep > 0 ? c.current - c.policy_keep : g.stats().usable().bytes() - margin;
    // Never under hard demand + headroom, the policy's or the host's own: a hold planned below
    // the host's would be released by the loop as soon as it landed.
    c.floor = std::max({c.floor, last.policy_floor_bytes(), last.seen_floor_bytes()});
    c.room = std::min(spare, c.current - c.floor) / kMiB * kMiB;
    if (c.room <= 0) {
      auto* s = plan.add_skipped();
      s->set_guest_name(g.name());
      s->set_guest_uuid(g.uuid());
      s->set_reason(c.current <= c.floor
                        ? absl::StrCat("at its floor (target=", FormatMib(c.current), " floor=", FormatMib(c.floor), ")")
                        : c.policy_keep > 0
                            ? absl::StrCat("nothing to spare (working set ", FormatMib(last.working_set_bytes()),
                                           ", policy floor ", FormatMib(last.policy_floor_bytes()), ")")
                            : absl::StrCat("nothing to spare (usable=", FormatMib(g.stats().usable().bytes()),
                                           " margin=", FormatMib(margin), ")"));
      continue;
    }
    candidates.push_back(c);
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const double ra = static_cast<double>(a.room) / a.shares;
    const double rb = static_cast<double>(b.room) / b.shares;
    return std::make_tuple(a.priority, -ra, a.guest->name()) < std::make_tuple(b.priority, -rb, b.guest->name());
  });
  int64_t remaining = bytes;
  for (const Candidate& c : candidates) {
    if (remaining <= 0) break;
    int64_t take = std::min(c.room, remaining);
    take = (take + kMiB - 1) / kMiB * kMiB;  // whole MiB, rounding the last one up
    take = std::min(take, c.room);
    auto* item = plan.add_items();
    item->set_guest_name(c.guest->name());
    item->set_guest_uuid(c.guest->uuid());
    item->set_current_target_bytes(c.current);
    item->set_new_target_bytes(c.current - take);
    item->set_reclaim_bytes(take);
    const auto& s = c.guest->stats();
    item->set_reason(absl::StrCat("usable=", FormatMib(s.usable().bytes()),
                                  s.has_disk_caches() ? absl::StrCat(" cache=", FormatMib(s.disk_caches().bytes())) : "",
                                  c.policy_keep > 0
                                      ? absl::StrCat(" ws=", FormatMib(c.guest->last_decision().working_set_bytes()))
                                      : "",
                                  " floor=", FormatMib(c.floor), " room=", FormatMib(c.room), " priority=", c.priority,
                                  " shares=", c.shares));
    remaining -= take;
    plan.set_planned_bytes(plan.planned_bytes() + take);
  }
  if (plan.planned_bytes() >= bytes) {
    plan.set_summary(absl::StrCat("take ", FormatMib(plan.planned_bytes()), " from ", plan.items_size(), " guest(s)"));
  } else {
    plan.set_summary(absl::StrCat("short by ", FormatMib(bytes - plan.planned_bytes()), ": ", plan.items_size(),
                                  " guest(s) can spare ", FormatMib(plan.planned_bytes()), ", ", plan.skipped_size(),
                                  " skipped"));
  }
  return plan;
}

}  // namespace plimsoll::server
