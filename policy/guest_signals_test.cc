#include "policy/guest_signals.h"

#include <cstdint>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr int64_t kMib = int64_t{1} << 20;

GuestView Libvirt() {
  GuestView g;
  g.uuid = "u";
  g.max_bytes = 4096 * kMib;
  g.actual_bytes = 4096 * kMib;
  g.target_bytes = g.actual_bytes;
  g.has_stats = true;
  g.stats_fresh = true;
  g.unused_bytes = 100 * kMib;
  g.usable_bytes = 3000 * kMib;
  g.disk_caches_bytes = 2900 * kMib;
  return g;
}

GuestView Agent() {
  GuestView g = Libvirt();
  g.anon_bytes = 700 * kMib;
  g.unreclaimable_bytes = 100 * kMib;
  g.active_file_bytes = 1000 * kMib;
  g.inactive_file_bytes = 1900 * kMib;
  return g;
}

TEST(GuestSignalsTest, SourcesAndHardDemand) {
  SignalMemory next;
  GuestSignals agent = ReadSignals(Agent(), 100, SignalMemory(), &next);
  EXPECT_EQ(agent.source, SignalSource::kAgent);
  EXPECT_EQ(agent.hard_bytes, 800.0 * kMib);
  EXPECT_EQ(agent.active_file_bytes, 1000.0 * kMib);
  EXPECT_EQ(agent.cache_bytes, 2900.0 * kMib);

  GuestSignals libvirt = ReadSignals(Libvirt(), 100, SignalMemory(), &next);
  EXPECT_EQ(libvirt.source, SignalSource::kLibvirt);
  EXPECT_EQ(libvirt.hard_bytes, 1096.0 * kMib);  // actual - usable

  GuestView old = Libvirt();
  old.usable_bytes.reset();
  GuestSignals free_only = ReadSignals(old, 100, SignalMemory(), &next);
  EXPECT_EQ(free_only.source, SignalSource::kFreeOnly);
  EXPECT_EQ(free_only.hard_bytes, 3996.0 * kMib);  // cache counts as used
  EXPECT_STREQ(SignalSourceName(free_only.source), "free_only");
}

TEST(GuestSignalsTest, StallComesFromPsiTotalOverTheReportInterval) {
  GuestView g = Agent();
  g.psi_some_total_us = 5'000'000;
  g.psi_some_avg10 = 40;  // ignored once the total gives an interval figure
  g.stats_age_seconds = 0;
  SignalMemory m1;
  GuestSignals first = ReadSignals(g, 100, SignalMemory(), &m1);
  EXPECT_TRUE(first.new_report);
  EXPECT_THAT(first.stall_pct, Optional(40.0));  // no interval yet: avg10
  g.psi_some_total_us = 6'000'000;  // 1 s stalled in 10 s
  SignalMemory m2;
  GuestSignals second = ReadSignals(g, 110, m1, &m2);
  EXPECT_TRUE(second.new_report);
  ASSERT_TRUE(second.stall_pct.has_value());
  EXPECT_NEAR(*second.stall_pct, 10.0, 1e-9);

  // The same report again (its age grew with the clock): same figures, not new.
  g.stats_age_seconds = 5;
  SignalMemory m3;
  GuestSignals again = ReadSignals(g, 115, m2, &m3);
  EXPECT_FALSE(again.new_report);
  EXPECT_NEAR(*again.stall_pct, 10.0, 1e-9);
}

TEST(GuestSignalsTest, AgentAgeWinsOverStatsAge) {
  GuestView g = Agent();
  g.stats_age_seconds = 1;
  g.agent_age_seconds = 4;
  SignalMemory next;
  EXPECT_EQ(ReadSignals(g, 100, SignalMemory(), &next).report_s, 96);
}

