#include "policy/pagecache_law.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policy/history_deriver.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;

constexpr double kMib = 1 << 20;

// An agent guest of 4096 MiB: 600 MiB anon + 100 MiB unreclaimable (hard demand 700 MiB), 300 MiB
// hot cache (Active(file)), the rest cold; calm. Headroom: max(128 MiB, 5% of 4096) = 204.8 MiB.
// So F = 904.8 MiB and W = 1204.8 MiB.
GuestView Agent() {
  GuestView g;
  g.uuid = "u";
  g.max_bytes = 4096 * (int64_t{1} << 20);
  g.min_bytes = 512 * (int64_t{1} << 20);
  g.actual_bytes = g.max_bytes;
  g.target_bytes = g.max_bytes;
  g.has_stats = true;
  g.stats_fresh = true;
  g.unused_bytes = 50 * (int64_t{1} << 20);
  g.disk_caches_bytes = 3200 * (int64_t{1} << 20);
  g.anon_bytes = 600 * (int64_t{1} << 20);
  g.unreclaimable_bytes = 100 * (int64_t{1} << 20);
  g.active_file_bytes = 300 * (int64_t{1} << 20);
  g.inactive_file_bytes = 2900 * (int64_t{1} << 20);
  g.refaults_per_second = 0;
  g.agent_age_seconds = 0;
  g.oom_kill = 0;
  return g;
}

// The same guest without the agent (libvirt's stats only), at `actual_mib` with `usable_mib` of
// it usable (MemAvailable).
GuestView Agentless(double actual_mib, double usable_mib) {
  GuestView g = Agent();
  g.anon_bytes.reset();
  g.unreclaimable_bytes.reset();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(actual_mib * kMib);
  g.usable_bytes = static_cast<int64_t>(usable_mib * kMib);
  return g;
}

// Drives the law like a loop: one report per call (age 0 at a time that advances), the guest's
// history derived before each decision as the collect step does, the balloon landing on its
// target at once unless told not to.
class Driver {
 public:
  explicit Driver(GuestView g, LawParams p = LawParams()) : g_(g), p_(p) {}

  LawOutcome Step(double dt = 2, bool land = true) {
    now_ += dt;
    g_.history = DeriveHistory(g_, now_, &h_);
    LawOutcome o = StepLaw(g_, now_, p_, &m_);
    last_ = o;
    g_.target_bytes = static_cast<int64_t>(std::llround(o.proposal_bytes));
    if (land) g_.actual_bytes = g_.target_bytes;
    return o;
  }
  GuestView& guest() { return g_; }
  LawMemory& memory() { return m_; }
  double now() const { return now_; }
  double TargetMib() const { return static_cast<double>(g_.target_bytes) / kMib; }

 private:
  GuestView g_;
  LawParams p_;
  LawMemory m_;
  HistoryMemory h_;
  LawOutcome last_;
  double now_ = 1e9;
};

TEST(PagecacheLawTest, FloorAndWorkingSetFromTheAgent) {
  LawMemory m;
  const LawOutcome o = StepLaw(Agent(), 1e9, LawParams(), &m);
  EXPECT_NEAR(o.floor_bytes / kMib, 700 + 204.8, 0.01);
  EXPECT_NEAR(o.working_set_bytes / kMib, 700 + 300 + 204.8, 0.01);
  EXPECT_EQ(o.signals.source, SignalSource::kAgent);
}

TEST(PagecacheLawTest, WithoutTheAgentOnlyFreeMemoryIsKnownUnused) {
  GuestView g = Agentless(4096, 3300);  // hard = 4096 - 3300 = 796 MiB
  g.unused_bytes = 1000 * (int64_t{1} << 20);
  LawMemory m;
  const LawOutcome o = StepLaw(g, 1e9, LawParams(), &m);
  EXPECT_EQ(o.signals.source, SignalSource::kLibvirt);
  EXPECT_NEAR(o.floor_bytes / kMib, 796 + 204.8, 0.01);
  EXPECT_NEAR(o.working_set_bytes / kMib, 4096 - (1000 - 204.8), 0.01);
}

// A guest first seen at its target has been there for a while: its first report measures it.
TEST(PagecacheLawTest, FirstReportAtTheTargetIsAMeasurement) {
  Driver d(Agent());
  const LawOutcome o = d.Step();
  EXPECT_TRUE(o.measured);
  EXPECT_EQ(o.action, LawAction::kTake);
}

// ...but not one first seen on its way to a target.
TEST(PagecacheLawTest, FirstReportOnTheJourneyHolds) {
  GuestView g = Agent();
  g.target_bytes = 2000 * (int64_t{1} << 20);
  Driver d(g);
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_FALSE(o.measured);
  EXPECT_EQ(o.action, LawAction::kHold);
  EXPECT_NEAR(o.proposal_bytes / kMib, 4096, 0.01);
}

// Above the working set, half of the distance per measured step; with the agent nothing below it.
TEST(PagecacheLawTest, TakesHalfOfWhatIsAboveTheWorkingSetAndStopsThereWithTheAgent) {
  Driver d(Agent());
  LawOutcome o = d.Step();
  ASSERT_EQ(o.action, LawAction::kTake) << o.reason;
  EXPECT_THAT(o.reason, HasSubstr("take x=0.00 ws=1204.8MiB"));
  EXPECT_NEAR(d.TargetMib(), 4096 - 0.5 * (4096 - 1204.8), 0.01);
  // The next report sees it landed; the next step needs a report newer than the landing.
  o = d.Step(5);
  EXPECT_EQ(o.action, LawAction::kHold) << o.reason;
  o = d.Step(5);
  EXPECT_EQ(o.action, LawAction::kTake) << o.reason;
  for (int i = 0; i < 40; ++i) d.Step(5);
  // W = 600 + 100 + 300 + 204.8 MiB, the floor 904.8: the agent measured the cache that is in
  // use, so no probe goes below it (a probe there finds the edge by evicting the hot set).
  EXPECT_NEAR(d.TargetMib(), 1204.8, 0.01);
  for (int i = 0; i < 20; ++i) {
    const LawOutcome later = d.Step(5);
    EXPECT_EQ(later.action, LawAction::kHold) << later.reason << " step " << i;
  }
  EXPECT_NEAR(d.TargetMib(), 1204.8, 0.01);
}

