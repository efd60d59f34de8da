#include "server/loop/reclaim_claim_check.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr uint64_t kUMiB = uint64_t{1} << 20;

// One tick: seconds since the start, the claimed total (MiB; -1: no agent entry), QEMU's RSS
// (MiB; -1: not read), the balloon's actual size (MiB).
struct Row {
  double t;
  int64_t claimed_mib;
  int64_t rss_mib;
  int64_t actual_mib = 1024;
  int64_t read_mib = -1;  // the guest's disk reads, cumulative (MiB; -1: not read)
};

struct Driven {
  std::vector<ReclaimClaimWindow> closed;
  ReclaimClaimState state;
};

Driven Drive(const std::vector<Row>& rows, const ReclaimClaimParams& params = {}) {
  Driven run;
  for (const Row& r : rows) {
    ReclaimClaimSample s;
    s.now = absl::UnixEpoch() + absl::Seconds(r.t);
    if (r.claimed_mib >= 0) s.claimed_total = static_cast<uint64_t>(r.claimed_mib) * kUMiB;
    if (r.rss_mib >= 0) s.host_rss_bytes = r.rss_mib * kMiB;
    s.balloon_actual_bytes = r.actual_mib * kMiB;
    if (r.read_mib >= 0) s.disk_read_bytes = static_cast<uint64_t>(r.read_mib) * kUMiB;
    if (std::optional<ReclaimClaimWindow> w = StepReclaimClaims(params, s, &run.state)) run.closed.push_back(*w);
  }
  return run;
}

struct Case {
  const char* name;
  std::vector<Row> rows;
  // The one window expected to close, in MiB.
  uint64_t claimed, fall, confirmed, unconfirmed;
  ReclaimVerdict verdict;
};

