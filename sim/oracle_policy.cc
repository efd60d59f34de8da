#include "sim/oracle_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "policy/pagecache_policy.h"
#include "sim/units.h"

namespace plimsoll::sim {

double OracleHeadroom(int64_t max_bytes) {
  const policy::PagecacheParams params;
  return std::max(params.headroom_min_bytes, params.headroom_fraction * max_bytes);
}

policy::Decisions OracleDecide(const policy::Snapshot& snapshot, const OracleTruth& truth) {
  const size_t n = snapshot.guests.size();
  const double budget =
      std::min<double>(snapshot.host.guest_budget_bytes,
                       static_cast<double>(snapshot.host.mem_total_bytes) - truth.host_other -
                           static_cast<double>(snapshot.host.host_reserve_bytes));
  // Per guest: the floor (min), the bare need, the need with headroom; all within [min, max].
  // A guest whose balloon does not inflate is fixed at max(actual, need + headroom).
  std::vector<double> lo(n), bare(n), want(n);
  std::vector<bool> fixed(n, false);
  double sum_fixed = 0, sum_lo = 0, sum_bare = 0, sum_want = 0;
  for (size_t i = 0; i < n; ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    const double min = static_cast<double>(g.min_bytes);
    const double max = static_cast<double>(g.max_bytes);
    const double need = i < truth.guests.size() ? truth.guests[i].need : max;
    lo[i] = min;
    bare[i] = std::clamp(need, min, max);
    want[i] = std::clamp(need + OracleHeadroom(g.max_bytes), min, max);
    if (i >= truth.guests.size() || !truth.guests[i].inflates) {
      fixed[i] = true;
      want[i] = bare[i] = lo[i] = std::max(want[i], static_cast<double>(g.actual_bytes));
      sum_fixed += want[i];
      continue;
    }
    sum_lo += lo[i];
    sum_bare += bare[i];
    sum_want += want[i];
  }
  const double room = budget - sum_fixed;
  const char* mode = "fit";
  std::vector<double> target = want;
  if (sum_want > room) {
    if (sum_bare <= room) {
      // Headroom shared: every guest keeps the same share of its headroom.
      mode = "headroom_cut";
      const double f = sum_want > sum_bare ? (room - sum_bare) / (sum_want - sum_bare) : 0;
      for (size_t i = 0; i < n; ++i) {
        if (!fixed[i]) target[i] = bare[i] + f * (want[i] - bare[i]);
      }
    } else {
      // Needs shared: every guest keeps the same share of its need above its min.
      mode = "shortfall";
      const double g =
          sum_bare > sum_lo ? std::clamp((room - sum_lo) / (sum_bare - sum_lo), 0.0, 1.0) : 0;
      for (size_t i = 0; i < n; ++i) {
        if (!fixed[i]) target[i] = lo[i] + g * (bare[i] - lo[i]);
      }
    }
  }
  policy::Decisions d;
  d.guests.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    policy::GuestDecision gd;
    gd.uuid = g.uuid;
    // Whole bytes, rounded down (never over the budget), never under min.
    gd.target_bytes = std::max(g.min_bytes, static_cast<int64_t>(std::floor(target[i])));
    gd.reason = absl::StrFormat(
        "oracle: need=%s headroom=%s target=%s%s",
        FormatBytes(i < truth.guests.size() ? truth.guests[i].need : 0),
        FormatBytes(OracleHeadroom(g.max_bytes)), FormatBytes(static_cast<double>(gd.target_bytes)),
        fixed[i] ? " balloon=held" : "");
    d.guests.push_back(std::move(gd));
  }
  d.summary = absl::StrFormat("oracle: budget=%s want=%s mode=%s", FormatBytes(budget),
                              FormatBytes(sum_want + sum_fixed), mode);
  return d;
}

policy::Decisions OraclePolicy::Decide(const policy::Snapshot& snapshot,
                                       const policy::PolicyState& state) const {
  return OracleDecide(snapshot, truth_());
}

}  // namespace plimsoll::sim