TEST(PagecacheLawTest, WithoutTheAgentProbeBelowTheWorkingSetIsTwoPercentOfMax) {
  // Without the agent W = A - max(0, MemFree - h): all cache counts as in use, an upper bound,
  // and probing is how the cold part is found.
  Driver d(Agentless(2048, 1000));
  const LawOutcome o = d.Step();
  ASSERT_EQ(o.action, LawAction::kProbe) << o.reason;
  EXPECT_NEAR(d.TargetMib(), 2048 - 0.02 * 4096, 0.01);
  EXPECT_THAT(o.reason, HasSubstr("probe x=0.00 ws=2048MiB"));
}

TEST(PagecacheLawTest, TheKernelsMemoryOutsideMemTotalIsHardDemand) {
  GuestView g = Agent();
  g.total_bytes = (4096 - 200) * kMib;  // autodeflate: MemTotal stays M - outside
  Driver d(g);
  LawOutcome o = d.Step();
  // H = 600 + 100 + 200 outside MemTotal; F = H + 204.8, W = F + 300.
  EXPECT_NEAR(o.floor_bytes / kMib, 1104.8, 0.01);
  EXPECT_NEAR(o.working_set_bytes / kMib, 1404.8, 0.01);
  // Without autodeflate MemTotal shrinks with the balloon: M - MemTotal then counts the balloon
  // too. The least value seen stays the estimate.
  d.guest().total_bytes = (2048 - 200) * kMib;
  o = d.Step();
  EXPECT_NEAR(o.floor_bytes / kMib, 1104.8, 0.01);
  // First seen ballooned without autodeflate (M - MemTotal = o + 2 GiB): at most h is counted.
  GuestView restarted = Agent();
  restarted.actual_bytes = restarted.target_bytes = 2048 * kMib;
  restarted.total_bytes = (2048 - 200) * kMib;
  Driver late(restarted);
  EXPECT_NEAR(late.Step().floor_bytes / kMib, 904.8 + 204.8, 0.01);
  // Agentless guests: libvirt's usable memory already leaves it out, so MemTotal changes
  // nothing there.
  GuestView agentless = g;
  agentless.anon_bytes.reset();
  agentless.unreclaimable_bytes.reset();
  agentless.usable_bytes = 1000 * kMib;
  GuestView agentless_no_total = agentless;
  agentless_no_total.total_bytes.reset();
  EXPECT_NEAR(Driver(agentless).Step().floor_bytes, Driver(agentless_no_total).Step().floor_bytes, 1);
}

TEST(PagecacheLawTest, ProbesWaitTheProbeInterval) {
  Driver d(Agentless(2000, 1000));  // without the agent, so that every step is a probe below W
  ASSERT_EQ(d.Step().action, LawAction::kProbe);
  d.Step(1);                                       // lands
  EXPECT_EQ(d.Step(1).action, LawAction::kHold);   // measured, but 2 s after the last step
  EXPECT_EQ(d.Step(3).action, LawAction::kProbe);
}

TEST(PagecacheLawTest, MeasuredPressureBacksOffHalfTheGapAndCoolsDown) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(2048 * kMib);
  g.refaults_per_second = 2.0 * kMib / 4096;  // 2 MiB/s: x = 2
  Driver d(g);
  LawOutcome o = d.Step();
  ASSERT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_NEAR(d.TargetMib(), 2048 + 0.5 * 2048, 0.01);
  EXPECT_THAT(o.reason, HasSubstr("backoff x=2.00 cooldown=30s"));
  EXPECT_EQ(d.memory().cooldown_s, 60);
  // The next report (balloon landed, report not newer than the landing) cannot back off again.
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kWait) << o.reason;
  EXPECT_EQ(d.TargetMib(), 3072);
  // Measured again and still pressured: a second backoff, in the same episode (same cooldown).
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kBackoff);
  EXPECT_NEAR(d.TargetMib(), 3072 + 0.5 * 1024, 0.01);
  EXPECT_THAT(o.reason, HasSubstr("cooldown=30s"));
  EXPECT_EQ(d.memory().cooldown_s, 60);
  // Calm again: no probing until the cooldown (30 s from the last backoff) is over.
  d.guest().refaults_per_second = 0;
  for (double t = 0; t < 28; t += 2) {
    o = d.Step();
    ASSERT_NE(o.action, LawAction::kTake) << t;
    ASSERT_NE(o.action, LawAction::kProbe) << t;
  }
  EXPECT_EQ(o.action, LawAction::kCooling);
  EXPECT_NEAR(d.TargetMib(), 3584, 0.01);
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kTake) << o.reason;
  EXPECT_LT(d.TargetMib(), 3584);
  // The next episode cools down twice as long.
  d.Step();
  d.guest().refaults_per_second = 2.0 * kMib / 4096;
  o = d.Step();
  ASSERT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_THAT(o.reason, HasSubstr("cooldown=60s"));
  EXPECT_EQ(d.memory().cooldown_s, 120);
}

TEST(PagecacheLawTest, PressureOnTheJourneyStopsTheBalloonWhereItIs) {
  GuestView g = Agent();
  Driver d(g);
  d.Step();  // take: target 2650 MiB
  // The balloon has only reached 3500 MiB when pressure shows.
  d.guest().actual_bytes = static_cast<int64_t>(3500 * kMib);
  d.guest().refaults_per_second = 4.0 * kMib / 4096;
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_EQ(o.action, LawAction::kWait) << o.reason;
  EXPECT_NEAR(d.TargetMib(), 3500, 0.01);
}

TEST(PagecacheLawTest, OomKillBacksOffEvenUnmeasured) {
  Driver d(Agent());
  d.Step();
  d.guest().actual_bytes = static_cast<int64_t>(3000 * kMib);
  d.guest().oom_kill = 1;
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_THAT(o.reason, HasSubstr("x=oom"));
  EXPECT_NEAR(d.TargetMib(), 3000 + 0.5 * 1096, 0.01);
}

// A Linux >= 6.12 guest without the agent: its balloon driver's counters are its pressure.
GuestView BalloonCountersOnly() {
  GuestView g = Agentless(4096, 3000);
  g.refaults_per_second.reset();
  g.oom_kill.reset();
  g.agent_age_seconds.reset();
  g.active_file_bytes.reset();
  g.inactive_file_bytes.reset();
  g.major_fault = 0;
  g.balloon_oom_kills = 0;
  g.balloon_direct_scan_bytes = 0;
  return g;
}

