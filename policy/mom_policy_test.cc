#include "policy/mom_policy.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMib = int64_t{1} << 20;

// Bytes for a (possibly fractional) MiB figure, rounded as the policy rounds.
int64_t Mib(double mib) { return std::llround(mib * static_cast<double>(kMib)); }

// A guest for the table: 4096 MiB now, 2048 MiB unused, 8192 MiB max, fresh stats, target ==
// actual. Setters chain: G().Unused(500).Min(4000).
struct G {
  int64_t actual_bytes = 4096 * kMib;
  std::optional<int64_t> unused_bytes = 2048 * kMib;
  int64_t max_bytes = 8192 * kMib;
  int64_t min_bytes = 0;
  bool has_stats = true;
  bool stats_fresh = true;
  std::optional<int64_t> target_bytes;  // defaults to actual

  G& Actual(double mib) { actual_bytes = Mib(mib); return *this; }
  G& Unused(double mib) { unused_bytes = Mib(mib); return *this; }
  G& NoUnused() { unused_bytes.reset(); return *this; }
  G& Max(double mib) { max_bytes = Mib(mib); return *this; }
  G& Min(double mib) { min_bytes = Mib(mib); return *this; }
  G& Target(double mib) { target_bytes = Mib(mib); return *this; }
  G& NoStats() { has_stats = false; stats_fresh = false; unused_bytes.reset(); return *this; }
  G& Stale() { stats_fresh = false; return *this; }
};

// The host for the table: a 10240 MiB guest budget on a host with 65536 MiB available and no
// reserve, so the budget decides unless a case says otherwise.
struct H {
  int64_t budget_mib = 10240;
  int64_t available_mib = 65536;
  int64_t reserve_mib = 0;

  H& Budget(int64_t mib) { budget_mib = mib; return *this; }
  H& Available(int64_t mib) { available_mib = mib; return *this; }
  H& Reserve(int64_t mib) { reserve_mib = mib; return *this; }
};