TEST(ReclaimClaimCheckTest, OneWindow) {
  const std::vector<Case> cases = {
      {"an honest claim whose pages came back before it was reported",
       {{0, 0, 1000}, {5, 0, 1000}, {10, 300, 800}, {15, 300, 700}, {20, 300, 650}, {25, 300, 660}, {30, 300, 700}},
       300, 350, 300, 0, ReclaimVerdict::kConfirmed},
      {"a claim of nothing",
       {{0, 0, 1000}, {5, 0, 1000}, {10, 1024, 1000}, {15, 1024, 1001}, {20, 1024, 1000}, {30, 1024, 1000}},
       1024, 0, 0, 1024, ReclaimVerdict::kUnconfirmed},
      {"RSS that rose: no fall, never a negative one",
       {{0, 0, 1000}, {10, 512, 1100}, {20, 512, 1200}, {30, 512, 1300}},
       512, 0, 0, 512, ReclaimVerdict::kUnconfirmed},
      // 24 MiB of the guest were not resident at the base: a take of 300 explains 276 of the fall.
      {"a fall the balloon explains confirms nothing",
       {{0, 0, 1000, 1024}, {10, 300, 1000, 1024}, {15, 300, 700, 724}, {30, 300, 700, 724}},
       300, 24, 24, 276, ReclaimVerdict::kUnconfirmed},
      {"the balloon explains part of the fall",
       {{0, 0, 1000, 1024}, {10, 300, 1000, 1024}, {15, 300, 600, 924}, {30, 300, 600, 924}},
       300, 324, 300, 0, ReclaimVerdict::kConfirmed},
      // The lab's reader: its balloon took 375 MiB while it read, mostly pages free page
      // reporting had returned (RSS 850 of 1024 at the base); then its agent reclaimed 444 MiB
      // and RSS fell to 483. The take explains 201 MiB of the fall, the claim the other 166.
      {"a balloon take of memory the host did not hold explains no fall",
       {{0, 0, 850, 1024}, {5, 0, 845, 1024}, {10, 0, 818, 649}, {15, 444, 643, 649}, {20, 444, 565, 649},
        {25, 444, 483, 649}, {50, 444, 483, 649}},
       444, 166, 166, 278, ReclaimVerdict::kConfirmed},
      {"a quarter of the claim seen: confirmed, the rest unconfirmed",
       {{0, 0, 1000}, {10, 400, 1000}, {20, 400, 900}, {30, 400, 900}},
       400, 100, 100, 300, ReclaimVerdict::kConfirmed},
      {"less than a quarter seen",
       {{0, 0, 1000}, {10, 400, 1000}, {20, 400, 920}, {30, 400, 920}},
       400, 80, 80, 320, ReclaimVerdict::kUnconfirmed},
      {"a small claim is not judged, its bytes still counted",
       {{0, 0, 1000}, {10, 32, 1000}, {30, 32, 1000}},
       32, 0, 0, 32, ReclaimVerdict::kSmall},
      {"no RSS reading",
       {{0, 0, -1}, {10, 512, -1}, {20, 512, -1}, {30, 512, -1}},
       512, 0, 0, 0, ReclaimVerdict::kUnmeasured},
      {"claims that go on keep the window open until none came for the grace",
       {{0, 0, 1000}, {10, 100, 1000}, {20, 200, 900}, {30, 300, 800}, {40, 300, 750}, {45, 300, 750},
        {50, 300, 750}},
       300, 250, 250, 50, ReclaimVerdict::kConfirmed},
      // The lab's batch guest: its agent's first step came while it still read its file, and
      // the read refilled what the step dropped.
      {"a guest that read more than the unconfirmed part meanwhile is not judged",
       {{0, 0, 800, 1024, 100}, {10, 64, 850, 1024, 200}, {20, 64, 900, 1024, 300}, {40, 64, 900, 1024, 300}},
       64, 0, 0, 64, ReclaimVerdict::kReading},
      {"reads short of the unconfirmed part do not excuse it",
       {{0, 0, 800, 1024, 100}, {10, 512, 850, 1024, 200}, {20, 512, 900, 1024, 300}, {40, 512, 900, 1024, 300}},
       512, 0, 0, 512, ReclaimVerdict::kUnconfirmed},
      {"reads not read at the base do not count",
       {{0, 0, 901}, {10, 64, 900, 1024, 200}, {20, 64, 900, 1024, 900}, {40, 64, 900, 1024, 900}},
       64, 1, 1, 63, ReclaimVerdict::kUnconfirmed},
      {"a counter gone back (a restarted domain) is no read",
       {{0, 0, 800, 1024, 900}, {10, 64, 850, 1024, 10}, {20, 64, 900, 1024, 20}, {40, 64, 900, 1024, 20}},
       64, 0, 0, 64, ReclaimVerdict::kUnconfirmed},
      {"a fall older than the lookback is not the claim's",
       {{0, 0, 1000}, {5, 0, 700}, {10, 0, 700}, {20, 0, 700}, {30, 0, 700}, {40, 300, 700}, {60, 300, 700}},
       300, 0, 0, 300, ReclaimVerdict::kUnconfirmed},
  };
  for (const Case& c : cases) {
    const Driven run = Drive(c.rows);
    ASSERT_EQ(run.closed.size(), 1u) << c.name;
    const ReclaimClaimWindow& w = run.closed[0];
    EXPECT_EQ(w.claimed_bytes, c.claimed * kUMiB) << c.name;
    EXPECT_EQ(w.rss_fall_bytes, c.fall * kUMiB) << c.name;
    EXPECT_EQ(w.confirmed_bytes, c.confirmed * kUMiB) << c.name;
    EXPECT_EQ(w.unconfirmed_bytes, c.unconfirmed * kUMiB) << c.name;
    EXPECT_EQ(w.verdict, c.verdict) << c.name << ": " << ReclaimVerdictName(w.verdict);
    EXPECT_EQ(run.state.last_verdict, c.verdict) << c.name;
    EXPECT_EQ(run.state.confirmed_bytes, c.confirmed * kUMiB) << c.name;
    EXPECT_EQ(run.state.unconfirmed_bytes, c.unconfirmed * kUMiB) << c.name;
    EXPECT_EQ(run.state.unconfirmed_windows, c.verdict == ReclaimVerdict::kUnconfirmed ? 1u : 0u) << c.name;
    EXPECT_FALSE(run.state.open) << c.name;
    // Only an unconfirmed verdict pauses the bounds.
    EXPECT_EQ(ReclaimBoundsPauseLeft(run.state, absl::UnixEpoch() + absl::Seconds(c.rows.back().t)) > absl::ZeroDuration(),
              c.verdict == ReclaimVerdict::kUnconfirmed)
        << c.name;
  }
}