TEST(PagecacheLawTest, WithoutTheAgentTheBalloonDriversOomKillBacksOff) {
  Driver d(BalloonCountersOnly());
  d.Step();
  d.Step();
  d.guest().actual_bytes = static_cast<int64_t>(3000 * kMib);
  d.guest().balloon_oom_kills = 1;
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_THAT(o.reason, HasSubstr("x=oom"));
  EXPECT_GT(d.TargetMib(), 3000);
}

TEST(PagecacheLawTest, WithoutTheAgentDirectReclaimScansArePressure) {
  Driver d(BalloonCountersOnly());
  const double start = d.Step().proposal_bytes;
  d.Step();
  // The guest's allocating tasks scan 8 MiB/s (what a lab guest whose demand outgrew its balloon
  // showed); kswapd's background scanning of a streaming guest is not counted.
  d.guest().balloon_direct_scan_bytes = static_cast<uint64_t>(16 * kMib);
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_GT(o.pressure, 1) << o.reason;
  EXPECT_NE(o.action, LawAction::kTake) << o.reason;
  EXPECT_NE(o.action, LawAction::kProbe) << o.reason;
  EXPECT_GE(d.TargetMib() * kMib, std::min(start, static_cast<double>(d.guest().actual_bytes)) - 1);
}

// plimsolld reads the balloon driver's counters after the stats they came with advanced: they
// reach the law a tick after their report. Direct scans that arrive so are answered on that
// tick, not a stats period later with the next report.
TEST(PagecacheLawTest, DirectScansArrivingATickAfterTheirReportBackOffThen) {
  GuestView g = BalloonCountersOnly();
  g.unused_bytes = 0;  // nothing to take: only pressure moves it
  g.usable_bytes = static_cast<int64_t>(300 * kMib);
  Driver d(g);
  d.Step();
  d.Step();
  const double before = d.TargetMib();
  // A new report whose counters are still the last sample's: calm.
  LawOutcome o = d.Step();
  EXPECT_LT(o.pressure, 1) << o.reason;
  // A tick later, the same report, and the counters read since: 20 MiB scanned in 2 s.
  d.guest().stats_age_seconds = 1;
  d.guest().balloon_pressure_age_seconds = 0;
  d.guest().balloon_direct_scan_bytes = static_cast<uint64_t>(20 * kMib);
  o = d.Step(1);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_GT(d.TargetMib(), before);
  // The tick after brings nothing new: no second backoff on the same sample.
  d.guest().stats_age_seconds = 2;
  const double grown = d.TargetMib();
  o = d.Step(1);
  EXPECT_NE(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_EQ(d.TargetMib(), grown);
}

// The same when the calm report was answered with a take: the balloon moved (and landed) after
// the report, but the scans are about the report the take was decided on.
TEST(PagecacheLawTest, DirectScansArrivingAfterATakeBackOff) {
  Driver d(BalloonCountersOnly());
  LawOutcome o = d.Step();
  for (int i = 0; i < 10 && o.action != LawAction::kTake && o.action != LawAction::kProbe; ++i) o = d.Step(5);
  ASSERT_TRUE(o.action == LawAction::kTake || o.action == LawAction::kProbe) << o.reason;
  const double taken = d.TargetMib();
  d.guest().stats_age_seconds = 1;
  d.guest().balloon_pressure_age_seconds = 0;
  d.guest().balloon_direct_scan_bytes = static_cast<uint64_t>(20 * kMib);
  o = d.Step(1);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_GT(d.TargetMib(), taken);
}

TEST(PagecacheLawTest, TheFloorRisesWithHardDemandAtOnce) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(1000 * kMib);
  LawParams p;
  p.burst.window_seconds = 0;  // the plain floor
  Driver d(g, p);
  d.Step();
  d.guest().anon_bytes = 1400 * (int64_t{1} << 20);  // F = 1500 + 204.8 MiB
  const LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.floor_bytes / kMib, 1704.8, 0.01);
  EXPECT_NEAR(d.TargetMib(), 1704.8, 0.01);
}

// With the burst component, the floor also keeps the rise it saw, for the next allocation.
TEST(PagecacheLawTest, TheFloorKeepsRoomForTheLastBurst) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(1000 * kMib);
  Driver d(g);
  d.Step();
  d.guest().anon_bytes = 1400 * (int64_t{1} << 20);  // +800 MiB in one report
  LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 800, 0.01);
  EXPECT_NEAR(o.floor_bytes / kMib, 1500 + 204.8 + 800, 0.01);
  d.guest().anon_bytes = 600 * (int64_t{1} << 20);  // freed: the room stays
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.floor_bytes / kMib, 700 + 204.8 + 800, 0.01);
}

// Without the agent hard demand is A - usable: libvirt's A is now, the guest's usable as old as
// its report. A burst is a rise of it with A taken at the report's time, so our own balloon
// moves are none, whichever side of the report they fall on; usable memory falling at one size
// is an allocation.
TEST(PagecacheLawTest, WithoutTheAgentABurstIsUsableMemoryFallingNotABalloonMove) {
  GuestView g = Agentless(2000, 1200);
  g.agent_age_seconds.reset();
  g.stats_age_seconds = 0;
  Driver d(g);
  d.Step();
  // A grant of 500 MiB after the guest's last report: A is new, usable is not.
  d.guest().actual_bytes = d.guest().target_bytes = static_cast<int64_t>(2500 * kMib);
  d.guest().stats_age_seconds = 2;
  LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_EQ(o.signals.source, SignalSource::kLibvirt);
  EXPECT_NEAR(o.burst_bytes / kMib, 0, 0.01);
  // The guest's next report has the 500 MiB as usable memory.
  d.guest().stats_age_seconds = 0;
  d.guest().usable_bytes = static_cast<int64_t>(1700 * kMib);
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 0, 0.01);
  // Usable falls by 400 MiB at the same size: an allocation.
  d.guest().usable_bytes = static_cast<int64_t>(1300 * kMib);
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 400, 0.01);
}

