#include "sim/scenario.h"

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] = R"(# a comment
scenario name=two duration=10m tick=2s stale_after=20s
description First line
description second line.   # trailing comment
tags cache_heavy small
host total=16GiB reserve=1GiB budget=6GiB
host_event at=5m other=2GiB
guest name=a max=4GiB min=512MiB agent=false autodeflate=true speed=8MiB/s shares=2000 behaviour=stuck behaviour_at=30s
phase guest=a at=0 anon=1GiB stream_rate=10MiB/s
phase guest=a at=2m hot=512MiB hot_rate=20MiB/s
guest name=b max=2GiB start=1GiB cache=200MiB kernel=100MiB min_free=40MiB refault_stall=0.5 pace_noise=0.2 access=mmap read_drift=0.21 balloon_pressure=true unreclaimable=10MiB stats_period=10s
phase guest=b at=0s
expect pagecache oom_kills == 0
expect pagecache reclaimed_gib_s > 1.5 * mom
expect pagecache stall_s <= proxmox
expect pagecache guest.a.stall_s < pagecache:guest.b.stall_s
)";

TEST(ScenarioTest, ParsesEverything) {
  absl::StatusOr<Scenario> s = ParseScenario(kGood);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "two");
  EXPECT_EQ(s->duration, 600);
  EXPECT_EQ(s->tick, 2);
  EXPECT_EQ(s->stale_after, 20);
  EXPECT_EQ(s->description, "First line second line.");
  EXPECT_TRUE(s->HasTag("cache_heavy"));
  EXPECT_FALSE(s->HasTag("big"));
  EXPECT_EQ(s->host.total, 16 * kGib);
  EXPECT_EQ(s->GuestBudget(), 6 * kGib);
  ASSERT_EQ(s->host.events.size(), 1u);
  EXPECT_EQ(s->host.events[0].other, 2 * kGib);
  ASSERT_EQ(s->guests.size(), 2u);
  const GuestSpec& a = s->guests[0];
  EXPECT_FALSE(a.agent);
  EXPECT_FALSE(a.balloon_pressure);  // by default
  EXPECT_TRUE(s->guests[1].balloon_pressure);
  EXPECT_TRUE(a.autodeflate);
  EXPECT_EQ(a.speed, 8 * kMib);
  EXPECT_EQ(a.shares, 2000);
  EXPECT_EQ(a.behaviour, Behaviour::kStuck);
  EXPECT_EQ(a.behaviour_at, 30);
  ASSERT_EQ(a.phases.size(), 2u);
  // A phase starts from the previous one.
  EXPECT_EQ(a.phases[1].anon, kGib);
  EXPECT_EQ(a.phases[1].stream_rate, 10 * kMib);
  EXPECT_EQ(a.phases[1].hot, 512 * kMib);
  const GuestSpec& b = s->guests[1];
  EXPECT_EQ(*b.start, kGib);
  EXPECT_EQ(*b.cache, 200 * kMib);
  EXPECT_EQ(*b.min_free, 40 * kMib);
  EXPECT_EQ(b.refault_stall, 0.5);
  EXPECT_EQ(b.pace_noise, 0.2);
  EXPECT_EQ(b.read_drift, 0.21);
  EXPECT_EQ(b.access, FileAccess::kMmap);
  EXPECT_EQ(a.access, FileAccess::kRead) << "read() by default, as the lab's readers";
  EXPECT_EQ(a.refault_stall, 1.0);
  EXPECT_FALSE(a.cache.has_value());
  EXPECT_EQ(*b.kernel, 100 * kMib);
  EXPECT_EQ(b.stats_period, 10);
  ASSERT_EQ(s->expectations.size(), 4u);
  EXPECT_EQ(s->expectations[0].op, CompareOp::kEqual);
  EXPECT_EQ(s->expectations[0].value, 0);
  EXPECT_FALSE(s->expectations[0].other_policy.has_value());
  EXPECT_EQ(s->expectations[1].factor, 1.5);
  EXPECT_EQ(*s->expectations[1].other_policy, "mom");
  EXPECT_EQ(*s->expectations[2].other_policy, "proxmox");
  EXPECT_EQ(s->expectations[2].factor, 1);
  EXPECT_EQ(*s->expectations[3].other_policy, "pagecache");
  EXPECT_EQ(*s->expectations[3].other_metric, "guest.b.stall_s");
  EXPECT_EQ(s->expectations[3].line, 16);
}

