#include "server/events/view_events.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"

namespace plimsoll::server {
namespace {

using ::plimsoll::v1::GuestEvent;
using ::plimsoll::v1::WatchEvent;

std::string Short(const std::string& enum_name, const std::string& prefix) {
  return enum_name.rfind(prefix, 0) == 0 ? enum_name.substr(prefix.size()) : enum_name;
}

// What changed between two states of one guest, "" when nothing worth an event.
std::string ChangeDetail(const plimsoll::v1::Guest& a, const plimsoll::v1::Guest& b) {
  std::vector<std::string> parts;
  if (a.run_state() != b.run_state()) {
    parts.push_back(absl::StrCat("run_state ", Short(plimsoll::v1::GuestRunState_Name(a.run_state()), "GUEST_RUN_STATE_"),
                                 " -> ", Short(plimsoll::v1::GuestRunState_Name(b.run_state()), "GUEST_RUN_STATE_")));
  }
  if (a.management_state() != b.management_state()) {
    parts.push_back(absl::StrCat(
        "management_state ", Short(plimsoll::v1::ManagementState_Name(a.management_state()), "MANAGEMENT_STATE_"),
        " -> ", Short(plimsoll::v1::ManagementState_Name(b.management_state()), "MANAGEMENT_STATE_")));
  }
  if (a.state_detail() != b.state_detail()) parts.push_back(absl::StrCat("state_detail \"", b.state_detail(), "\""));
  if (a.name() != b.name()) parts.push_back(absl::StrCat("name ", a.name(), " -> ", b.name()));
  if (a.max_bytes() != b.max_bytes()) parts.push_back(absl::StrCat("max_bytes ", a.max_bytes(), " -> ", b.max_bytes()));
  // Most guests have neither: skip the reflection-based comparison for them.
  if ((a.has_override() || b.has_override()) &&
      !google::protobuf::util::MessageDifferencer::Equals(a.override(), b.override())) {
    parts.push_back("override");
  }
  if ((a.has_reclaim_hold() || b.has_reclaim_hold()) &&
      !google::protobuf::util::MessageDifferencer::Equals(a.reclaim_hold(), b.reclaim_hold())) {
    parts.push_back("reclaim_hold");
  }
  return absl::StrJoin(parts, ", ");
}

WatchEvent GuestChange(GuestEvent::Change change, const plimsoll::v1::Guest& g, std::string detail) {
  WatchEvent e;
  e.mutable_guest()->set_change(change);
  *e.mutable_guest()->mutable_guest() = g;
  e.mutable_guest()->set_detail(std::move(detail));
  return e;
}

}  // namespace

std::vector<WatchEvent> EventsBetween(const plimsoll::v1::ListGuestsResponse* previous,
                                      const plimsoll::v1::ListGuestsResponse& next) {
  std::vector<WatchEvent> out;
  // The usual tick lists the same guests in the same order as the one before: pair
  // them by position, without maps of every uuid.
  bool aligned = previous != nullptr && previous->guests_size() == next.guests_size();
  for (int i = 0; aligned && i < next.guests_size(); ++i) {
    aligned = previous->guests(i).uuid() == next.guests(i).uuid();
  }
  absl::flat_hash_map<std::string, const plimsoll::v1::Guest*> before;
  if (previous != nullptr && !aligned) {
    for (const auto& g : previous->guests()) before[g.uuid()] = &g;
  }
  absl::flat_hash_map<std::string, bool> seen;
  for (int i = 0; i < next.guests_size(); ++i) {
    const plimsoll::v1::Guest& g = next.guests(i);
    const plimsoll::v1::Guest* was = nullptr;
    if (aligned) {
      was = &previous->guests(i);
    } else {
      seen[g.uuid()] = true;
      if (auto it = before.find(g.uuid()); it != before.end()) was = it->second;
    }
    if (was == nullptr) {
      out.push_back(GuestChange(GuestEvent::CHANGE_APPEARED, g, "appeared"));
    } else if (std::string detail = ChangeDetail(*was, g); !detail.empty()) {
      out.push_back(GuestChange(GuestEvent::CHANGE_CHANGED, g, std::move(detail)));
    }
    const bool new_decision = g.has_last_decision() && g.last_decision().tick() > 0 &&
                              (was == nullptr || was->last_decision().tick() != g.last_decision().tick());
    if (new_decision) {
      WatchEvent e;
      e.set_unix_micros(g.last_decision().unix_micros());
      e.mutable_decision()->set_guest_name(g.name());
      e.mutable_decision()->set_guest_uuid(g.uuid());
      *e.mutable_decision()->mutable_decision() = g.last_decision();
      out.push_back(std::move(e));
    }
  }
  if (previous != nullptr && !aligned) {
    for (const auto& g : previous->guests()) {
      if (!seen.contains(g.uuid())) out.push_back(GuestChange(GuestEvent::CHANGE_DISAPPEARED, g, "disappeared"));
    }
  }
  // The host line, when what a scheduler acts on changed: the offer, over_line or staleness. The
  // other figures move every tick and are read with GetHostLine or from /metrics.
  if (next.has_host_line() && next.host_line().tick() > 0) {
    const plimsoll::v1::HostLine& b = next.host_line();
    const bool had = previous != nullptr && previous->has_host_line();
    const plimsoll::v1::HostLine& a = had ? previous->host_line() : b;
    if (!had || a.offered_bytes() != b.offered_bytes() || a.over_line() != b.over_line() || a.stale() != b.stale()) {
      WatchEvent e;
      e.set_unix_micros(b.computed_unix_micros());
      *e.mutable_host_line() = b;
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<WatchEvent> SnapshotEvents(const plimsoll::v1::ListGuestsResponse& view) {
  std::vector<WatchEvent> out;
  for (const auto& g : view.guests()) out.push_back(GuestChange(GuestEvent::CHANGE_SNAPSHOT, g, ""));
  if (view.has_host_line()) {
    WatchEvent line;
    *line.mutable_host_line() = view.host_line();
    out.push_back(std::move(line));
  }
  WatchEvent done;
  done.mutable_snapshot_complete()->set_guests(view.guests_size());
  out.push_back(std::move(done));
  return out;
}

}  // namespace plimsoll::server