// Our own inflation lowers usable memory as an allocation does. Measured as the fall of usable
// memory, a take reads as a burst and keeps its size as headroom: on sizes4 without the agent
// every guest's floor held its first take (165-486 MiB, docs/benchmarks.md "What each part of
// the law buys"). With A at the report's time it is none, the report before the take or after it.
TEST(PagecacheLawTest, WithoutTheAgentOurInflationIsNoBurst) {
  GuestView g = Agentless(2000, 1200);
  g.agent_age_seconds.reset();
  g.stats_age_seconds = 0;
  Driver d(g);
  d.Step();
  // The balloon took 500 MiB; the guest's report is still the one from before.
  d.guest().actual_bytes = d.guest().target_bytes = static_cast<int64_t>(1500 * kMib);
  d.guest().stats_age_seconds = 2;
  LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 0, 0.01);
  // Its next report: the 500 MiB are gone from usable memory, and from A.
  d.guest().stats_age_seconds = 0;
  d.guest().usable_bytes = static_cast<int64_t>(700 * kMib);
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 0, 0.01);
  // An allocation while the balloon takes more: only the allocation is a burst.
  d.guest().actual_bytes = d.guest().target_bytes = static_cast<int64_t>(1300 * kMib);
  d.guest().usable_bytes = static_cast<int64_t>(300 * kMib);  // 200 taken, 200 allocated
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 200, 0.01);
}

// Without the agent H is libvirt's size now less usable memory at the report: while the balloon
// travels, a report from before the move reads the move as a fall in demand. The floor's H waits
// for a report after the landing to fall, and rises at once.
TEST(PagecacheLawTest, WithoutTheAgentHardDemandFallsOnlyOnAReportAfterTheLanding) {
  GuestView g = Agentless(2000, 1200);
  g.agent_age_seconds.reset();
  g.stats_age_seconds = 0;
  Driver d(g);
  const double headroom = LawHeadroom(g, LawParams()) / kMib;
  auto hard_mib = [&](const LawOutcome& o) { return o.floor_bytes / kMib - o.burst_bytes / kMib - headroom; };
  EXPECT_NEAR(hard_mib(d.Step()), 800, 0.01);  // at its target: a measurement
  // A take to 1500 MiB under way (actual 1700), the report still the one from before it.
  d.guest().target_bytes = static_cast<int64_t>(1500 * kMib);
  d.guest().actual_bytes = static_cast<int64_t>(1700 * kMib);
  d.guest().stats_age_seconds = 2;
  EXPECT_NEAR(hard_mib(d.Step(2, /*land=*/false)), 800, 0.01) << "not 500: the move is no fall in demand";
  // A report on the way shows usable falling by more than the move: demand rose, at once.
  d.guest().stats_age_seconds = 0;
  d.guest().usable_bytes = static_cast<int64_t>(600 * kMib);
  EXPECT_NEAR(hard_mib(d.Step(2, /*land=*/false)), 1100, 0.01);
  // Landed, and a report after it: H is what it reads, lower again. (The target is put back
  // after each step: the law's own proposals would start new journeys.)
  d.guest().actual_bytes = d.guest().target_bytes = static_cast<int64_t>(1500 * kMib);
  d.guest().usable_bytes = static_cast<int64_t>(700 * kMib);
  d.Step(2, /*land=*/false);  // the landing is seen; this report is not after it
  d.guest().actual_bytes = d.guest().target_bytes = static_cast<int64_t>(1500 * kMib);
  d.guest().usable_bytes = static_cast<int64_t>(710 * kMib);
  const LawOutcome last = d.Step(2, /*land=*/false);
  EXPECT_NEAR(hard_mib(last), 790, 0.01) << last.reason;
}

// A loop that ticks faster than the guest reports: without the agent H = A - usable, and usable
// stays the report's until the next one while the balloon moves. The floor takes A when the
// report was first seen, so the growth it asks for is not read back as demand on the next tick.
// Read with A now, each tick's growth raised the floor by itself again: a real guest reporting
// every 20 s under a 1 s tick went 330 -> 1024 MiB in 15 ticks on a 50 MiB burst.
TEST(PagecacheLawTest, WithoutTheAgentOurGrowthBetweenReportsIsNoDemand) {
  // A 1024 MiB guest: h = max(128 MiB, 5% of 1024) = 128 MiB. Reports every 20 s, a decision
  // every second, the balloon landing within it; MemAvailable = A - the guest's hard demand.
  struct Row {
    double from_s;    // from this second on
    double hard_mib;  // the guest's hard demand, as its next report shows it
    double most_mib;  // the most the target may be
  };
  const std::vector<Row> rows = {
      {0, 190, 330},   // calm at 330 MiB: F = 190 + 128 = 318
      {20, 240, 418},  // a 50 MiB burst: F = 240 + 128 + 50 (the burst), and no more until 40
      {40, 240, 418},  // the next report: the growth is usable memory, not demand
  };
  GuestView g = Agentless(330, 140);
  g.max_bytes = 1024 * (int64_t{1} << 20);
  g.min_bytes = 128 * (int64_t{1} << 20);
  g.agent_age_seconds.reset();
  LawParams p;
  LawMemory m;
  HistoryMemory hm;
  const double t0 = 1e9;
  double report_s = t0;
  for (int t = 0; t < 60; ++t) {
    const double now = t0 + t;
    size_t r = 0;
    while (r + 1 < rows.size() && rows[r + 1].from_s <= t) ++r;
    if (t % 20 == 0) {
      report_s = now;
      g.usable_bytes = g.actual_bytes - static_cast<int64_t>(rows[r].hard_mib * kMib);
    }
    g.stats_age_seconds = now - report_s;
    g.history = DeriveHistory(g, now, &hm);
    const LawOutcome o = StepLaw(g, now, p, &m);
    SCOPED_TRACE(absl::StrCat("t=", t, " ", o.reason));
    EXPECT_LE(o.proposal_bytes / kMib, rows[r].most_mib + 0.01);
    g.actual_bytes = g.target_bytes = static_cast<int64_t>(std::llround(o.proposal_bytes));
  }
}