TEST(ScenarioTest, ErrorsNameTheLine) {
  const std::string head = "scenario name=x\nhost total=1GiB\n";
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {head + "guest name=a max=1GiB spead=1MiB\n", "line 3: guest: unknown key \"spead\""},
      {head + "guest name=a\n", "line 3: guest: missing max="},
      {head + "guest name=a max=1GiB min=2GiB\n", "min above max"},
      {head + "guest name=a max=1GiB behaviour=odd\n", "unknown \"odd\""},
      {head + "guest name=a max=1GiB access=mapped\n", "access: unknown \"mapped\" (known: read, mmap)"},
      {head + "guest name=a max=1GiB\nguest name=a max=1GiB\n", "defined twice"},
      {head + "phase guest=nobody at=0\n", "unknown guest \"nobody\""},
      {head + "guest name=a max=1GiB\nphase guest=a at=1m\nphase guest=a at=30s\n", "time order"},
      {head + "guest name=a max=1GiB\nphase guest=a at=10s\n", "needs a phase at=0"},
      {head + "flavour x=1\n", "unknown keyword \"flavour\""},
      {head + "host total=2GiB\n", "line 3: second host line"},
      {head + "expect pagecache oom_kills\n", "expect needs"},
      {head + "expect pagecache oom_kills ~ 0\n", "unknown operator"},
      {head + "expect pagecache oom_kills < 2 + mom\n", "expected \"<factor> * <policy>\""},
      {head + "guest name=a max=1GiB speed=fast\n", "speed: bad size"},
      {head + "guest name=a max=1GiB agent=yes\n", "agent: expected true or false"},
      {head + "guest name=a max=1GiB refault_stall=1.5\n", "refault_stall must be in [0, 1]"},
      {head + "guest name=a max=1GiB disk_rate=0\n", "disk_rate must be positive"},
      {head + "guest name=a max=1GiB pace_noise=0.9\n", "pace_noise must be in [0, 0.5]"},
      {head + "guest name=a max=1GiB read_drift=-0.1\n", "read_drift must be in [0, 0.5]"},
      {"host total=1GiB\n", "no scenario line"},
      {"scenario name=x\n", "no host line"},
      {head, "no guest"},
      {"scenario name=x duration=0\nhost total=1GiB\n", "at least 1s"},
      {"scenario name=x name=y\n", "given twice"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<Scenario> s = ParseScenario(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(c.error)) << c.text;
  }
}

TEST(ScenarioTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadScenarioFile("/nonexistent/x.scenario").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ScenarioTest, BudgetDefaultsToTotalLessReserve) {
  absl::StatusOr<Scenario> s =
      ParseScenario("scenario name=x\nhost total=8GiB reserve=1GiB\nguest name=a max=1GiB\n"
                    "phase guest=a at=0\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->GuestBudget(), 7 * kGib);
  EXPECT_STREQ(BehaviourName(Behaviour::kNoStats), "no_stats");
}

// Every field ParseScenario sets, compared one by one (Expectation::line aside).
void ExpectSameScenario(const Scenario& a, const Scenario& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.tags, b.tags);
  EXPECT_EQ(a.duration, b.duration);
  EXPECT_EQ(a.tick, b.tick);
  EXPECT_EQ(a.stale_after, b.stale_after);
  EXPECT_EQ(a.host.total, b.host.total);
  EXPECT_EQ(a.host.reserve, b.host.reserve);
  EXPECT_EQ(a.host.budget, b.host.budget);
  ASSERT_EQ(a.host.events.size(), b.host.events.size());
  for (size_t i = 0; i < a.host.events.size(); ++i) {
    EXPECT_EQ(a.host.events[i].at, b.host.events[i].at);
    EXPECT_EQ(a.host.events[i].other, b.host.events[i].other);
  }
  ASSERT_EQ(a.guests.size(), b.guests.size());
  for (size_t i = 0; i < a.guests.size(); ++i) {
    const GuestSpec& x = a.guests[i];
    const GuestSpec& y = b.guests[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.max, y.max);
    EXPECT_EQ(x.min, y.min);
    EXPECT_EQ(x.start, y.start);
    EXPECT_EQ(x.cache, y.cache);
    EXPECT_EQ(x.agent, y.agent);
    EXPECT_EQ(x.balloon_pressure, y.balloon_pressure);
    EXPECT_EQ(x.autodeflate, y.autodeflate);
    EXPECT_EQ(x.speed, y.speed);
    EXPECT_EQ(x.shares, y.shares);
    EXPECT_EQ(x.kernel, y.kernel);
    EXPECT_EQ(x.unreclaimable, y.unreclaimable);
    EXPECT_EQ(x.alloc_rate, y.alloc_rate);
    EXPECT_EQ(x.disk_rate, y.disk_rate);
    EXPECT_EQ(x.refault_stall, y.refault_stall);
    EXPECT_EQ(x.pace_noise, y.pace_noise);
    EXPECT_EQ(x.read_drift, y.read_drift);
    EXPECT_EQ(x.min_free, y.min_free);
    EXPECT_EQ(x.stats_period, y.stats_period);
    EXPECT_EQ(x.behaviour, y.behaviour);
    EXPECT_EQ(x.behaviour_at, y.behaviour_at);
    ASSERT_EQ(x.phases.size(), y.phases.size()) << x.name;
    for (size_t j = 0; j < x.phases.size(); ++j) {
      const Phase& p = x.phases[j];
      const Phase& q = y.phases[j];
      EXPECT_EQ(p.at, q.at);
      EXPECT_EQ(p.anon, q.anon);
      EXPECT_EQ(p.hot, q.hot);
      EXPECT_EQ(p.hot_rate, q.hot_rate);
      EXPECT_EQ(p.stream_rate, q.stream_rate);
      EXPECT_EQ(p.loop, q.loop);
    }
  }
  ASSERT_EQ(a.expectations.size(), b.expectations.size());
  for (size_t i = 0; i < a.expectations.size(); ++i) {
    const Expectation& x = a.expectations[i];
    const Expectation& y = b.expectations[i];
    EXPECT_EQ(x.text, y.text);
    EXPECT_EQ(x.policy, y.policy);
    EXPECT_EQ(x.metric, y.metric);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.factor, y.factor);
    EXPECT_EQ(x.other_policy, y.other_policy);
    EXPECT_EQ(x.other_metric, y.other_metric);
  }
}

