#include "server/loop/stored_controls.h"

#include <algorithm>

namespace plimsoll::server {

int64_t GuestBudget(int64_t mem_total_bytes, int64_t reserve_bytes, std::optional<int64_t> cap) {
  int64_t budget = std::max<int64_t>(0, mem_total_bytes - reserve_bytes);
  if (cap.has_value()) budget = std::min(budget, *cap);
  return budget;
}

plimsoll::v1::ListGuestsResponse WithStoredControls(const plimsoll::v1::ListGuestsResponse& view,
                                                    const OverrideStore::Snapshot& stored, const HostBase& base) {
  plimsoll::v1::ListGuestsResponse out = view;
  for (plimsoll::v1::Guest& g : *out.mutable_guests()) {
    if (auto it = stored.guests.find(g.uuid()); it != stored.guests.end()) {
      *g.mutable_override() = it->second;
    } else {
      g.clear_override();
    }
  }
  plimsoll::v1::HostStatus* host = out.mutable_host();
  const plimsoll::v1::HostPolicy& hp = stored.host;
  *host->mutable_host_policy() = hp;
  host->set_guest_overrides(static_cast<int64_t>(stored.guests.size()));
  host->set_paused(hp.paused());
  const int64_t reserve = hp.has_host_reserve_bytes() ? hp.host_reserve_bytes() : base.reserve_bytes;
  const std::optional<int64_t> cap =
      hp.has_guest_memory_budget_bytes() ? std::optional<int64_t>(hp.guest_memory_budget_bytes()) : base.budget_cap;
  host->set_host_reserve_bytes(reserve);
  if (host->mem_total_bytes() > 0) host->set_guest_budget_bytes(GuestBudget(host->mem_total_bytes(), reserve, cap));
  return out;
}

}  // namespace plimsoll::server