// Without the agent, a rise of hard demand larger than the headroom may still be under way when
// the law decides: until the next report H goes on rising at the rate the last two reports
// showed, up to one report interval's worth. A rise the headroom absorbs is not extrapolated.
TEST(PagecacheLawTest, WithoutTheAgentALargeRiseGoesOnUntilTheNextReport) {
  struct Row {
    double rise_mib;  // between two reports 20 s apart
    double age_s;     // of the second when the law decides
    double hard_mib;  // H in the floor
  };
  // h = 204.8 MiB; H was 800 MiB, then 800 + rise.
  const std::vector<Row> rows = {
      {300, 0, 1100},    // just reported: no time to rise yet
      {300, 10, 1250},   // half an interval: half the rise again
      {300, 20, 1400},   // a whole interval
      {300, 40, 1400},   // and no more
      {100, 10, 900},    // within the headroom: not extrapolated
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(absl::StrCat("rise=", r.rise_mib, " age=", r.age_s));
    GuestView g = Agentless(2000, 1200);
    g.agent_age_seconds.reset();
    g.stats_age_seconds = 0;
    LawParams p;
    p.burst.window_seconds = 0;  // the plain floor
    LawMemory m;
    HistoryMemory hm;
    auto step = [&](double now) {
      g.history = DeriveHistory(g, now, &hm);
      return StepLaw(g, now, p, &m);
    };
    step(1000);
    g.usable_bytes = static_cast<int64_t>((1200 - r.rise_mib) * kMib);
    LawOutcome o = step(1020);
    if (r.age_s > 0) {
      g.stats_age_seconds = r.age_s;  // the same report, older
      o = step(1020 + r.age_s);
    }
    EXPECT_NEAR(o.floor_bytes / kMib - LawHeadroom(g, p) / kMib, r.hard_mib, 0.01) << o.reason;
    EXPECT_NEAR(o.rising_bytes / kMib, r.hard_mib - 800 - r.rise_mib, 0.01);
  }
}

// The agent connecting after libvirt's stats came first changes what hard demand is measured
// as (H - A before, H after): the jump between the two is no allocation. Seen on the trio lab:
// a 399 MiB "burst" at the agent's first report held a 64 MiB stream guest's floor at 547 MiB.
TEST(PagecacheLawTest, TheAgentArrivingIsNoBurst) {
  Driver d(Agentless(2000, 1200));
  EXPECT_EQ(d.Step().signals.source, SignalSource::kLibvirt);
  d.guest().anon_bytes = 600 * (int64_t{1} << 20);
  d.guest().unreclaimable_bytes = 100 * (int64_t{1} << 20);
  LawOutcome o = d.Step(2, /*land=*/false);
  EXPECT_EQ(o.signals.source, SignalSource::kAgent);
  EXPECT_NEAR(o.burst_bytes / kMib, 0, 0.01);
  EXPECT_NEAR(o.floor_bytes / kMib, 700 + 204.8, 0.01);
  // A real rise after that is still one.
  d.guest().anon_bytes = 900 * (int64_t{1} << 20);
  o = d.Step(2, /*land=*/false);
  EXPECT_NEAR(o.burst_bytes / kMib, 300, 0.01);
}

TEST(PagecacheLawTest, NeverBelowTheConfiguredMin) {
  GuestView g = Agent();
  g.min_bytes = 3000 * (int64_t{1} << 20);
  Driver d(g);
  for (int i = 0; i < 30; ++i) d.Step(5);
  EXPECT_EQ(d.TargetMib(), 3000);
}

TEST(PagecacheLawTest, CooldownResetsAfterCooldownMaxWithoutPressure) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(900 * kMib);
  g.anon_bytes = 500 * (int64_t{1} << 20);
  g.refaults_per_second = 2.0 * kMib / 4096;
  Driver d(g);
  ASSERT_EQ(d.Step().action, LawAction::kBackoff);
  EXPECT_EQ(d.memory().cooldown_s, 60);
  d.guest().refaults_per_second = 0;
  for (int i = 0; i < 299; ++i) d.Step();
  EXPECT_EQ(d.memory().cooldown_s, 60);  // 598 s
  d.Step();
  d.Step();
  EXPECT_EQ(d.memory().cooldown_s, 0);
}

TEST(PagecacheLawTest, CalmAtASmallerSizeLowersTheAllowance) {
  // The law believed 4096 MiB calm, but the host's share-out put the guest at 3000 MiB, where
  // it was measured calm while cooling down: 3000 MiB is the allowance now.
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(3000 * kMib);
  g.history.emplace();
  g.history->landed_s = 1e9 - 10;
  g.history->report_s = 1e9;
  g.history->new_report = true;
  g.history->report_after_landing = true;
  LawMemory m;
  m.allowance_bytes = 4096 * kMib;
  m.cool_until_s = 1e9 + 1000;
  const LawOutcome o = StepLaw(g, 1e9, LawParams(), &m);
  EXPECT_TRUE(o.measured);
  EXPECT_EQ(o.action, LawAction::kCooling) << o.reason;
  EXPECT_NEAR(o.proposal_bytes / kMib, 3000, 0.01);
}

// A take the world did not make (the history's target is still the one it was asked from) is
// forgotten: the next measured report asks for the same step, not for one below it. While the
// call that makes it is in flight, the take stands.
TEST(PagecacheLawTest, ATakeNotMadeIsForgotten) {
  for (const bool in_flight : {false, true}) {
    SCOPED_TRACE(in_flight);
    GuestView g = Agent();
    g.actual_bytes = g.target_bytes = static_cast<int64_t>(2000 * kMib);
    HistoryMemory history;
    LawMemory m;
    g.history = DeriveHistory(g, 1e9, &history);
    const LawOutcome first = StepLaw(g, 1e9, LawParams(), &m);
    ASSERT_EQ(first.action, LawAction::kTake) << first.reason;
    EXPECT_NEAR(first.proposal_bytes / kMib, 2000 - (2000 - 1204.8) / 2, 0.01);
    m.asked_bytes = first.proposal_bytes;  // as pagecache_policy.cc records it
    m.asked_from_bytes = static_cast<double>(g.target_bytes);
    g.history = DeriveHistory(g, 1e9 + 6, &history);  // a new report; the target unchanged
    if (in_flight) g.history->pending_target_bytes = static_cast<int64_t>(first.proposal_bytes);
    const LawOutcome next = StepLaw(g, 1e9 + 6, LawParams(), &m);
    EXPECT_EQ(next.action, LawAction::kTake) << next.reason;
    const double again = in_flight ? first.proposal_bytes - (first.proposal_bytes - 1204.8 * kMib) / 2
                                   : first.proposal_bytes;
    EXPECT_NEAR(next.proposal_bytes / kMib, again / kMib, 0.01);
  }
}

