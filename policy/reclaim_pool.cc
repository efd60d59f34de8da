#include "policy/reclaim_pool.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "policy/reason_format.h"

namespace plimsoll::policy {

bool CostedByRss(const GuestView& guest, const HostView& host) {
  return host.in_guest_reclaim && guest.free_page_reporting.value_or(false) &&
         guest.host_rss_bytes.has_value() && *guest.host_rss_bytes > 0 &&
         *guest.host_rss_bytes <= 2 * guest.max_bytes;
}

bool ReclaimsInGuest(const GuestView& guest, const HostView& host) {
  return CostedByRss(guest, host) && guest.agent_reclaims.value_or(false) &&
         guest.anon_bytes.has_value() && guest.active_file_bytes.has_value();
}

bool AgentMayReclaim(const GuestView& guest, const HostView& host) {
  return CostedByRss(guest, host) && (!guest.agent_reclaims.has_value() || ReclaimsInGuest(guest, host));
}

ReclaimPool SizePool(const std::vector<PoolMember>& members) {
  ReclaimPool pool;
  double squares = 0;
  for (const PoolMember& m : members) {
    ++pool.members;
    pool.lent += std::max(0.0, m.commitment - m.rss);
    squares += m.burst * m.burst;
  }
  pool.reserve = std::sqrt(squares);
  pool.covers = pool.members > 0 && pool.lent >= pool.reserve;
  return pool;
}

std::string ReclaimPoolSummary(const ReclaimPool& pool) {
  if (pool.members == 0) return "";
  return absl::StrCat("pool members=", pool.members, " lent=", FormatMib(pool.lent),
                      " reserve=", FormatMib(pool.reserve), " covers=", pool.covers ? 1 : 0);
}

}  // namespace plimsoll::policy
