#include "ctl/guest_table.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctl/short_reason.h"

namespace plimsoll::ctl {
namespace {

std::string ManagementLabel(plimsoll::v1::ManagementState s) {
  switch (s) {
    case plimsoll::v1::MANAGEMENT_STATE_MANAGED:
      return "managed";
    case plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON:
      return "no-balloon";
    case plimsoll::v1::MANAGEMENT_STATE_STALE_STATS:
      return "stale";
    case plimsoll::v1::MANAGEMENT_STATE_DRY_RUN:
      return "dry-run";
    case plimsoll::v1::MANAGEMENT_STATE_APPLY_FAILED:
      return "apply-failed";
    case plimsoll::v1::MANAGEMENT_STATE_EXCLUDED:
      return "excluded";
    case plimsoll::v1::MANAGEMENT_STATE_PINNED:
      return "pinned";
    case plimsoll::v1::MANAGEMENT_STATE_PAUSED:
      return "paused";
    case plimsoll::v1::MANAGEMENT_STATE_BUSY:
      return "busy";
    default:
      return "-";
  }
}

std::string Signal(const plimsoll::v1::MemorySignal& s, bool present) {
  return present ? HumanBytes(s.bytes()) : "-";
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024 * 10) return absl::StrFormat("%.1fGi", b / (1024.0 * 1024 * 1024));
  return absl::StrFormat("%.0fMi", b / (1024.0 * 1024));
}

std::string RenderHost(const plimsoll::v1::HostStatus& h) {
  return absl::StrFormat(
      "host: budget=%s guests_actual=%s guests_rss=%s mem_available=%s reserve=%s psi_some_avg10=%.2f "
      "policy=%s%s libvirt=%s tick=%d\n",
      HumanBytes(h.guest_budget_bytes()), HumanBytes(h.guests_actual_bytes()), h.has_guests_rss_bytes() ? HumanBytes(h.guests_rss_bytes()) : std::string("-"),
      HumanBytes(h.mem_available_bytes()), HumanBytes(h.host_reserve_bytes()),
      h.psi_memory_some_avg10(), h.policy(), h.dry_run() ? " (dry-run)" : "",
      h.libvirt_connected() ? "connected" : "DISCONNECTED", h.tick()) +
         (h.policy_summary().empty() ? "" : absl::StrCat("host: policy: ", h.policy_summary(), "\n")) +
         (h.paused() ? "host: management PAUSED (plimsollctl host set --resume)\n" : "") +
         (h.state_problem().empty() ? "" : absl::StrCat("host: STATE FILE PROBLEM: ", h.state_problem(), "\n"));
}

std::string RenderLineSummary(const plimsoll::v1::HostLine& l) {
  return absl::StrCat("line: offered=", HumanBytes(l.offered_bytes()), " headroom=", HumanBytes(l.headroom_bytes()),
                      " committed=", HumanBytes(l.committed_bytes()), "/capacity=", HumanBytes(l.capacity_bytes()),
                      " at_ceiling=", l.guests_at_ceiling(), "/", l.guests(), l.over_line() ? " OVER THE LINE" : "",
                      l.stale() ? absl::StrCat(" STALE (", l.stale_reason(), ")") : "", "\n");
}

std::string RenderLine(const plimsoll::v1::HostLine& l) {
  const int64_t guests = l.committed_bytes() - l.burst_reserve_bytes();
  std::string out = absl::StrFormat(
      "offered          %8s  what this host offers to schedulers now%s\n"
      "capacity         %8s  the guest budget: min(MemTotal - host reserve, configured budget)\n"
      "committed        %8s  guests %s (max(floor, working set) each; %d of %d at their ceiling, without fresh "
      "stats) + burst reserve %s\n"
      "new guest room   %8s  what a new guest touches before its balloon can shrink it\n"
      "headroom         %8s  capacity - committed - new guest room\n"
      "over the line    %8s  committed %s capacity\n",
      HumanBytes(l.offered_bytes()),
      l.stale() ? " (0: the line is stale)"
      : l.offered_bytes() < l.headroom_bytes() ? " (below the headroom: a rise is offered once it has held)"
                                                : "",
      HumanBytes(l.capacity_bytes()), HumanBytes(l.committed_bytes()), HumanBytes(guests), l.guests_at_ceiling(),
      l.guests(), HumanBytes(l.burst_reserve_bytes()), HumanBytes(l.new_guest_room_bytes()),
      HumanBytes(l.headroom_bytes()), l.over_line() ? "YES" : "no", l.over_line() ? ">" : "<=");
  absl::StrAppend(&out, "stale            ", absl::StrFormat("%8s", l.stale() ? "YES" : "no"),
                  l.stale() ? absl::StrCat("  ", l.stale_reason()) : "", "\n");
  absl::StrAppend(&out, "tick ", l.tick(),
                  l.computed_unix_micros() == 0
                      ? std::string()
                      : absl::StrCat(" at ", absl::FormatTime("%Y-%m-%d %H:%M:%S %Z",
                                                              absl::FromUnixMicros(l.computed_unix_micros()),
                                                              absl::LocalTimeZone())),
                  "\n", l.explanation().empty() ? "" : absl::StrCat(l.explanation(), "\n"));
  return out;
}

// Breaks each line longer than `width` at spaces; continuation lines start with `indent`. A word
// longer than a line stays whole (it cannot be broken without losing it).
std::string WrapLines(const std::string& text, size_t width, const std::string& indent) {
  if (width == 0) return text;
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    std::string current;
    for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      if (!current.empty() && current.size() + 1 + word.size() > width) {
        absl::StrAppend(&out, current, "\n");
        current = indent;
      }
      absl::StrAppend(&current, current.empty() || current == indent ? "" : " ", word);
    }
    absl::StrAppend(&out, current, "\n");
  }
  return out;
}