TEST(PagecacheLawTest, AStaleReportIsNotANewMeasurement) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(2000 * kMib);
  Driver d(g);
  ASSERT_EQ(d.Step().action, LawAction::kTake);
  d.Step();
  // The agent's report stops advancing (age grows with time): no action on it.
  d.guest().agent_age_seconds = 10;
  const LawOutcome o = d.Step(10);
  EXPECT_FALSE(o.signals.new_report);
  EXPECT_EQ(o.action, LawAction::kHold);
}

// pressure_profile is the agentless guest's: with the agent, the refault counter is read as it
// is, profile_ratio or not. With futile_pressure off, a looping reader's own refaults hold it at
// its ceiling, as with the profile off (below).
TEST(PagecacheLawTest, WithTheAgentTheProfileIsNotApplied) {
  GuestView g = Agent();
  g.active_file_bytes = 0;  // all of its cache is read once a loop: nothing looks hot
  g.refaults_per_second = 50.0 * kMib / 4096;
  LawParams p;
  p.profile.ratio = 1.5;
  p.futile.ratio = 0;
  Driver d(g, p);
  for (int i = 0; i < 60; ++i) d.Step(5);
  EXPECT_EQ(d.TargetMib(), 4096);
  EXPECT_TRUE(d.memory().profile.buckets.empty()) << "nothing recorded for an agent guest";
}

// With the profile and futile_pressure off, the same guest is held at its ceiling by its own
// refaults.
TEST(PagecacheLawTest, WithTheProfileOffTheSamePressureBacksOff) {
  GuestView g = Agent();
  g.active_file_bytes = 0;
  g.refaults_per_second = 50.0 * kMib / 4096;
  LawParams p;
  p.profile.ratio = 0;
  p.futile.ratio = 0;
  Driver d(g, p);
  for (int i = 0; i < 60; ++i) d.Step(5);
  EXPECT_EQ(d.TargetMib(), 4096);
}

// The default: futile_pressure finds the same pressure at the ceiling, where no size could
// relieve it; the verdict ends the episode's cooldown and edge, and the guest is taken to its
// floor while its pressure stays at the futile level.
TEST(PagecacheLawTest, AFutileVerdictEndsTheEpisodeAndTheGuestGoesToItsFloor) {
  GuestView g = Agent();
  g.active_file_bytes = 0;
  g.refaults_per_second = 50.0 * kMib / 4096;
  Driver d(g);
  LawOutcome o = d.Step(5);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  for (int i = 0; i < 60; ++i) o = d.Step(5);
  EXPECT_NEAR(d.TargetMib(), 904.8, 0.01);
  EXPECT_NEAR(o.futile_level, 50, 0.01);
  // Squeezed into a real shortage (pressure beyond 1.5x the futile level on two reports in a
  // row): backs off.
  d.guest().refaults_per_second = 100.0 * kMib / 4096;
  o = d.Step(5);
  EXPECT_NE(o.action, LawAction::kBackoff) << o.reason;
  o = d.Step(5);
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
}

// Without the agent the host's disk reads stand in for refaults, but only as a rise over a
// larger size's: a guest that reads steadily at every size is not under pressure.
TEST(PagecacheLawTest, DiskReadsCountOnlyAsARiseOverALargerSize) {
  GuestView g = Agentless(4096, 3300);
  g.refaults_per_second.reset();
  g.unused_bytes = 2000 * (int64_t{1} << 20);
  g.disk_read_bytes = 0;
  LawParams p;
  p.profile.ratio = 1.5;
  Driver d(g, p);
  uint64_t read = 0;
  // 20 MiB/s of reads at any size: steady reading, not pressure.
  for (int i = 0; i < 6; ++i) {
    read += static_cast<uint64_t>(40 * kMib);
    d.guest().disk_read_bytes = read;
    const LawOutcome o = d.Step();
    ASSERT_NE(o.action, LawAction::kBackoff) << i << " " << o.reason;
    // The rate the decision saw, for its reason (absent until there is a previous count).
    if (i > 0) {
      ASSERT_TRUE(o.disk_bytes_per_s.has_value()) << i;
      EXPECT_NEAR(*o.disk_bytes_per_s, 20 * kMib, 0.5 * kMib) << i;
    }
  }
  ASSERT_LT(d.TargetMib(), 4096 - 500);
  // Reads that rise to 60 MiB/s once smaller: refaults seen from outside.
  for (int i = 0; i < 2; ++i) {
    read += static_cast<uint64_t>(120 * kMib);
    d.guest().disk_read_bytes = read;
    const LawOutcome o = d.Step();
    if (o.action == LawAction::kBackoff) return;
  }
  ADD_FAILURE() << "no backoff on rising disk reads";
}

// An agentless guest without refault counters whose host reads its disk reads: six reports of
// 20 MiB/s at its larger sizes, the reference its later reads are judged against.
struct PacedReader {
  PacedReader() : d([] {
    GuestView g = Agentless(4096, 3300);
    g.refaults_per_second.reset();
    g.unused_bytes = 2000 * (int64_t{1} << 20);
    g.disk_read_bytes = 0;
    return g;
  }()) {}
  void ReadFor2s(double mib_per_s) {
    read += static_cast<uint64_t>(2 * mib_per_s * kMib);
    d.guest().disk_read_bytes = read;
  }
  void ReadAtLargerSizes() {
    for (int i = 0; i < 6; ++i) {
      ReadFor2s(20);
      ASSERT_NE(d.Step().action, LawAction::kBackoff);
    }
  }
  Driver d;
  uint64_t read = 0;
};

