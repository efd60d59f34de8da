#include "sim/oracle_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "policy/pagecache_policy.h"
#include "sim/units.h"

namespace plimsoll::sim {

double OracleHeadroom(int64_t max_bytes) {
  const policy::LawParams params = policy::PagecacheParams().law;
  return std::max(params.headroom_min_bytes, params.headroom_fraction * static_cast<double>(max_bytes));
}

namespace {

// How the two oracles differ: the headroom they keep, and per guest the least target a
// balloon that does not follow keeps (empty: it follows).
struct FitRules {
  bool headroom = true;
  const char* name = kOraclePolicyName;
  std::vector<std::optional<double>> hold;  // by guest; missing entries follow
};

policy::Decisions Fit(const policy::Snapshot& snapshot, const OracleTruth& truth,
                      const FitRules& rules) {
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
    const double headroom = rules.headroom ? OracleHeadroom(g.max_bytes) : 0;
    level[i] = {min, std::clamp(hard, min, max), std::clamp(hard + cache, min, max),
                std::clamp(hard + cache + headroom, min, max)};
    const bool held = i < rules.hold.size() && rules.hold[i].has_value();
    if (held) {
      // It will not go lower: counted where it stands.
      fixed[i] = true;
      level[i].fill(static_cast<double>(g.actual_bytes));
      sum_fixed += level[i][0];
      continue;
    }
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
    double target =
        fixed[i] || step == kLevels - 1 ? lv[step] : lv[step] + share * (lv[step + 1] - lv[step]);
    const bool held = i < rules.hold.size() && rules.hold[i].has_value();
    if (held) target = *rules.hold[i];  // its last target: no lower, and no chasing back up
    policy::GuestDecision gd;
    gd.uuid = g.uuid;
    // Whole bytes, rounded down (never over the budget), never under min.
    gd.target_bytes = std::max(g.min_bytes, static_cast<int64_t>(std::floor(target)));
    const bool known = i < truth.guests.size();
    if (rules.headroom) {
      gd.reason = absl::StrFormat(
          "%s: hard=%s cache=%s headroom=%s target=%s%s", rules.name,
          FormatBytes(known ? truth.guests[i].hard : 0),
          FormatBytes(known ? truth.guests[i].cache : 0), FormatBytes(OracleHeadroom(g.max_bytes)),
          FormatBytes(static_cast<double>(gd.target_bytes)), fixed[i] ? " balloon=held" : "");
    } else {
      gd.reason = absl::StrFormat(
          "%s: hard=%s cache=%s target=%s%s", rules.name,
          FormatBytes(known ? truth.guests[i].hard : 0),
          FormatBytes(known ? truth.guests[i].cache : 0),
          FormatBytes(static_cast<double>(gd.target_bytes)),
          held ? " balloon=not_following" : fixed[i] ? " balloon=held" : "");
    }
    d.guests.push_back(std::move(gd));
  }
  d.summary = absl::StrFormat("%s: budget=%s want=%s mode=%s", rules.name, FormatBytes(budget),
                              FormatBytes(sum[kLevels - 1] + sum_fixed), kModes[step]);
  return d;
}

}  // namespace

policy::Decisions OracleDecide(const policy::Snapshot& snapshot, const OracleTruth& truth) {
  return Fit(snapshot, truth, FitRules());
}

policy::Decisions LimitDecide(const policy::Snapshot& snapshot, const OracleTruth& truth,
                              const policy::PolicyState& state) {
  FitRules rules;
  rules.headroom = false;
  rules.name = kLimitPolicyName;
  const double now_s = absl::ToDoubleSeconds(snapshot.now - absl::UnixEpoch());
  rules.hold.resize(snapshot.guests.size());
  for (size_t i = 0; i < snapshot.guests.size(); ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    const LimitMemory* m = policy::FindGuestState<LimitMemory>(state, g.uuid);
    if (m == nullptr) continue;
    // The truth says it does not move (stuck, trickling): the last target stays.
    if (i < truth.guests.size() && !truth.guests[i].moves) {
      rules.hold[i] = m->target;
      continue;
    }
    const double actual = static_cast<double>(g.actual_bytes);
    constexpr double kTolerance = 1024.0 * 1024.0;
    const bool asked_down = m->target < m->actual - kTolerance;
    if (!asked_down) continue;
    const bool arrived = actual <= m->target + kTolerance;
    const bool moved = m->actual - actual >= kLimitFollowRate * std::max(0.0, now_s - m->at_s);
    if (!arrived && !moved) rules.hold[i] = m->target;
  }
  // A balloon that does not follow is held only while the fit would not give it more than its
  // last target: giving is never held back.
  const policy::Decisions free = Fit(snapshot, truth, FitRules{false, kLimitPolicyName, {}});
  for (size_t i = 0; i < rules.hold.size() && i < free.guests.size(); ++i) {
    if (rules.hold[i].has_value() &&
        static_cast<double>(free.guests[i].target_bytes) > *rules.hold[i]) {
      rules.hold[i].reset();
    }
  }
  policy::Decisions d = Fit(snapshot, truth, rules);
  for (size_t i = 0; i < d.guests.size(); ++i) {
    const policy::GuestView& g = snapshot.guests[i];
    const LimitMemory* m = policy::FindGuestState<LimitMemory>(state, g.uuid);
    LimitMemory next;
    next.target = static_cast<double>(d.guests[i].target_bytes);
    next.actual = static_cast<double>(g.actual_bytes);
    next.at_s = now_s;
    // A held balloon is measured from where the hold began, so that a trickle of a page now and
    // then never adds up to "following" one decision at a time.
    if (rules.hold[i].has_value() && m != nullptr) {
      next.actual = m->actual;
      next.at_s = m->at_s;
    }
    d.next_state.guests[g.uuid].Set(next);
  }
  return d;
}

policy::Decisions OraclePolicy::Decide(const policy::Snapshot& snapshot,
                                       policy::PolicyState state) const {
  return OracleDecide(snapshot, truth_());
}

policy::Decisions LimitPolicy::Decide(const policy::Snapshot& snapshot,
                                      policy::PolicyState state) const {
  return LimitDecide(snapshot, truth_(), state);
}

}  // namespace plimsoll::sim