std::string RenderGuestTable(const plimsoll::v1::ListGuestsResponse& view, size_t line_width) {
  std::string out = WrapLines(
      RenderHost(view.host()) + (view.has_host_line() ? RenderLineSummary(view.host_line()) : std::string()),
      line_width, "      ");
  size_t name_w = 5;
  for (const auto& g : view.guests()) name_w = std::max(name_w, g.name().size());
  // Every cell but the reason: name and state left-aligned, sizes right-aligned.
  auto columns = [name_w](const std::vector<std::string>& cells) {
    std::string line = cells[0] + std::string(name_w - std::min(name_w, cells[0].size()) + 1, ' ');
    line += cells[1] + std::string(13 - std::min<size_t>(12, cells[1].size()), ' ');
    for (size_t i = 2; i < cells.size(); ++i) {
      const size_t w = i + 1 == cells.size() ? 6 : 8;
      line += std::string(w - std::min(w, cells[i].size()), ' ') + cells[i] + " ";
    }
    return line + " ";
  };
  auto fit = [line_width](const std::string& prefix, absl::string_view reason) {
    if (line_width == 0) return std::string(reason);
    const size_t room = line_width > prefix.size() ? line_width - prefix.size() : 0;
    return room == 0 ? std::string() : ShortReason(reason, room);
  };
  const std::string header = columns({"GUEST", "STATE", "MAX", "MIN", "TARGET", "ACTUAL", "CACHE", "USABLE", "AGE"});
  out += header + "REASON\n";
  for (const auto& g : view.guests()) {
    std::string reason = g.last_decision().reason();
    if (!g.state_detail().empty() && reason.find(g.state_detail()) == std::string::npos) {
      reason = absl::StrCat(reason, reason.empty() ? "" : " | ", g.state_detail());
    }
    const auto& s = g.stats();
    const std::string prefix =
        columns({g.name(), ManagementLabel(g.management_state()), HumanBytes(g.max_bytes()),
                 HumanBytes(g.min_bytes()), HumanBytes(g.target_bytes()), HumanBytes(g.actual_bytes()),
                 Signal(s.disk_caches(), s.has_disk_caches()), Signal(s.usable(), s.has_usable()),
                 absl::StrFormat("%.0fs", s.stats_age_seconds())});
    out += prefix + fit(prefix, reason) + "\n";
  }
  return out;
}