// A backoff the reads alone made holds its edge only if growth relieved them: a reader whose
// pace rose (its neighbours went quiet) reads as fast at the grown size, and its edge goes once
// the cooldown is over; a squeezed hot set's reads fall back, and its edge stays.
TEST(PagecacheLawTest, AReadsOnlyBackoffKeepsItsEdgeOnlyIfGrowthRelievedTheReads) {
  for (const bool relieved : {false, true}) {
    SCOPED_TRACE(relieved ? "reads fell with the growth" : "reads did not fall");
    PacedReader r;
    ASSERT_NO_FATAL_FAILURE(r.ReadAtLargerSizes());
    Driver& d = r.d;
    auto reads_for_two_seconds = [&](double mib_per_s) { r.ReadFor2s(mib_per_s); };
    bool backed_off = false;
    for (int i = 0; i < 3 && !backed_off; ++i) {
      reads_for_two_seconds(60);  // three times the larger sizes' 20 MiB/s
      backed_off = d.Step().action == LawAction::kBackoff;
    }
    ASSERT_TRUE(backed_off);
    ASSERT_TRUE(d.memory().backoff_reads.has_value());
    int released = 0;
    for (int i = 0; i < 40; ++i) {
      reads_for_two_seconds(relieved ? 20 : 60);
      const LawOutcome o = d.Step();
      if (o.reason.find("reads_not_relieved=60MiB/s") != std::string::npos) ++released;
    }
    EXPECT_EQ(released, relieved ? 0 : 1);
    EXPECT_FALSE(d.memory().backoff_reads.has_value()) << "judged once";
    if (relieved) {
      EXPECT_GT(d.memory().edge.limit_until_s, d.now()) << "the edge still holds";
    } else {
      EXPECT_EQ(d.memory().edge.limit_until_s, -HUGE_VAL);
    }
  }
}

// The same pace, but the host does not grant the backoff's growth beyond its first landing (the
// budget holds the guest there, as on a lab run whose streaming guest then backed off on every
// disk reading): further reads-only pressure waits instead of pushing the cooldown, the release
// comes once it is over, and the pace backs the guest off no more.
TEST(PagecacheLawTest, AReadsOnlyBackoffWhoseGrowthIsNotGrantedIsJudgedAfterItsCooldown) {
  PacedReader r;
  ASSERT_NO_FATAL_FAILURE(r.ReadAtLargerSizes());
  Driver& d = r.d;
  auto reads_for_two_seconds = [&](double mib_per_s) { r.ReadFor2s(mib_per_s); };
  std::optional<int64_t> held;  // where the budget holds the guest after the backoff's landing
  int backoffs = 0, not_granted = 0, released = 0, backoffs_after_release = 0, takes_after_release = 0;
  for (int i = 0; i < 80; ++i) {
    reads_for_two_seconds(60);  // three times the larger sizes' 20 MiB/s, at every size
    const int64_t before = d.guest().actual_bytes;
    const LawOutcome o = d.Step();
    if (o.action == LawAction::kBackoff) {
      ++backoffs;
      if (released > 0) ++backoffs_after_release;
      // The first backoff lands partway to what it asked; the budget grants nothing more.
      if (!held.has_value()) held = before + (d.guest().target_bytes - before) / 2;
    }
    if (held.has_value() && d.guest().target_bytes > *held) {
      d.guest().target_bytes = d.guest().actual_bytes = *held;
    }
    if (o.reason.find("growth_not_granted") != std::string::npos) ++not_granted;
    if (o.reason.find("reads_not_relieved=60MiB/s") != std::string::npos) ++released;
    if (released > 0 && (o.action == LawAction::kTake || o.action == LawAction::kProbe)) ++takes_after_release;
  }
  EXPECT_EQ(backoffs, 1) << "one backoff, then waits";
  EXPECT_GE(not_granted, 5);
  EXPECT_EQ(released, 1);
  EXPECT_EQ(backoffs_after_release, 0) << "the pace is not pressure once its readings are forgotten";
  EXPECT_GE(takes_after_release, 1) << "takes resume";
}

// Without the agent all cache counts as in use, so a guest is probed down s at a time. One that
// reads from disk as fast at larger sizes as here streams through its cache: its steps are what
// its reads replace in a probe interval, at most half of what lies above its floor.
TEST(PagecacheLawTest, WithoutTheAgentAStreamingGuestIsTakenAtThePaceOfItsReads) {
  for (const double mib_per_s : {0.0, 150.0}) {
    SCOPED_TRACE(absl::StrCat(mib_per_s, " MiB/s of disk reads"));
    GuestView g = Agentless(4096, 4096 - 796);  // H = 796 MiB, F = H + h = 1000.8 MiB
    g.refaults_per_second.reset();
    g.disk_read_bytes = 0;
    Driver d(g);
    uint64_t read = 0;
    int streaming_takes = 0;
    for (int i = 0; i < 30; ++i) {
      read += static_cast<uint64_t>(2 * mib_per_s * kMib);
      d.guest().disk_read_bytes = read;
      d.guest().usable_bytes = d.guest().actual_bytes - static_cast<int64_t>(796 * kMib);
      const double before = d.TargetMib();
      const LawOutcome o = d.Step();
      ASSERT_NE(o.action, LawAction::kBackoff) << i << " " << o.reason;
      if (o.reason.find("streams=") == std::string::npos) continue;
      ++streaming_takes;
      EXPECT_EQ(o.action, LawAction::kTake) << o.reason;
      EXPECT_THAT(o.reason, HasSubstr("streams=150MiB/s"));
      EXPECT_LE(before - d.TargetMib(), 0.5 * (before - 1000.8) + 0.01) << o.reason;
    }
    if (mib_per_s == 0) {
      EXPECT_EQ(streaming_takes, 0);
      EXPECT_NEAR(d.TargetMib(), 4096 - 10 * 0.02 * 4096, 0.01);  // one s a probe interval
    } else {
      EXPECT_GE(streaming_takes, 5);
      EXPECT_LT(d.TargetMib(), 1000.8 + 0.02 * 4096);
    }
  }
}

