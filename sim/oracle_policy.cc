#include "sim/oracle_policy.h"

#include <algorithm>
#include <array>
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
  // Per guest, four sizes within [min, max], each step above the last adding what costs more to
  // lose: min, + the hard part, + the cache part, + the headroom. A guest whose balloon does
  // not move is fixed at max(actual, the last) on every step.
  constexpr int kLevels = 4;
  static const char* const kModes[kLevels] = {"shortfall", "cache_cut", "headroom_cut", "fit"};
  std::vector<std::array<double, kLevels>> level(n);
  std::vector<bool> fixed(n, false);
  std::array<double, kLevels> sum{};
  double sum_fixed = 0;
  for (size_t i = 0; i < n; ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    const double min = static_cast<double>(g.min_bytes);
    const double max = static_cast<double>(g.max_bytes);
    const bool known = i < truth.guests.size();
    const double hard = known ? truth.guests[i].hard : max;
    const double cache = known ? truth.guests[i].cache : 0;
    level[i] = {min, std::clamp(hard, min, max), std::clamp(hard + cache, min, max),
                std::clamp(hard + cache + OracleHeadroom(g.max_bytes), min, max)};
    if (!known || !truth.guests[i].moves) {
      fixed[i] = true;
      level[i].fill(std::max(level[i][kLevels - 1], static_cast<double>(g.actual_bytes)));
      sum_fixed += level[i][0];
      continue;
    }
    for (int l = 0; l < kLevels; ++l) sum[l] += level[i][l];
  }
  const double room = budget - sum_fixed;
  // The highest step that fits, and the share of the next one above it that fits too.
  int step = kLevels - 1;
  double share = 1;
  if (sum[kLevels - 1] > room) {
    step = 0;
    while (step + 1 < kLevels - 1 && sum[step + 1] <= room) ++step;
    const double span = sum[step + 1] - sum[step];
    share = span > 0 ? std::clamp((room - sum[step]) / span, 0.0, 1.0) : 0;
  }
  policy::Decisions d;
  d.guests.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    const auto& lv = level[i];
    const double target =
        fixed[i] || step == kLevels - 1 ? lv[step] : lv[step] + share * (lv[step + 1] - lv[step]);
    policy::GuestDecision gd;
    gd.uuid = g.uuid;
    // Whole bytes, rounded down (never over the budget), never under min.
    gd.target_bytes = std::max(g.min_bytes, static_cast<int64_t>(std::floor(target)));
    const bool known = i < truth.guests.size();
    gd.reason = absl::StrFormat(
        "oracle: hard=%s cache=%s headroom=%s target=%s%s",
        FormatBytes(known ? truth.guests[i].hard : 0),
        FormatBytes(known ? truth.guests[i].cache : 0), FormatBytes(OracleHeadroom(g.max_bytes)),
        FormatBytes(static_cast<double>(gd.target_bytes)), fixed[i] ? " balloon=held" : "");
    d.guests.push_back(std::move(gd));
  }
  d.summary = absl::StrFormat("oracle: budget=%s want=%s mode=%s", FormatBytes(budget),
                              FormatBytes(sum[kLevels - 1] + sum_fixed), kModes[step]);
  return d;
}

policy::Decisions OraclePolicy::Decide(const policy::Snapshot& snapshot,
                                       const policy::PolicyState& state) const {
  return OracleDecide(snapshot, truth_());
}

}  // namespace plimsoll::sim