std::string RenderGuest(const plimsoll::v1::Guest& g) {
  const auto& s = g.stats();
  const auto& d = g.last_decision();
  std::string out;
  absl::StrAppend(&out, "name:            ", g.name(), "\n");
  absl::StrAppend(&out, "uuid:            ", g.uuid(), "\n");
  absl::StrAppend(&out, "run_state:       ", plimsoll::v1::GuestRunState_Name(g.run_state()), "\n");
  absl::StrAppend(&out, "management:      ", ManagementLabel(g.management_state()), "\n");
  absl::StrAppend(&out, "max:             ", HumanBytes(g.max_bytes()), "\n");
  absl::StrAppend(&out, "min:             ", HumanBytes(g.min_bytes()), "\n");
  absl::StrAppend(&out, "target:          ", HumanBytes(g.target_bytes()), "\n");
  absl::StrAppend(&out, "actual:          ", HumanBytes(g.actual_bytes()), "\n");
  absl::StrAppend(&out, "unused (free):   ", Signal(s.unused(), s.has_unused()), "\n");
  absl::StrAppend(&out, "usable (avail):  ", Signal(s.usable(), s.has_usable()), "\n");
  absl::StrAppend(&out, "disk_caches:     ", Signal(s.disk_caches(), s.has_disk_caches()), "\n");
  absl::StrAppend(&out, "qemu rss:        ", Signal(s.rss(), s.has_rss()), "\n");
  // Free page reporting: where on, the guest's cost to the host is its QEMU RSS above.
  absl::StrAppend(&out, "page reporting:  ",
                  !g.has_free_page_reporting() ? "unknown" : g.free_page_reporting() ? "on" : "off", "\n");
  if (g.agent().has_reclaim()) {
    // The agent's in-guest reclaim: what it says, the bounds sent, and how much of its claims
    // QEMU's RSS confirmed.
    const auto& r = g.agent().reclaim();
    auto bytes = [](uint64_t b) { return HumanBytes(static_cast<int64_t>(std::min<uint64_t>(b, INT64_MAX))); };
    absl::StrAppend(&out, "reclaim:         ", r.state(), " (", r.reason(), ")", r.dry_run() ? " dry-run" : "",
                    " agent keep ", bytes(r.agent_keep_bytes()), ", bounds sent: ",
                    !r.has_bounds_enabled()  ? std::string("none")
                    : !r.bounds_enabled()    ? std::string("off")
                                             : "keep " + bytes(r.bounds_keep_bytes()),
                    "\n");
    absl::StrAppend(&out, "reclaim claims:  ", bytes(r.claimed_bytes()), " claimed, ", bytes(r.confirmed_bytes()),
                    " confirmed by qemu rss, ", bytes(r.unconfirmed_bytes()), " not (", r.unconfirmed_claims(),
                    " unconfirmed claims, last ", r.last_verdict(), ")",
                    r.pending_claim_bytes() > 0 ? ", " + bytes(r.pending_claim_bytes()) + " pending" : "",
                    r.bounds_pause_left_seconds() > 0
                        ? absl::StrFormat(", bounds paused %.0fs more", r.bounds_pause_left_seconds())
                        : std::string(),
                    "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("stats:           %s, age %.1fs\n",
                                        s.stats_fresh() ? "fresh" : "NOT fresh", s.stats_age_seconds()));
  absl::StrAppend(&out, "last decision:   tick ", d.tick(), " ", d.policy(), " ",
                  plimsoll::v1::Direction_Name(d.direction()), " ", HumanBytes(d.previous_target_bytes()),
                  " -> ", HumanBytes(d.target_bytes()), d.applied() ? " (applied)" : " (not applied)", "\n");
  absl::StrAppend(&out, "reason:          ", d.reason(), "\n");
  if (!g.state_detail().empty()) absl::StrAppend(&out, "detail:          ", g.state_detail(), "\n");
  if (g.has_override()) absl::StrAppend(&out, "override:        ", RenderOverride(g.override()), "\n");
  if (g.has_reclaim_hold()) {
    absl::StrAppend(&out, "reclaim hold:    ", g.reclaim_hold().reclaim_id(), " at most ",
                    HumanBytes(g.reclaim_hold().max_target_bytes()), " until ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMicros(g.reclaim_hold().hold_until_unix_micros()),
                                     absl::LocalTimeZone()),
                    "\n");
  }
  return out;
}

std::string RenderOverride(const plimsoll::v1::GuestOverride& o) {
  std::vector<std::string> parts;
  if (o.has_min_bytes()) parts.push_back("min=" + HumanBytes(o.min_bytes()));
  if (o.has_max_bytes()) parts.push_back("max=" + HumanBytes(o.max_bytes()));
  if (o.has_pin_bytes()) parts.push_back("pin=" + HumanBytes(o.pin_bytes()));
  if (o.has_shares()) parts.push_back(absl::StrCat("shares=", o.shares()));
  if (o.has_priority()) parts.push_back(absl::StrCat("priority=", o.priority()));
  if (o.has_exclude()) parts.push_back(absl::StrCat("exclude=", o.exclude() ? "true" : "false"));
  if (o.has_note()) parts.push_back(absl::StrCat("note=\"", o.note(), "\""));
  if (o.force()) parts.push_back("force");
  std::string out = parts.empty() ? "(none)" : absl::StrJoin(parts, " ");
  if (!o.updated_by().empty()) {
    absl::StrAppend(&out, "  (by ", o.updated_by(), " at ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMicros(o.updated_unix_micros()),
                                     absl::LocalTimeZone()),
                    ")");
  }
  return out;
}

std::string RenderOverrides(const std::vector<plimsoll::v1::GuestOverride>& overrides) {
  if (overrides.empty()) return "no overrides\n";
  std::string out;
  for (const auto& o : overrides) {
    absl::StrAppend(&out, o.guest_name().empty() ? o.guest_uuid() : o.guest_name(), " (", o.guest_uuid(), "): ",
                    RenderOverride(o), "\n");
  }
  return out;
}

