#include "server/loop/host_line.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/mib_format.h"

namespace plimsoll::server {

int64_t GuestCommitment(const policy::GuestView& guest, const policy::GuestDecision* decision, bool* at_ceiling) {
  *at_ceiling = !guest.has_stats || !guest.stats_fresh;
  if (*at_ceiling) return guest.max_bytes;
  int64_t need = decision != nullptr ? std::max(decision->floor_bytes, decision->working_set_bytes) : 0;
  if (need <= 0) need = guest.actual_bytes;
  // Never below the configured floor (the loop keeps the guest there), never above the ceiling.
  return std::min(std::max(need, guest.min_bytes), guest.max_bytes);
}

plimsoll::v1::HostLine ComputeLine(const policy::Snapshot& snapshot, const policy::Decisions& decisions,
                                   const LineParams& params) {
  const bool matched = decisions.guests.size() == snapshot.guests.size();
  int64_t guests_sum = 0;
  int32_t at_ceiling = 0;
  for (size_t i = 0; i < snapshot.guests.size(); ++i) {
    bool ceiling = false;
    guests_sum += GuestCommitment(snapshot.guests[i], matched ? &decisions.guests[i] : nullptr, &ceiling);
    if (ceiling) ++at_ceiling;
  }
  plimsoll::v1::HostLine line;
  const int64_t capacity = snapshot.host.guest_budget_bytes;
  // Guests the policy counts by RSS keep their burst room in one pooled reserve, not in their
  // floors (pagecache's reclaim_pool.h): it is committed here too.
  const int64_t committed = guests_sum + params.burst_reserve_bytes + decisions.pool_reserve_bytes;
  const int64_t headroom = capacity - committed - params.new_guest_room_bytes;
  line.set_capacity_bytes(capacity);
  line.set_committed_bytes(committed);
  line.set_burst_reserve_bytes(params.burst_reserve_bytes);
  line.set_new_guest_room_bytes(params.new_guest_room_bytes);
  line.set_headroom_bytes(headroom);
  line.set_over_line(committed > capacity);
  line.set_guests(static_cast<int32_t>(snapshot.guests.size()));
  line.set_guests_at_ceiling(at_ceiling);
  line.set_explanation(absl::StrCat("capacity=", FormatMib(capacity), " committed=", FormatMib(committed),
                                    " (guests=", FormatMib(guests_sum), " burst_reserve=",
                                    FormatMib(params.burst_reserve_bytes),
                                    decisions.pool_reserve_bytes > 0
                                        ? absl::StrCat(" pool_reserve=", FormatMib(decisions.pool_reserve_bytes))
                                        : std::string(),
                                    ") new_guest_room=",
                                    FormatMib(params.new_guest_room_bytes), " headroom=", FormatMib(headroom),
                                    " guests=", snapshot.guests.size(), " at_ceiling=", at_ceiling,
                                    matched ? "" : " (no decisions: guests counted at their actual size)"));
  return line;
}

}  // namespace plimsoll::server