TEST(GuestSignalsTest, RefaultsFromAgentOrFromMajorFaultsAndSwapIns) {
  GuestView a = Agent();
  a.refaults_per_second = 256;  // pages
  SignalMemory next;
  EXPECT_THAT(ReadSignals(a, 100, SignalMemory(), &next).refault_bytes_per_s,
              Optional(1.0 * kMib));

  GuestView l = Libvirt();
  l.major_fault = 1000;
  l.swap_in = 0;
  SignalMemory m1;
  EXPECT_EQ(ReadSignals(l, 100, SignalMemory(), &m1).refault_bytes_per_s, std::nullopt);
  l.major_fault = 1000 + 2560;  // 10 MiB of faults
  l.swap_in = 10240;            // 10 MiB swapped in (KiB)
  SignalMemory m2;
  GuestSignals s = ReadSignals(l, 110, m1, &m2);
  ASSERT_TRUE(s.refault_bytes_per_s.has_value());
  EXPECT_NEAR(*s.refault_bytes_per_s, 2.0 * kMib, 1e-6);

  // A rebooted guest restarts its counters: no rate, then rates from the new base.
  l.major_fault = 5;
  SignalMemory m3;
  EXPECT_EQ(ReadSignals(l, 120, m2, &m3).refault_bytes_per_s, std::nullopt);
}

TEST(GuestSignalsTest, OomKillsAreCountedOncePerReport) {
  GuestView g = Agent();
  g.oom_kill = 3;
  SignalMemory m1;
  EXPECT_EQ(ReadSignals(g, 100, SignalMemory(), &m1).new_oom_kills, 0);
  g.oom_kill = 4;
  SignalMemory m2;
  EXPECT_EQ(ReadSignals(g, 105, m1, &m2).new_oom_kills, 1);
  g.stats_age_seconds = 5;  // no new report
  SignalMemory m3;
  EXPECT_EQ(ReadSignals(g, 110, m2, &m3).new_oom_kills, 0);
}

TEST(GuestSignalsTest, BalloonDriverPressureCountersStandInForTheAgentsWithoutIt) {
  // A Linux >= 6.12 guest without the agent: its allocating tasks scanned 40 MiB in 10 s and one
  // task was OOM-killed, as its balloon driver reports.
  GuestView l = Libvirt();
  l.major_fault = 1000;
  l.balloon_direct_scan_bytes = 100 * kMib;
  l.balloon_oom_kills = 2;
  SignalMemory m1;
  GuestSignals first = ReadSignals(l, 100, SignalMemory(), &m1);
  EXPECT_EQ(first.refault_bytes_per_s, std::nullopt);
  EXPECT_EQ(first.new_oom_kills, 0);
  l.major_fault = 1000 + 256;  // 1 MiB of faults
  l.balloon_direct_scan_bytes = 140 * kMib;
  l.balloon_oom_kills = 3;
  SignalMemory m2;
  GuestSignals s = ReadSignals(l, 110, m1, &m2);
  ASSERT_TRUE(s.refault_bytes_per_s.has_value());
  EXPECT_NEAR(*s.refault_bytes_per_s, 4.1 * kMib, 1e-6);
  EXPECT_EQ(s.new_oom_kills, 1);

  // A report without the scans: the rate is the faults' alone; when the scans come back, their
  // rate is taken over their own times (20 s here), not over one report interval.
  l.balloon_direct_scan_bytes.reset();
  SignalMemory m3;
  GuestSignals without = ReadSignals(l, 120, m2, &m3);
  EXPECT_THAT(without.refault_bytes_per_s, Optional(0.0));
  l.balloon_direct_scan_bytes = 340 * kMib;
  SignalMemory m4;
  EXPECT_THAT(ReadSignals(l, 130, m3, &m4).refault_bytes_per_s, Optional(10.0 * kMib));

  // Counters read apart from the stats carry their own age: a sample stamped no later than the
  // last one (128 s, with stats from 140 s) keeps the last rate; the next, 20 s after the last
  // sample it took, gives 4 MiB over 20 s.
  l.balloon_direct_scan_bytes = 344 * kMib;
  l.balloon_pressure_age_seconds = 12;
  SignalMemory m5;
  EXPECT_THAT(ReadSignals(l, 140, m4, &m5).refault_bytes_per_s, Optional(10.0 * kMib));
  l.balloon_pressure_age_seconds = 0;
  SignalMemory m6;
  EXPECT_THAT(ReadSignals(l, 150, m5, &m6).refault_bytes_per_s, Optional(0.2 * kMib));

  // The agent's counters win where both exist: they are the same /proc/vmstat counters.
  GuestView a = Agent();
  a.oom_kill = 7;
  a.balloon_oom_kills = 0;
  a.refaults_per_second = 0;
  a.balloon_direct_scan_bytes = 1000 * kMib;
  SignalMemory n1;
  ReadSignals(a, 100, SignalMemory(), &n1);
  a.oom_kill = 8;
  a.balloon_direct_scan_bytes = 2000 * kMib;
  SignalMemory n2;
  GuestSignals sa = ReadSignals(a, 110, n1, &n2);
  EXPECT_EQ(sa.new_oom_kills, 1);
  EXPECT_THAT(sa.refault_bytes_per_s, Optional(0.0));
}