// The host reads the disks less often than the guest reports: a rate whose window began before
// the balloon landed is partly the larger size's reads, and makes no streaming take; the law
// holds until a rate read at the new size comes.
// The wait follows how often the host reads: 4 s, and 20 s (an operator's block_stats_interval,
// longer than kAwaitReadsSeconds).
TEST(PagecacheLawTest, WithoutTheAgentOnlyReadsAtThisSizeMakeAStreamingTake) {
  for (const int reports_a_read : {2, 10}) {
  SCOPED_TRACE(absl::StrCat("a disk read every ", reports_a_read, " reports"));
  GuestView g = Agentless(4096, 4096 - 796);
  g.refaults_per_second.reset();
  g.disk_read_bytes = 0;
  Driver d(g);
  uint64_t read = 0;
  int streaming_takes = 0, awaits = 0;
  for (int i = 0; i < 20 * reports_a_read; ++i) {
    read += static_cast<uint64_t>(2 * 150 * kMib);
    if (i % reports_a_read == 0) d.guest().disk_read_bytes = read;  // a report every 2 s
    d.guest().disk_read_age_seconds = 2.0 * (i % reports_a_read);
    d.guest().usable_bytes = d.guest().actual_bytes - static_cast<int64_t>(796 * kMib);
    const LawOutcome o = d.Step();
    ASSERT_NE(o.action, LawAction::kBackoff) << i << " " << o.reason;
    if (o.reason.find("awaiting_reads_at_this_size") != std::string::npos) ++awaits;
    if (o.reason.find("streams=") == std::string::npos) continue;
    ++streaming_takes;
    const GuestHistory& h = *d.guest().history;
    ASSERT_TRUE(h.disk_read_since_s.has_value() && h.landed_s.has_value());
    EXPECT_GE(*h.disk_read_since_s, *h.landed_s) << i << " " << o.reason;
  }
  EXPECT_GE(streaming_takes, 3);
  EXPECT_GE(awaits, 1);
  EXPECT_LT(d.TargetMib(), 1000.8 + 0.02 * 4096);
  }
}

TEST(PagecacheLawTest, AStepThatHurtIsGivenBackAndTheEdgeHeld) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(2048 * kMib);
  Driver d(g);
  LawOutcome o = d.Step();
  ASSERT_EQ(o.action, LawAction::kTake) << o.reason;  // calm at 2048 MiB: towards the ws
  const double taken_to = d.TargetMib();
  ASSERT_LT(taken_to, 2048);
  d.Step();  // landed, not measured yet
  d.guest().refaults_per_second = 2.0 * kMib / 4096;
  o = d.Step();
  ASSERT_EQ(o.action, LawAction::kBackoff) << o.reason;
  // Back to where it was calm and one probe step (2% of 4096 MiB) more, not half the gap.
  EXPECT_NEAR(d.TargetMib(), 2048 + 81.92, 0.01);
  // Calm again: after the cooldown it holds at that edge for the window, then takes again.
  d.guest().refaults_per_second = 0;
  bool edge_seen = false;
  while (d.now() + 2 < 1e9 + 6 + 600) {
    o = d.Step();
    ASSERT_NEAR(d.TargetMib(), 2048 + 81.92, 0.01) << o.reason;
    edge_seen = edge_seen || o.action == LawAction::kEdge;
  }
  EXPECT_TRUE(edge_seen);
  EXPECT_THAT(o.reason, HasSubstr("edge x=0.00 at=2129.9MiB"));
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kTake) << o.reason;
  EXPECT_LT(d.TargetMib(), 2048);
}

TEST(PagecacheLawTest, WithTheEdgeOffABackoffIsHalfTheGap) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(2048 * kMib);
  LawParams p;
  p.edge.window_seconds = 0;
  Driver d(g, p);
  d.Step();
  const double taken_to = d.TargetMib();
  d.Step();
  d.guest().refaults_per_second = 2.0 * kMib / 4096;
  ASSERT_EQ(d.Step().action, LawAction::kBackoff);
  EXPECT_NEAR(d.TargetMib(), taken_to + 0.5 * (4096 - taken_to), 0.01);
}

TEST(PagecacheLawTest, AChurningBalloonIsNotChased) {
  GuestView g = Agent();
  g.balloon_inflate_pages = 0;
  g.balloon_deflate_pages = 0;
  Driver d(g);
  d.Step();  // take: the target goes down
  const double asked = d.TargetMib();
  ASSERT_LT(asked, 4096);
  // The guest's shrinker hands back what the balloon takes: actual barely moves.
  // (The first report on the way only starts the inflation's window.)
  d.guest().actual_bytes = static_cast<int64_t>(4093 * kMib);
  d.guest().balloon_inflate_pages = 256 * 100;
  d.guest().balloon_deflate_pages = 256 * 97;
  LawOutcome o = d.Step(2, /*land=*/false);
  ASSERT_NE(o.action, LawAction::kRetry) << o.reason;
  d.guest().actual_bytes = static_cast<int64_t>(4090 * kMib);
  d.guest().balloon_inflate_pages = 256 * 600;
  d.guest().balloon_deflate_pages = 256 * 591;
  o = d.Step(2, /*land=*/false);
  ASSERT_EQ(o.action, LawAction::kRetry) << o.reason;
  EXPECT_STREQ(o.state, "churning");
  EXPECT_THAT(o.reason, HasSubstr("retry churning"));
  EXPECT_NEAR(d.TargetMib(), 4090, 0.01);  // stopped where it got to
  // No taking for the retry (60 s); then the law takes again.
  for (int i = 0; i < 28; ++i) {
    o = d.Step();
    ASSERT_NEAR(d.TargetMib(), 4090, 0.01) << o.reason;
  }
  EXPECT_EQ(o.action, LawAction::kRetry);
  EXPECT_STREQ(o.state, "churning");
  d.Step();
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kTake) << o.reason;
  EXPECT_STREQ(o.state, "ok");
}

TEST(PagecacheLawTest, PressureFallingAfterABackoffWaitsForIt) {
  GuestView g = Agent();
  g.actual_bytes = g.target_bytes = static_cast<int64_t>(2048 * kMib);
  g.refaults_per_second = 3.0 * kMib / 4096;  // x = 3
  Driver d(g);
  ASSERT_EQ(d.Step().action, LawAction::kBackoff);
  const double after_backoff = d.TargetMib();
  d.Step();  // landed, unmeasured
  // Measured, still over target but lower: the backoff is working.
  d.guest().refaults_per_second = 2.0 * kMib / 4096;
  LawOutcome o = d.Step();
  EXPECT_EQ(o.action, LawAction::kWait) << o.reason;
  EXPECT_THAT(o.reason, HasSubstr("wait x=2.00 falling from 3.00"));
  EXPECT_EQ(d.TargetMib(), after_backoff);
  // Measured again at the same pressure: it did not fall, so more memory.
  o = d.Step();
  EXPECT_EQ(o.action, LawAction::kBackoff) << o.reason;
  EXPECT_GT(d.TargetMib(), after_backoff);
}

}  // namespace
}  // namespace plimsoll::policy
