#include "policy/proxmox_policy.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policy/guest_safety.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {
namespace {

struct Member {
  size_t index = 0;  // into the snapshot's guests
  double cur = 0;
  double min = 0;
  double max = 0;
  double shares = 1000;
  bool needy = false;
  double planned = 0;   // where it is going this decision
  double desired = 0;   // its share, as last computed
  bool done = false;
};

// Shares `bytes` (positive: grow, negative: shrink) over `set`, Proxmox style; returns what could
// not be placed.
double ShareOut(const std::vector<Member*>& set, double bytes, const ProxmoxParams& params) {
  double rest = bytes;
  for (Member* m : set) m->done = false;
  for (int round = 0; round < params.max_rounds && std::fabs(rest) >= 1.0; ++round) {
    double alloc = 0;
    double shares_total = 0;
    for (const Member* m : set) {
      if (m->done) continue;
      alloc += m->planned - m->min;
      shares_total += m->shares;
    }
    if (shares_total <= 0) break;
    const double alloc_new = alloc + rest;
    double changes = 0;
    bool repeat = false;
    for (Member* m : set) {
      if (m->done) continue;
      const double desired =
          std::clamp(m->min + alloc_new * m->shares / shares_total, m->min, std::max(m->min, m->max));
      m->desired = desired;
      double next = 0;
      if (bytes > 0 && desired > m->cur) {
        next = std::min(m->cur + params.max_change_bytes, desired);
      } else if (desired < m->cur) {
        next = std::max(m->cur - params.max_change_bytes, desired);
      } else {
        m->done = true;
        continue;
      }
      changes += next - m->planned;
      m->planned = next;
      if (next != desired) {
        repeat = true;
      } else {
        m->done = true;
      }
    }
    rest -= changes;
    if (!repeat || std::fabs(changes) < 1.0) break;
  }
  return rest;
}

}  // namespace

absl::string_view ProxmoxPolicy::name() const { return "proxmox"; }

Decisions ProxmoxPolicy::Decide(const Snapshot& snapshot, PolicyState /*state*/) const {
  Decisions decisions;
  decisions.guests.reserve(snapshot.guests.size());
  const HostView& host = snapshot.host;
  if (host.guest_budget_bytes <= 0) {
    const std::string why =
        absl::StrCat("proxmox: hold guest_budget_bytes=", host.guest_budget_bytes);
    for (const GuestView& guest : snapshot.guests) {
      decisions.guests.push_back(HoldDecision(guest, why));
    }
    decisions.summary = absl::StrCat(why, " guests=", snapshot.guests.size());
    return decisions;
  }
  double sum_actual = 0;
  for (const GuestView& guest : snapshot.guests) sum_actual += static_cast<double>(guest.actual_bytes);
  const double budget_free = static_cast<double>(host.guest_budget_bytes) - sum_actual;
  const double host_free = static_cast<double>(host.mem_available_bytes) -
                           static_cast<double>(host.host_reserve_bytes);
  const double goal = std::min(budget_free, host_free);

  std::vector<Member> members;
  std::vector<std::optional<std::string>> unsafe(snapshot.guests.size());
  for (size_t i = 0; i < snapshot.guests.size(); ++i) {
    const GuestView& guest = snapshot.guests[i];
    unsafe[i] = UnsafeToActReason(guest);
    if (unsafe[i].has_value()) continue;
    Member m;
    m.index = i;
    m.cur = static_cast<double>(guest.actual_bytes);
    m.min = static_cast<double>(FloorBytes(guest));
    m.max = static_cast<double>(guest.max_bytes);
    m.shares = guest.shares > 0 ? static_cast<double>(guest.shares) : 1000.0;
    m.needy = static_cast<double>(*guest.unused_bytes) <=
              params_.needy_free_fraction * static_cast<double>(guest.max_bytes);
    m.planned = m.cur;
    m.desired = m.cur;
    members.push_back(m);
  }
  std::vector<Member*> all;
  std::vector<Member*> needy;
  for (Member& m : members) {
    all.push_back(&m);
    if (m.needy) needy.push_back(&m);
  }

  const char* mode = "deadband";
  const char* set = "none";
  double rest = 0;
  if (goal > params_.deadband_bytes) {
    mode = "grow";
    set = "needy";
    rest = ShareOut(needy, goal, params_);
    if (rest >= goal) {
      set = "all";
      for (Member* m : needy) m->planned = m->cur;
      rest = ShareOut(all, goal, params_);
    }
  } else if (goal < -params_.deadband_bytes) {
    mode = "shrink";
    set = "all";
    rest = ShareOut(all, goal, params_);
  }

  std::vector<const Member*> by_index(snapshot.guests.size(), nullptr);
  for (const Member& m : members) by_index[m.index] = &m;
  const std::string head = absl::StrCat("proxmox: goal=", FormatMib(goal), " mode=", mode,
                                        " set=", set);
  for (size_t i = 0; i < snapshot.guests.size(); ++i) {
    const GuestView& guest = snapshot.guests[i];
    if (unsafe[i].has_value()) {
      decisions.guests.push_back(HoldDecision(guest, absl::StrCat("proxmox: hold ", *unsafe[i])));
      continue;
    }
    const Member& m = *by_index[i];
    const std::string numbers = absl::StrCat(
        head, " cur=", FormatMib(m.cur), " min=", FormatMib(m.min), " max=", FormatMib(m.max),
        " shares=", guest.shares, " free=", FormatMib(*guest.unused_bytes),
        " needy=", m.needy ? 1 : 0, " desired=", FormatMib(m.desired));
    if (std::llround(m.planned) == guest.actual_bytes) {
      decisions.guests.push_back(HoldDecision(guest, absl::StrCat(numbers, " hold=no_change")));
      continue;
    }
    GuestDecision d;
    d.uuid = guest.uuid;
    d.target_bytes = ClampTarget(guest, m.planned);
    d.reason = absl::StrCat(numbers, " step_max=", FormatMib(params_.max_change_bytes), " -> ",
                            FormatMib(d.target_bytes));
    decisions.guests.push_back(d);
  }
  decisions.summary = absl::StrCat(
      head, " budget=", FormatMib(host.guest_budget_bytes), " budget_free=", FormatMib(budget_free),
      " host_available_free=", FormatMib(host_free), " unplaced=", FormatMib(rest),
      " guests=", snapshot.guests.size(), " sharing=", members.size(), " needy=", needy.size());
  return decisions;
}

}  // namespace plimsoll::policy