TEST(ReclaimClaimCheckTest, AWindowStaysOpenThroughItsGrace) {
  const Driven run = Drive({{0, 0, 1000}, {10, 300, 1000}, {25, 300, 1000}, {29, 300, 1000}});
  EXPECT_TRUE(run.closed.empty());
  EXPECT_TRUE(run.state.open);
  EXPECT_EQ(run.state.window_claimed, 300 * kUMiB);
  EXPECT_EQ(run.state.last_verdict, ReclaimVerdict::kNone);
  EXPECT_EQ(run.state.unconfirmed_bytes, 0u);
}

// A total seen for the first time, or one that fell (the store forgot the guest and began
// again), is a base, not a claim.
TEST(ReclaimClaimCheckTest, ATotalThatAppearsOrFallsIsNotAClaim) {
  const Driven run = Drive({{0, -1, 1000},
                         {5, 5000, 1000},  // first seen: claimed before this watch
                         {10, 5000, 1000},
                         {15, -1, 1000},  // the entry is gone
                         {20, 200, 1000},  // and back
                         {25, 200, 1000},
                         {30, 150, 1000},  // fell
                         {35, 250, 1000},  // 100 MiB claimed
                         {55, 250, 1000}});
  ASSERT_EQ(run.closed.size(), 1u);
  EXPECT_EQ(run.closed[0].claimed_bytes, 100 * kUMiB);
  EXPECT_EQ(run.state.unconfirmed_bytes, 100 * kUMiB);
}

// One fall of RSS confirms one window: the next window's base comes after it.
TEST(ReclaimClaimCheckTest, OneFallConfirmsOneWindow) {
  const Driven run = Drive({{0, 0, 1000},
                         {10, 300, 700},
                         {30, 300, 700},  // window 1 closes: confirmed
                         {35, 600, 700},  // window 2: the same 300 MiB claimed again
                         {55, 600, 700}});
  ASSERT_EQ(run.closed.size(), 2u);
  EXPECT_EQ(run.closed[0].verdict, ReclaimVerdict::kConfirmed);
  EXPECT_EQ(run.closed[1].verdict, ReclaimVerdict::kUnconfirmed);
  EXPECT_EQ(run.closed[1].rss_fall_bytes, 0u);
  EXPECT_EQ(run.state.confirmed_bytes, 300 * kUMiB);
  EXPECT_EQ(run.state.unconfirmed_bytes, 300 * kUMiB);
  EXPECT_EQ(run.state.unconfirmed_windows, 1u);
}

// A guest that claims without pause is judged every max_window; the next window starts where the
// last one closed.
TEST(ReclaimClaimCheckTest, ClaimsWithoutPauseAreJudgedEveryMaxWindow) {
  std::vector<Row> rows;
  for (int i = 0; i <= 30; ++i) rows.push_back({5.0 * i, 100 * i, 1000});  // 20 MiB/s claimed, RSS flat
  const Driven run = Drive(rows);
  ASSERT_EQ(run.closed.size(), 2u);
  EXPECT_EQ(run.closed[0].opened, absl::UnixEpoch() + absl::Seconds(5));
  EXPECT_EQ(run.closed[0].closed, absl::UnixEpoch() + absl::Seconds(65));
  EXPECT_EQ(run.closed[0].claimed_bytes, 1200 * kUMiB);  // 5 s .. 60 s
  EXPECT_EQ(run.closed[0].verdict, ReclaimVerdict::kUnconfirmed);
  EXPECT_EQ(run.closed[1].opened, absl::UnixEpoch() + absl::Seconds(65));
  EXPECT_EQ(run.state.unconfirmed_windows, 2u);
  EXPECT_TRUE(run.state.open);
}