Snapshot MakeSnapshot(const H& host, const std::vector<G>& guests) {
  Snapshot snapshot;
  snapshot.now = absl::FromUnixSeconds(1'700'000'000);
  snapshot.tick = 7;
  snapshot.host.mem_total_bytes = 65536 * kMib;
  snapshot.host.mem_available_bytes = host.available_mib * kMib;
  snapshot.host.host_reserve_bytes = host.reserve_mib * kMib;
  snapshot.host.guest_budget_bytes = host.budget_mib * kMib;
  int i = 0;
  for (const G& spec : guests) {
    GuestView guest;
    guest.name = "vm" + std::to_string(i);
    guest.uuid = "uuid-" + std::to_string(i);
    ++i;
    guest.actual_bytes = spec.actual_bytes;
    guest.target_bytes = spec.target_bytes.value_or(spec.actual_bytes);
    guest.max_bytes = spec.max_bytes;
    guest.min_bytes = spec.min_bytes;
    guest.has_stats = spec.has_stats;
    guest.stats_fresh = spec.stats_fresh;
    guest.stats_age_seconds = spec.stats_fresh ? 5 : 120;
    guest.unused_bytes = spec.unused_bytes;
    guest.total_bytes = guest.actual_bytes;
    snapshot.guests.push_back(guest);
  }
  return snapshot;
}

struct Case {
  const char* name;
  H host;
  std::vector<G> guests;
  std::vector<int64_t> want_bytes;        // one per guest
  std::vector<std::string> reason_has;    // one substring per guest
  std::string summary_has;
};

// gtest prints a failing row by its name instead of its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  // With the default G() alone: 4096 of 10240 MiB used, 60% free, no pressure.
  // G() plus `filler` sum to 9216 MiB: 10% free, pressure, guest_free_pct = 0.10. The filler is
  // a full guest at its max, which is held in both modes.
  const G filler = G().Actual(5120).Unused(0).Max(5120);
  return {
      {"no_pressure_grows_by_step",
       H(),
       {G()},
       {Mib(4096 * 1.05)},
       {"mode=grow cur=4096MiB used=2048MiB guest_free_pct=0.20 -> 4300.8MiB set_by=step"},
       "mode=grow host_free_pct=60.0"},
      {"no_pressure_grows_to_wanted_when_guest_is_full",
       H(),
       {G().Unused(0)},
       {Mib(4096 * 1.2)},  // used + 20% of cur
       {"-> 4915.2MiB set_by=wanted"},
       "mode=grow"},
      {"pressure_shrinks_by_at_most_5pct",
       H(),
       {G(), filler},
       {Mib(4096 * 0.95), 5120 * kMib},
       {"mom: host_free_pct=10.0 mode=shrink cur=4096MiB used=2048MiB guest_free_pct=0.10 -> "
        "3891.2MiB set_by=step",
        "hold=never_grow_under_pressure"},
       "mode=shrink host_free_pct=10.0"},
      {"pressure_shrinks_less_when_guest_needs_its_memory",
       H(),
       {G().Unused(500), filler},
       {Mib(3596 + 0.10 * 4096), 5120 * kMib},
       {"-> 4005.6MiB set_by=wanted", "hold="},
       "mode=shrink"},
      {"pressure_never_grows_a_full_guest",
       H(),
       {G().Unused(100), filler},
       {4096 * kMib, 5120 * kMib},
       {"-> 4405.6MiB set_by=wanted hold=never_grow_under_pressure target=4096MiB", "hold="},
       "mode=shrink"},
      {"critical_pressure_squeezes_below_used",
       // 9800 of 10240 MiB used: 4.3% free, guest_free_pct = 0.043 - 0.05 < 0.
       H(),
       {G().Actual(4900).Unused(0), G().Actual(4900).Unused(0)},
       {Mib(4900 * (1 + (440.0 / 10240 - 0.05))), Mib(4900 * (1 + (440.0 / 10240 - 0.05)))},
       {"host_free_pct=4.3 mode=shrink cur=4900MiB used=4900MiB guest_free_pct=-0.01 -> "
        "4865.5MiB set_by=wanted",
        "set_by=wanted"},
       "mode=shrink host_free_pct=4.3"},
      {"shrink_clamped_to_min",
       H(),
       {G().Min(4000), filler},
       {4000 * kMib, 5120 * kMib},
       {"-> 4000MiB set_by=min", "hold="},
       "mode=shrink"},
      {"min_above_cur_under_pressure_holds_then_raises_target_to_min",
       H(),
       {G().Min(4500), filler},
       {4500 * kMib, 5120 * kMib},
       {"set_by=min hold=never_grow_under_pressure target=4096MiB raised_to_min=4500MiB", "hold="},
       "mode=shrink"},
      {"grow_clamped_to_max",
       H(),
       {G().Max(4200)},
       {4200 * kMib},
       {"-> 4200MiB set_by=max"},
       "mode=grow"},
      {"grow_at_max_holds",
       H(),
       {G().Max(4096)},
       {4096 * kMib},
       {"max=4096MiB hold=at_max target=4096MiB"},
       "mode=grow"},
      {"min_above_max_gives_max",
       H(),
       {G().Actual(2048).Unused(1024).Max(3000).Min(5000)},
       {3000 * kMib},
       {"-> 3000MiB set_by=min"},
       "mode=grow"},
      {"stale_stats_hold_under_pressure",
       H(),
       {G().Stale().Target(4000), filler},
       {4000 * kMib, 5120 * kMib},
       {"mom: hold stats_fresh=false stats_age_s=120.0 target=4000MiB", "hold="},
       "mode=shrink"},
      {"no_stats_hold",
       H(),
       {G().NoStats(), filler},
       {4096 * kMib, 5120 * kMib},
       {"mom: hold has_stats=false target=4096MiB", "hold="},
       "mode=shrink"},
      {"missing_unused_hold",
       H(),
       {G().NoUnused(), filler},
       {4096 * kMib, 5120 * kMib},
       {"mom: hold unused=missing target=4096MiB", "hold="},
       "mode=shrink"},
      {"held_guest_below_min_is_raised_not_shrunk",
       H(),
       {G().Min(2048).Stale().Target(1024), filler},
       {2048 * kMib, 5120 * kMib},
       {"target=1024MiB raised_to_min=2048MiB", "hold="},
       "mode=shrink"},
      {"tiny_shrink_holds",
       // used = 4092 - 409.6 = 3682.4 MiB, so wanted = 4092 MiB: a 0.098% change.
       H(),
       {G().Unused(413.6), filler},
       {4096 * kMib, 5120 * kMib},
       {"-> 4092MiB set_by=wanted change_pct=0.10 hold=change_too_small target=4096MiB", "hold="},
       "mode=shrink"},
      {"tiny_grow_holds_at_previous_target",
       // max is 0.2% above cur: the capped grow is too small. Hold keeps the last target.
       H(),
       {G().Max(4104).Target(4100)},
       {4100 * kMib},
       {"-> 4104MiB set_by=max change_pct=0.20 hold=change_too_small target=4100MiB"},
       "mode=grow"},
      {"host_mem_available_limits_host_free",
       // The budget alone says 60% free; the host has 2048 MiB available minus 1024 reserved.
       H().Available(2048).Reserve(1024),
       {G()},
       {Mib(4096 * 0.95)},
       {"host_free_pct=10.0 mode=shrink"},
       "host_free=1024MiB budget=10240MiB budget_free=6144MiB host_available_free=1024MiB "
       "limited_by=host"},
      {"budget_limits_when_host_is_roomy",
       H().Reserve(1024),
       {G()},
       {Mib(4096 * 1.05)},
       {"mode=grow"},
       "limited_by=budget"},
      {"over_budget_is_critical",
       // Guests hold more than the budget: host_free is negative, guest_free_pct = -0.30.
       H().Budget(4096),
       {G(), G().Actual(1024).Unused(0)},
       {Mib(4096 * 0.95), Mib(1024 * 0.95)},
       {"host_free_pct=-25.0 mode=shrink", "set_by=step"},
       "host_free=-1024MiB"},
  };
}

class MomPolicyTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(MomPolicyTableTest, Decides) {
  const Case& c = GetParam();
  const Snapshot snapshot = MakeSnapshot(c.host, c.guests);
  const MomPolicy policy;
  const Decisions decisions = policy.Decide(snapshot, PolicyState());
  ASSERT_EQ(decisions.guests.size(), snapshot.guests.size());
  ASSERT_EQ(c.want_bytes.size(), snapshot.guests.size()) << "bad table row";
  for (size_t i = 0; i < snapshot.guests.size(); ++i) {
    const GuestDecision& d = decisions.guests[i];
    EXPECT_EQ(d.uuid, snapshot.guests[i].uuid);
    EXPECT_EQ(d.target_bytes, c.want_bytes[i])
        << "guest " << i << ": got " << static_cast<double>(d.target_bytes) / kMib
        << " MiB, want " << static_cast<double>(c.want_bytes[i]) / kMib << " MiB; " << d.reason;
    EXPECT_THAT(d.reason, HasSubstr(c.reason_has[i])) << "guest " << i;
    EXPECT_GE(d.target_bytes, snapshot.guests[i].min_bytes > snapshot.guests[i].max_bytes
                                  ? snapshot.guests[i].max_bytes
                                  : snapshot.guests[i].min_bytes);
    EXPECT_LE(d.target_bytes, snapshot.guests[i].max_bytes);
  }
  EXPECT_THAT(decisions.summary, HasSubstr(c.summary_has));
  EXPECT_TRUE(decisions.next_state.guests.empty());
}