std::string RenderHostPolicy(const plimsoll::v1::HostPolicy& p) {
  std::vector<std::string> parts;
  if (p.has_guest_memory_budget_bytes()) parts.push_back("budget=" + HumanBytes(p.guest_memory_budget_bytes()));
  if (p.has_host_reserve_bytes()) parts.push_back("reserve=" + HumanBytes(p.host_reserve_bytes()));
  if (p.has_policy()) parts.push_back("policy=" + p.policy());
  if (p.has_paused()) parts.push_back(p.paused() ? "paused" : "running");
  return parts.empty() ? "as configured" : absl::StrJoin(parts, " ");
}

std::string RenderPlan(const plimsoll::v1::ReclaimPlan& p) {
  std::string out = absl::StrCat(p.dry_run() ? "plan (dry run, nothing moved)" : p.applied() ? "applied" : "not applied",
                                 " ", p.id(), ": ", p.summary(), "\n");
  absl::StrAppend(&out, "requested ", HumanBytes(p.requested_bytes()), ", planned ", HumanBytes(p.planned_bytes()));
  if (p.applied()) absl::StrAppend(&out, ", held for ", p.hold_seconds(), "s");
  absl::StrAppend(&out, "\n");
  for (const auto& i : p.items()) {
    absl::StrAppend(&out, absl::StrFormat("  take %8s from %-16s %8s -> %-8s  %s\n", HumanBytes(i.reclaim_bytes()),
                                          i.guest_name(), HumanBytes(i.current_target_bytes()),
                                          HumanBytes(i.new_target_bytes()), i.reason()));
  }
  for (const auto& s : p.skipped()) {
    absl::StrAppend(&out, absl::StrFormat("  skip %-16s %s\n", s.guest_name(), s.reason()));
  }
  return out;
}

std::string RenderEvent(const plimsoll::v1::WatchEvent& e) {
  const std::string stamp = absl::FormatTime("%H:%M:%S", absl::FromUnixMicros(e.unix_micros()), absl::LocalTimeZone());
  std::string body;
  switch (e.event_case()) {
    case plimsoll::v1::WatchEvent::kDecision: {
      const auto& d = e.decision().decision();
      body = absl::StrCat("decision ", e.decision().guest_name(), " ",
                          d.direction() == plimsoll::v1::DIRECTION_INFLATE   ? "shrink"
                          : d.direction() == plimsoll::v1::DIRECTION_DEFLATE ? "grow"
                                                                             : "hold",
                          " ", HumanBytes(d.previous_target_bytes()), " -> ", HumanBytes(d.target_bytes()),
                          d.applied() ? "" : " (not applied)", " ", d.reason());
      break;
    }
    case plimsoll::v1::WatchEvent::kGuest: {
      const auto& g = e.guest();
      std::string change = plimsoll::v1::GuestEvent::Change_Name(g.change());
      if (change.rfind("CHANGE_", 0) == 0) change = absl::AsciiStrToLower(change.substr(7));
      body = absl::StrCat("guest ", g.guest().name(), " ", change, " ", ManagementLabel(g.guest().management_state()),
                          g.detail().empty() ? "" : absl::StrCat(": ", g.detail()));
      break;
    }
    case plimsoll::v1::WatchEvent::kHostPolicy:
      body = absl::StrCat("host policy ", RenderHostPolicy(e.host_policy().policy()),
                          e.host_policy().policy().updated_by().empty() ? "" : absl::StrCat(" (by ", e.host_policy().policy().updated_by(), ")"));
      break;
    case plimsoll::v1::WatchEvent::kGuestOverride:
      body = absl::StrCat("override ", e.guest_override().guest_name(), " ",
                          e.guest_override().cleared() ? "cleared" : RenderOverride(e.guest_override().override()));
      break;
    case plimsoll::v1::WatchEvent::kReclaim:
      body = absl::StrCat("reclaim ", plimsoll::v1::ReclaimEvent::Phase_Name(e.reclaim().phase()), " ",
                          e.reclaim().plan().id(), ": ", e.reclaim().plan().summary());
      break;
    case plimsoll::v1::WatchEvent::kHostLine:
      body = RenderLineSummary(e.host_line());
      body.pop_back();  // its newline; the event's own ends the line
      break;
    case plimsoll::v1::WatchEvent::kDropped:
      body = absl::StrCat("!! ", e.dropped().count(), " events dropped (this client read too slowly)");
      break;
    case plimsoll::v1::WatchEvent::kSnapshotComplete:
      body = absl::StrCat("-- snapshot complete (", e.snapshot_complete().guests(), " guests); following changes");
      break;
    default:
      body = "unknown event";
  }
  return absl::StrCat(e.unix_micros() ? stamp : "--:--:--", " ", body, "\n");
}

}  // namespace plimsoll::ctl