TEST(GuestSignalsTest, BalloonCountersArrivingATickAfterTheirStatsCountAtOnce) {
  GuestView l = Libvirt();
  l.major_fault = 1000;
  l.balloon_oom_kills = 0;
  l.balloon_direct_scan_bytes = 0;
  SignalMemory m1;
  ReadSignals(l, 100, SignalMemory(), &m1);
  SignalMemory m2;
  ReadSignals(l, 110, m1, &m2);  // a new report: rates from here
  // The next tick sees the same stats (no new report), but the counters read since bring a kill
  // and 20 MiB scanned, stamped 2 s after the last sample.
  l.stats_age_seconds = 2;
  l.balloon_oom_kills = 1;
  l.balloon_direct_scan_bytes = 20 * kMib;
  l.balloon_pressure_age_seconds = 0;
  SignalMemory m3;
  GuestSignals s = ReadSignals(l, 112, m2, &m3);
  EXPECT_FALSE(s.new_report);
  EXPECT_EQ(s.new_oom_kills, 1);
  EXPECT_THAT(s.refault_bytes_per_s, Optional(10.0 * kMib));
  EXPECT_TRUE(s.late_counters);
  // And the kill is counted once, the scan sample once.
  l.stats_age_seconds = 3;
  l.balloon_pressure_age_seconds = 1;
  SignalMemory m4;
  const GuestSignals again = ReadSignals(l, 113, m3, &m4);
  EXPECT_EQ(again.new_oom_kills, 0);
  EXPECT_FALSE(again.late_counters);
  EXPECT_THAT(again.refault_bytes_per_s, Optional(10.0 * kMib));
}

TEST(GuestSignalsTest, ImplausibleStatsAreNamed) {
  EXPECT_EQ(ImplausibleStatsReason(Agent()), std::nullopt);
  GuestView g = Libvirt();
  g.usable_bytes = 5000 * kMib;
  EXPECT_THAT(ImplausibleStatsReason(g), Optional(HasSubstr("usable=5000MiB>max=")));
  g = Libvirt();
  g.unused_bytes = -1;
  EXPECT_THAT(ImplausibleStatsReason(g), Optional(HasSubstr("unused=-1")));
  g = Agent();
  g.anon_bytes = 3000 * kMib;
  g.inactive_file_bytes = 3000 * kMib;
  EXPECT_THAT(ImplausibleStatsReason(g), Optional(HasSubstr("anon+unreclaimable+file=")));
  g = Agent();
  g.psi_some_avg10 = 250;
  EXPECT_THAT(ImplausibleStatsReason(g), Optional(HasSubstr("psi_some_avg10=250.0")));
  g = Agent();
  g.refaults_per_second = -3;
  EXPECT_THAT(ImplausibleStatsReason(g), Optional(HasSubstr("refaults_per_second=-3.0")));
  g = Agent();
  g.refaults_per_second = std::nan("");
  EXPECT_NE(ImplausibleStatsReason(g), std::nullopt);
}

}  // namespace
}  // namespace plimsoll::policy