TEST(ScenarioTest, PrintedScenarioReadsBackTheSame) {
  absl::StatusOr<Scenario> s = ParseScenario(kGood);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string printed = FormatScenario(*s);
  EXPECT_THAT(printed, HasSubstr("scenario name=two duration=10m tick=2s stale_after=20s\n"));
  EXPECT_THAT(printed, HasSubstr("guest name=b max=2GiB min=0 start=1GiB cache=200MiB agent=true"));
  EXPECT_THAT(printed, HasSubstr("phase guest=a at=2m anon=1GiB hot=512MiB hot_rate=20MiB/s "
                                 "stream_rate=10MiB/s loop=0\n"));
  EXPECT_THAT(printed, HasSubstr("expect pagecache reclaimed_gib_s > 1.5 * mom\n"));
  // balloon_pressure is printed only when true, read_drift only when set: scenarios from before
  // them print as they did.
  EXPECT_THAT(printed, HasSubstr(" access=mmap read_drift=0.21 balloon_pressure=true stats_period=10s "));
  EXPECT_THAT(printed, HasSubstr(" access=read stats_period="));
  absl::StatusOr<Scenario> back = ParseScenario(printed);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << printed;
  ExpectSameScenario(*s, *back);
  EXPECT_EQ(FormatScenario(*back), printed);
}

TEST(ScenarioTest, ValuesThatAreNotWholeUnitsPrintExactly) {
  Scenario s;
  s.name = "odd";
  s.duration = 90.5;
  s.host.total = 10 * kGib + 1;
  GuestSpec g;
  g.name = "a";
  g.max = 1.3 * kGib;  // not a whole number of bytes
  g.shares = 1024;
  g.speed = 1.0 / 3;
  g.phases.push_back(Phase{0, 123456789.0, 0.1, 7, 0, 0});
  s.guests.push_back(g);
  Expectation e;
  e.policy = "pagecache";
  e.metric = "stall_s";
  e.op = CompareOp::kLessEqual;
  e.factor = 0.25;
  e.other_policy = "mom";
  e.other_metric = "guest.a.stall_s";
  s.expectations.push_back(e);
  Expectation v;
  v.policy = "mom";
  v.metric = "oom_kills";
  v.value = 0.1;
  s.expectations.push_back(v);
  const std::string printed = FormatScenario(s);
  EXPECT_THAT(printed, HasSubstr("shares=1024 "));
  EXPECT_THAT(printed, HasSubstr("expect pagecache stall_s <= 0.25 * mom:guest.a.stall_s\n"));
  absl::StatusOr<Scenario> back = ParseScenario(printed);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << printed;
  EXPECT_EQ(back->duration, 90.5);
  EXPECT_EQ(back->host.total, 10 * kGib + 1);
  EXPECT_EQ(back->guests[0].max, 1.3 * kGib);
  EXPECT_EQ(back->guests[0].speed, 1.0 / 3);
  EXPECT_EQ(back->guests[0].phases[0].hot, 0.1);
  EXPECT_EQ(back->expectations[0].factor, 0.25);
  EXPECT_EQ(*back->expectations[0].other_metric, "guest.a.stall_s");
  EXPECT_EQ(back->expectations[1].value, 0.1);
  EXPECT_EQ(back->expectations[1].op, CompareOp::kEqual);
}

// Every bundled scenario file prints and reads back to itself.
TEST(ScenarioTest, BundledScenariosRoundTrip) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("sim/scenarios")) {
    if (entry.path().extension() != ".scenario") continue;
    ++files;
    absl::StatusOr<Scenario> s = LoadScenarioFile(entry.path().string());
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<Scenario> back = ParseScenario(FormatScenario(*s));
    ASSERT_TRUE(back.ok()) << entry.path() << ": " << back.status();
    SCOPED_TRACE(entry.path().string());
    ExpectSameScenario(*s, *back);
  }
  EXPECT_GE(files, 14);
}

}  // namespace
}  // namespace plimsoll::sim
