#include "ctl/guest_table.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
      "host: budget=%s guests_actual=%s mem_available=%s reserve=%s psi_some_avg10=%.2f policy=%s%s "
      "libvirt=%s tick=%d\n",
      HumanBytes(h.guest_budget_bytes()), HumanBytes(h.guests_actual_bytes()),
      HumanBytes(h.mem_available_bytes()), HumanBytes(h.host_reserve_bytes()),
      h.psi_memory_some_avg10(), h.policy(), h.dry_run() ? " (dry-run)" : "",
      h.libvirt_connected() ? "connected" : "DISCONNECTED", h.tick());
}

std::string RenderGuestTable(const plimsoll::v1::ListGuestsResponse& view, int reason_width) {
  std::string out = RenderHost(view.host());
  size_t name_w = 5;
  for (const auto& g : view.guests()) name_w = std::max(name_w, g.name().size());
  auto row = [name_w](const std::vector<std::string>& cells) {
    // name left-aligned, state left-aligned, sizes right-aligned, reason as is.
    std::string line = cells[0] + std::string(name_w - std::min(name_w, cells[0].size()) + 1, ' ');
    line += cells[1] + std::string(13 - std::min<size_t>(12, cells[1].size()), ' ');
    for (size_t i = 2; i + 1 < cells.size(); ++i) {
      const size_t w = i + 2 == cells.size() ? 6 : 8;
      line += std::string(w - std::min(w, cells[i].size()), ' ') + cells[i] + " ";
    }
    return line + " " + cells.back() + "\n";
  };
  out += row({"GUEST", "STATE", "MAX", "MIN", "TARGET", "ACTUAL", "CACHE", "USABLE", "AGE", "REASON"});
  for (const auto& g : view.guests()) {
    std::string reason = g.last_decision().reason();
    if (!g.state_detail().empty() && reason.find(g.state_detail()) == std::string::npos) {
      reason = absl::StrCat(reason, reason.empty() ? "" : " | ", g.state_detail());
    }
    if (reason_width > 3 && static_cast<int>(reason.size()) > reason_width) {
      reason = reason.substr(0, reason_width - 3) + "...";
    }
    const auto& s = g.stats();
    out += row({g.name(), ManagementLabel(g.management_state()), HumanBytes(g.max_bytes()),
                HumanBytes(g.min_bytes()), HumanBytes(g.target_bytes()), HumanBytes(g.actual_bytes()),
                Signal(s.disk_caches(), s.has_disk_caches()), Signal(s.usable(), s.has_usable()),
                absl::StrFormat("%.0fs", s.stats_age_seconds()), reason});
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
  absl::StrAppend(&out, absl::StrFormat("stats:           %s, age %.1fs\n",
                                        s.stats_fresh() ? "fresh" : "NOT fresh", s.stats_age_seconds()));
  absl::StrAppend(&out, "last decision:   tick ", d.tick(), " ", d.policy(), " ",
                  plimsoll::v1::Direction_Name(d.direction()), " ", HumanBytes(d.previous_target_bytes()),
                  " -> ", HumanBytes(d.target_bytes()), d.applied() ? " (applied)" : " (not applied)", "\n");
  absl::StrAppend(&out, "reason:          ", d.reason(), "\n");
  if (!g.state_detail().empty()) absl::StrAppend(&out, "detail:          ", g.state_detail(), "\n");
  return out;
}

}  // namespace plimsoll::ctl