INSTANTIATE_TEST_SUITE_P(Table, MomPolicyTableTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(MomPolicyTest, ShrinkNeverExceedsFivePercentAcrossPressureLevels) {
  const MomPolicy policy;
  for (int filler_mib = 4000; filler_mib <= 12000; filler_mib += 250) {
    const Snapshot snapshot =
        MakeSnapshot(H(), {G().Unused(4096), G().Actual(filler_mib).Unused(0).Max(16384)});
    const Decisions decisions = policy.Decide(snapshot, PolicyState());
    EXPECT_GE(decisions.guests[0].target_bytes, Mib(4096 * 0.95)) << decisions.guests[0].reason;
  }
}

TEST(MomPolicyTest, PureAndOneDecisionPerGuestInOrder) {
  std::vector<G> guests;
  for (int i = 0; i < 50; ++i) {
    G guest = G().Actual(1024 + 37 * i).Unused((i * 53) % 900).Max(4096).Min(512);
    if (i % 7 == 0) guest.Stale();
    guests.push_back(guest);
  }
  for (int64_t budget : {20000, 60000, 100000}) {
    const Snapshot snapshot = MakeSnapshot(H().Budget(budget), guests);
    PolicyState state;
    state.guests["uuid-3"].Set(1.0);  // another policy's memory: MoM ignores it
    const MomPolicy policy;
    const Decisions a = policy.Decide(snapshot, state);
    const Decisions b = policy.Decide(snapshot, state);
    ASSERT_EQ(a.guests.size(), guests.size());
    ASSERT_EQ(b.guests.size(), guests.size());
    for (size_t i = 0; i < guests.size(); ++i) {
      EXPECT_EQ(a.guests[i].uuid, snapshot.guests[i].uuid);
      EXPECT_EQ(a.guests[i].uuid, b.guests[i].uuid);
      EXPECT_EQ(a.guests[i].target_bytes, b.guests[i].target_bytes);
      EXPECT_EQ(a.guests[i].reason, b.guests[i].reason);
    }
    EXPECT_EQ(a.summary, b.summary);
  }
}

TEST(MomPolicyTest, EmptySnapshot) {
  const Decisions decisions = MomPolicy().Decide(MakeSnapshot(H(), {}), PolicyState());
  EXPECT_TRUE(decisions.guests.empty());
  EXPECT_THAT(decisions.summary, HasSubstr("mode=grow host_free_pct=100.0"));
  EXPECT_THAT(decisions.summary, HasSubstr("guests=0"));
}

TEST(MomPolicyTest, NoBudgetHoldsEveryone) {
  const Snapshot snapshot = MakeSnapshot(H().Budget(0), {G(), G().Target(3000)});
  const Decisions decisions = MomPolicy().Decide(snapshot, PolicyState());
  ASSERT_EQ(decisions.guests.size(), 2u);
  EXPECT_EQ(decisions.guests[0].target_bytes, 4096 * kMib);
  EXPECT_EQ(decisions.guests[1].target_bytes, 3000 * kMib);
  EXPECT_THAT(decisions.guests[0].reason, HasSubstr("mom: hold guest_budget_bytes=0"));
  EXPECT_THAT(decisions.summary, HasSubstr("guest_budget_bytes=0"));
}

TEST(MomPolicyTest, HostileNumbersStayWithinLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Snapshot snapshot = MakeSnapshot(H(), {G(), G(), G(), G()});
  snapshot.guests[0].actual_bytes = kMax;
  snapshot.guests[0].max_bytes = kMax;
  snapshot.guests[1].unused_bytes = kMax;  // more unused than the guest has
  snapshot.guests[2].unused_bytes = -kMax;
  snapshot.guests[3].actual_bytes = 1;
  snapshot.guests[3].min_bytes = -5;
  for (int64_t budget : {int64_t{1}, kMax, std::numeric_limits<int64_t>::min()}) {
    snapshot.host.guest_budget_bytes = budget;
    snapshot.host.mem_available_bytes = budget;
    const Decisions decisions = MomPolicy().Decide(snapshot, PolicyState());
    ASSERT_EQ(decisions.guests.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_GE(decisions.guests[i].target_bytes, 0) << decisions.guests[i].reason;
      EXPECT_LE(decisions.guests[i].target_bytes, snapshot.guests[i].max_bytes)
          << decisions.guests[i].reason;
    }
  }
}

TEST(MomPolicyTest, CustomParams) {
  MomParams params;
  params.max_balloon_change_percent = 0.10;
  const MomPolicy policy(params);
  const Decisions decisions = policy.Decide(MakeSnapshot(H(), {G()}), PolicyState());
  EXPECT_EQ(decisions.guests[0].target_bytes, Mib(4096 * 1.10));
  EXPECT_EQ(policy.name(), "mom");
}

}  // namespace
}  // namespace plimsoll::policy