// Reclaim the host did not get back pauses the guest's bounds: 10 min, doubling per unconfirmed
// window up to 2 h; a confirmed window ends the doubling; small and unmeasured ones change nothing.
TEST(ReclaimClaimCheckTest, UnconfirmedWindowsPauseTheBoundsLongerEachTime) {
  auto at = [](double t) { return absl::UnixEpoch() + absl::Seconds(t); };
  EXPECT_EQ(ReclaimBoundsPauseLeft(ReclaimClaimState{}, at(0)), absl::ZeroDuration());
  std::vector<Row> rows = {{0, 0, 1000}, {10, 300, 1000}, {30, 300, 1000}};  // unconfirmed at 30
  Driven run = Drive(rows);
  EXPECT_EQ(run.state.unconfirmed_run, 1u);
  EXPECT_EQ(ReclaimBoundsPauseLeft(run.state, at(30)), absl::Minutes(10));
  EXPECT_EQ(ReclaimBoundsPauseLeft(run.state, at(30 + 600)), absl::ZeroDuration());
  // Two more unconfirmed windows: 20 min, then 40.
  for (double t : {700.0, 2000.0}) {
    rows.push_back({t, static_cast<int64_t>(t), 1000});
    rows.push_back({t + 20, static_cast<int64_t>(t), 1000});
  }
  run = Drive(rows);
  EXPECT_EQ(run.state.unconfirmed_run, 3u);
  EXPECT_EQ(ReclaimBoundsPauseLeft(run.state, at(2020)), absl::Minutes(40));
  // Many more: never above 2 h.
  for (int i = 0; i < 10; ++i) {
    const double t = 5000.0 + 100 * i;
    rows.push_back({t, static_cast<int64_t>(t), 1000});
    rows.push_back({t + 20, static_cast<int64_t>(t), 1000});
  }
  run = Drive(rows);
  EXPECT_EQ(ReclaimBoundsPauseLeft(run.state, at(5920)), absl::Hours(2));
  // A small claim (under 64 MiB) changes nothing; a confirmed one ends the run (the pause it
  // follows still runs out).
  rows.push_back({9000, 5940, 1000});
  rows.push_back({9020, 5940, 1000});
  run = Drive(rows);
  EXPECT_EQ(run.closed.back().verdict, ReclaimVerdict::kSmall);
  EXPECT_EQ(run.state.unconfirmed_run, 13u);
  rows.push_back({9090, 5940, 1000});
  rows.push_back({9100, 6240, 700});
  rows.push_back({9120, 6240, 700});
  run = Drive(rows);
  EXPECT_EQ(run.closed.back().verdict, ReclaimVerdict::kConfirmed);
  EXPECT_EQ(run.state.unconfirmed_run, 0u);
}

TEST(ReclaimClaimCheckTest, TotalsSaturate) {
  ReclaimClaimState s;
  s.unconfirmed_bytes = UINT64_MAX - 10;
  ReclaimClaimSample a;
  a.now = absl::UnixEpoch();
  a.claimed_total = 0;
  a.host_rss_bytes = 1000 * kMiB;
  StepReclaimClaims({}, a, &s);
  a.now += absl::Seconds(5);
  a.claimed_total = UINT64_MAX;
  StepReclaimClaims({}, a, &s);
  a.now += absl::Seconds(30);
  ASSERT_TRUE(StepReclaimClaims({}, a, &s).has_value());
  EXPECT_EQ(s.unconfirmed_bytes, UINT64_MAX);
}

TEST(ReclaimClaimCheckTest, VerdictNames) {
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kNone), "none");
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kConfirmed), "confirmed");
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kUnconfirmed), "unconfirmed");
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kSmall), "small");
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kUnmeasured), "unmeasured");
  EXPECT_EQ(ReclaimVerdictName(ReclaimVerdict::kReading), "reading");
}

}  // namespace
}  // namespace plimsoll::server
