#include "server/agent/report_validator.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/agent/testing/test_reports.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

class ValidatorTest : public ::testing::Test {
 protected:
  ReportValidator validator_{TestHostKey()};
  GuestLimits limits_{1 * kGiB};

  // Both stages against `history`; returns the first rejection (or nullopt) and updates it.
  std::optional<RejectReason> Run(const v1::SignedAgentReport& frame, GuestHistory* history,
                                  absl::Time now = kNow, const GuestLimits* limits = nullptr,
                                  ProofCache* cache = nullptr) {
    v1::AgentReport report;
    Verdict v = validator_.Authenticate(frame, &report, cache);
    if (!v.ok()) return v.reject;
    GuestHistory next;
    v = validator_.Check(report, limits ? limits : &limits_, *history, now, &next);
    *history = next;
    return v.reject;
  }

  // Sequences of reports from one guest: each step is (boot, boottime s, mutation) -> verdict.
  struct Step {
    const char* boot;
    double seconds;
    std::function<void(v1::AgentReport*)> mutate;
    std::optional<RejectReason> want;
  };
  struct Case {
    const char* name;
    std::vector<Step> steps;
  };
  // Each case on a fresh history, its reports 5 s of wall time apart (well inside the rate budget).
  void RunCases(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      GuestHistory history;
      absl::Time now = kNow;
      for (size_t i = 0; i < c.steps.size(); ++i) {
        const Step& step = c.steps[i];
        v1::AgentReport r = MakeReport(kVictim, step.boot, step.seconds, i + 1);
        step.mutate(&r);
        now += absl::Seconds(5);
        EXPECT_EQ(Run(SignAsSelf(r), &history, now), step.want) << c.name << " step " << i;
      }
    }
  }
};

// Stage 1 and 2 on a fresh guest: one row per way a single report can be wrong.
TEST_F(ValidatorTest, SingleReportTable) {
  struct Row {
    const char* name;
    std::function<v1::SignedAgentReport()> frame;
    std::optional<RejectReason> want;
  };
  const std::vector<Row> rows = {
      {"good", [] { return SignAsSelf(MakeReport(kVictim, kBootA, 10)); }, std::nullopt},
      {"spoofed uuid: attacker's token, victim's uuid",
       [] { return Sign(MakeReport(kVictim, kBootA, 10), TokenFor(kAttacker)); }, RejectReason::kBadProof},
      {"bad token", [] { return Sign(MakeReport(kVictim, kBootA, 10), std::string(32, 'x')); },
       RejectReason::kBadProof},
      {"no proof",
       [] {
         v1::SignedAgentReport f = SignAsSelf(MakeReport(kVictim, kBootA, 10));
         f.clear_proof();
         return f;
       },
       RejectReason::kBadProof},
      {"report altered after signing",
       [] {
         v1::SignedAgentReport f = SignAsSelf(MakeReport(kVictim, kBootA, 10));
         v1::AgentReport r;
         r.ParseFromString(f.report());
         r.mutable_meminfo()->set_mem_available_bytes(1);
         r.SerializeToString(f.mutable_report());
         return f;
       },
       RejectReason::kBadProof},
      {"token of a guest under another host key",
       [] {
         return Sign(MakeReport(kVictim, kBootA, 10), plimsoll::protocol::DeriveGuestToken(std::string(32, 'k'), kVictim));
       },
       RejectReason::kBadProof},
      {"upper-case uuid (a second spelling of the same guest)",
       [] {
         const std::string upper = "AAAAAAAA-1111-4111-8111-111111111111";
         return Sign(MakeReport(upper, kBootA, 10), TokenFor(upper));
       },
       RejectReason::kMalformed},
      {"garbage bytes",
       [] {
         v1::SignedAgentReport f;
         f.set_report(std::string("\xff\xff\xff\xff", 4));
         f.set_proof(std::string(32, '\0'));
         return f;
       },
       RejectReason::kMalformed},
      {"oversized",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_agent()->set_version(std::string(5000, 'v'));
         return SignAsSelf(r);
       },
       RejectReason::kOversized},
      {"bad boot id",
       [] { return SignAsSelf(MakeReport(kVictim, "not-a-boot-id", 10)); }, RejectReason::kMalformed},
      {"zero boottime", [] { return SignAsSelf(MakeReport(kVictim, kBootA, 0)); }, RejectReason::kMalformed},
      {"psi above 100",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_memory_pressure()->mutable_some()->set_avg10(100.5);
         return SignAsSelf(r);
       },
       RejectReason::kMalformed},
      {"psi NaN",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_memory_pressure()->mutable_full()->set_avg60(std::nan(""));
         return SignAsSelf(r);
       },
       RejectReason::kMalformed},
      {"MemTotal above the guest's max",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->set_mem_total_bytes(64 * kGiB);
         return SignAsSelf(r);
       },
       RejectReason::kSizeOutOfRange},
      {"absurd Active(file)",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->set_active_file_bytes(uint64_t{1} << 62);
         return SignAsSelf(r);
       },
       RejectReason::kSizeOutOfRange},
      {"Cached above MemTotal",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->set_cached_bytes(1001 * kMiB);
         return SignAsSelf(r);
       },
       RejectReason::kSizeOutOfRange},
      {"MemTotal zero",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->set_mem_total_bytes(0);
         return SignAsSelf(r);
       },
       RejectReason::kSizeOutOfRange},
      {"SwapFree above SwapTotal",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->set_swap_free_bytes(1);
         return SignAsSelf(r);
       },
       RejectReason::kSizeOutOfRange},
      {"absent fields are fine (old kernel)",
       [] {
         v1::AgentReport r = MakeReport(kVictim, kBootA, 10);
         r.mutable_meminfo()->clear_mem_available_bytes();
         r.mutable_vmstat()->clear_oom_kill();
         r.clear_memory_pressure();
         return SignAsSelf(r);
       },
       std::nullopt},
  };
  for (const Row& row : rows) {
    GuestHistory history;
    EXPECT_EQ(Run(row.frame(), &history), row.want) << row.name;
    // Again on a stream that already proved the victim (its token prepared in the cache): the
    // cache may change what a check costs, never its verdict.
    ProofCache cache;
    v1::AgentReport parsed;
    ASSERT_TRUE(validator_.Authenticate(SignAsSelf(MakeReport(kVictim, kBootA, 5)), &parsed, &cache).ok());
    ASSERT_EQ(cache.uuid, kVictim);
    GuestHistory fresh;
    EXPECT_EQ(Run(row.frame(), &fresh, kNow, nullptr, &cache), row.want) << row.name << " (warm cache)";
  }
}

TEST_F(ValidatorTest, ProofCacheHoldsOnlyProvenIdentities) {
  v1::AgentReport report;
  ProofCache cache;
  // A failed proof fills nothing.
  EXPECT_EQ(validator_.Authenticate(Sign(MakeReport(kVictim, kBootA, 10), TokenFor(kAttacker)), &report, &cache).reject,
            RejectReason::kBadProof);
  EXPECT_EQ(cache.prover, nullptr);
  ASSERT_TRUE(validator_.Authenticate(SignAsSelf(MakeReport(kVictim, kBootA, 10)), &report, &cache).ok());
  EXPECT_EQ(cache.uuid, kVictim);
  // The victim's prepared token proves nothing for another uuid, and a failure keeps the cache.
  EXPECT_EQ(validator_.Authenticate(Sign(MakeReport(kAttacker, kBootA, 10), TokenFor(kVictim)), &report, &cache).reject,
            RejectReason::kBadProof);
  EXPECT_EQ(cache.uuid, kVictim);
  // Another proven uuid replaces it (the store then ends such a stream: identity change).
  ASSERT_TRUE(validator_.Authenticate(SignAsSelf(MakeReport(kAttacker, kBootA, 10)), &report, &cache).ok());
  EXPECT_EQ(cache.uuid, kAttacker);

  // A cache filled under another host key is not used by this validator.
  const std::string other_key(32, 'k');
  ReportValidator other(other_key);
  ProofCache foreign;
  const v1::SignedAgentReport theirs =
      Sign(MakeReport(kVictim, kBootA, 10), plimsoll::protocol::DeriveGuestToken(other_key, kVictim));
  ASSERT_TRUE(other.Authenticate(theirs, &report, &foreign).ok());
  EXPECT_EQ(validator_.Authenticate(theirs, &report, &foreign).reject, RejectReason::kBadProof);
}

TEST_F(ValidatorTest, CheckInPlaceSpendsTheBucketAndLeavesLastToTheCaller) {
  GuestHistory history;
  const v1::AgentReport first = MakeReport(kVictim, kBootA, 10);
  ASSERT_TRUE(validator_.CheckInPlace(first, &limits_, &history, kNow).ok());
  EXPECT_FALSE(history.last.has_value());
  EXPECT_EQ(history.refilled, kNow);
  EXPECT_DOUBLE_EQ(history.tokens, validator_.options().burst - 1);
  history.last = first;
  // Compared against `last`: an older boottime is a replay, and still spends a token.
  EXPECT_EQ(validator_.CheckInPlace(MakeReport(kVictim, kBootA, 9), &limits_, &history, kNow).reject,
            RejectReason::kReplay);
  EXPECT_DOUBLE_EQ(history.tokens, validator_.options().burst - 2);
  EXPECT_EQ(history.last->boottime_ns(), first.boottime_ns());
}

TEST_F(ValidatorTest, UnknownGuestIsRejectedAfterItsProof) {
  v1::AgentReport report;
  ASSERT_TRUE(validator_.Authenticate(SignAsSelf(MakeReport(kStranger, kBootA, 10)), &report).ok());
  GuestHistory next;
  EXPECT_EQ(validator_.Check(report, nullptr, GuestHistory{}, kNow, &next).reject, RejectReason::kUnknownGuest);
}

TEST_F(ValidatorTest, HistoryTable) {
  auto none = [](v1::AgentReport*) {};
  const std::vector<Case> cases = {
      {"steady reports", {{kBootA, 10, none, {}}, {kBootA, 15, none, {}}, {kBootA, 20, none, {}}}},
      {"replayed report (same boottime)", {{kBootA, 10, none, {}}, {kBootA, 10, none, RejectReason::kReplay}}},
      {"older report after a newer one", {{kBootA, 20, none, {}}, {kBootA, 15, none, RejectReason::kReplay}}},
      {"counter going backwards",
       {{kBootA, 10, none, {}},
        {kBootA, 15, [](v1::AgentReport* r) { r->mutable_vmstat()->set_workingset_refault_file(5); },
         RejectReason::kCounterBackwards}}},
      {"psi total going backwards",
       {{kBootA, 10, none, {}},
        {kBootA, 15, [](v1::AgentReport* r) { r->mutable_memory_pressure()->mutable_some()->set_total_us(1); },
         RejectReason::kCounterBackwards}}},
      {"reboot: new boot id, counters and boottime restart",
       {{kBootA, 1000, none, {}}, {kBootB, 5, none, {}}, {kBootB, 10, none, {}}}},
      {"after a reboot the old boot's counters no longer bind, the new ones do",
       {{kBootA, 1000, none, {}},
        {kBootB, 5, none, {}},
        {kBootB, 10, [](v1::AgentReport* r) { r->mutable_vmstat()->set_pgmajfault(1); },
         RejectReason::kCounterBackwards}}},
      {"implausible counter growth",
       {{kBootA, 10, none, {}},
        {kBootA, 11, [](v1::AgentReport* r) { r->mutable_vmstat()->set_pgmajfault(uint64_t{1} << 40); },
         RejectReason::kImplausibleRate}}},
      {"psi stall longer than elapsed time",
       {{kBootA, 10, none, {}},
        {kBootA, 15,
         [](v1::AgentReport* r) { r->mutable_memory_pressure()->mutable_some()->set_total_us(60'000'000); },
         RejectReason::kImplausibleRate}}},
      {"a counter appearing or vanishing (agent upgrade) is not a regression",
       {{kBootA, 10, [](v1::AgentReport* r) { r->mutable_vmstat()->clear_oom_kill(); }, {}},
        {kBootA, 15, none, {}},
        {kBootA, 20, [](v1::AgentReport* r) { r->mutable_vmstat()->clear_pgmajfault(); }, {}}}},
      {"a rejected report does not become the comparison base",
       {{kBootA, 10, none, {}},
        {kBootA, 15, [](v1::AgentReport* r) { r->mutable_vmstat()->set_pgmajfault(0); },
         RejectReason::kCounterBackwards},
        {kBootA, 20, none, {}}}},
  };
  RunCases(cases);
}

// A reclaim part: counters since the agent started at `since_s` (guest seconds).
std::function<void(v1::AgentReport*)> Reclaim(double since_s, uint64_t requested, uint64_t achieved,
                                              uint64_t steps = 10, uint64_t partial = 0, uint64_t failed = 0) {
  return [=](v1::AgentReport* r) {
    v1::ReclaimReport* rc = r->mutable_reclaim();
    rc->set_state(v1::RECLAIM_STATE_ACTIVE);
    rc->set_reason("step");
    rc->set_counters_since_boottime_ns(static_cast<int64_t>(since_s * 1e9));
    rc->set_requested_bytes(requested);
    rc->set_achieved_bytes(achieved);
    rc->set_steps(steps);
    rc->set_partial_steps(partial);
    rc->set_failed_steps(failed);
  };
}

// The reclaim part of a guest's reports: a claim bounded by what any agent can have done
// (1 GiB guest, the default 256 MiB/s).
TEST_F(ValidatorTest, ReclaimTable) {
  auto none = [](v1::AgentReport*) {};
  const uint64_t rate = 256 * kMiB;
  const std::vector<Case> cases = {
      {"an honest series",
       {{kBootA, 10, Reclaim(5, 64 * kMiB, 64 * kMiB, 1), {}},
        {kBootA, 15, Reclaim(5, 160 * kMiB, 150 * kMiB, 3, 1), {}},
        {kBootA, 20, Reclaim(5, 160 * kMiB, 150 * kMiB, 3, 1), {}}}},
      {"achieved above requested", {{kBootA, 10, Reclaim(5, 10 * kMiB, 11 * kMiB), RejectReason::kImplausibleReclaim}}},
      {"more partial and failed steps than steps",
       {{kBootA, 10, Reclaim(5, 10 * kMiB, 0, 2, 2, 1), RejectReason::kImplausibleReclaim}}},
      {"partial and failed steps whose sum wraps around",
       {{kBootA, 10, Reclaim(5, 10 * kMiB, 0, 0, UINT64_MAX, 1), RejectReason::kImplausibleReclaim}}},
      {"counters that start after the report", {{kBootA, 10, Reclaim(11, 0, 0, 0), RejectReason::kMalformed}}},
      {"counters without a start", {{kBootA, 10, Reclaim(0, 0, 0, 0), RejectReason::kMalformed}}},
      {"a hostile claim: 1 PiB since the agent started 5 s ago",
       {{kBootA, 10, Reclaim(5, uint64_t{1} << 50, 0), RejectReason::kImplausibleReclaim}}},
      {"a hostile claim within a series: 100 GiB in 5 s",
       {{kBootA, 10, Reclaim(5, 0, 0, 0), {}},
        {kBootA, 15, Reclaim(5, 100 * kGiB, 100 * kGiB), RejectReason::kImplausibleReclaim}}},
      {"the fastest an agent may go: the rate for 10 s",
       {{kBootA, 10, Reclaim(5, 0, 0, 0), {}}, {kBootA, 20, Reclaim(5, 10 * rate, 10 * rate), {}}}},
      {"requested going backwards within a series",
       {{kBootA, 10, Reclaim(5, 100 * kMiB, 50 * kMiB), {}},
        {kBootA, 15, Reclaim(5, 99 * kMiB, 50 * kMiB), RejectReason::kCounterBackwards}}},
      {"achieved going backwards within a series",
       {{kBootA, 10, Reclaim(5, 100 * kMiB, 50 * kMiB), {}},
        {kBootA, 15, Reclaim(5, 100 * kMiB, 49 * kMiB), RejectReason::kCounterBackwards}}},
      {"steps going backwards within a series",
       {{kBootA, 10, Reclaim(5, 100 * kMiB, 50 * kMiB, 4), {}},
        {kBootA, 15, Reclaim(5, 100 * kMiB, 50 * kMiB, 3), RejectReason::kCounterBackwards}}},
      {"an agent restarted: a new series starts again from zero",
       {{kBootA, 10, Reclaim(5, 900 * kMiB, 900 * kMiB), {}}, {kBootA, 20, Reclaim(15, 100 * kMiB, 100 * kMiB), {}}}},
      {"a new series that claims to have started before the last report",
       {{kBootA, 10, Reclaim(5, 0, 0, 0), {}}, {kBootA, 20, Reclaim(8, 0, 0, 0), RejectReason::kImplausibleReclaim}}},
      {"restarting series to multiply a claim: each new one is bounded from its own start",
       {{kBootA, 10, Reclaim(5, 2 * kGiB, 0), {}},
        {kBootA, 11, Reclaim(10.5, 2 * kGiB, 0), RejectReason::kImplausibleReclaim}}},
      {"after a reboot a new series, bounded from its own start",
       {{kBootA, 1000, Reclaim(5, 50 * kGiB, 50 * kGiB), {}},
        {kBootB, 20, Reclaim(3, kGiB, kGiB), {}},
        {kBootB, 21, Reclaim(20.5, 2 * kGiB, 0), RejectReason::kImplausibleReclaim}}},
      {"an agent upgraded to one that reclaims",
       {{kBootA, 10, none, {}}, {kBootA, 20, Reclaim(15, 64 * kMiB, 64 * kMiB), {}}}},
      {"an upgraded agent's series must start after the last report",
       {{kBootA, 10, none, {}}, {kBootA, 20, Reclaim(8, 0, 0, 0), RejectReason::kImplausibleReclaim}}},
      {"a rejected claim does not become the comparison base",
       {{kBootA, 10, Reclaim(5, 100 * kMiB, 100 * kMiB), {}},
        {kBootA, 15, Reclaim(5, 50 * kMiB, 50 * kMiB), RejectReason::kCounterBackwards},
        {kBootA, 20, Reclaim(5, 200 * kMiB, 200 * kMiB), {}}}},
  };
  RunCases(cases);
}

TEST_F(ValidatorTest, SameReclaimSeries) {
  v1::AgentReport a = MakeReport(kVictim, kBootA, 10);
  v1::AgentReport b = MakeReport(kVictim, kBootA, 15);
  EXPECT_FALSE(ReportValidator::SameReclaimSeries(b, a));  // no reclaim parts
  Reclaim(5, 0, 0)(&a);
  Reclaim(5, 1, 1)(&b);
  EXPECT_TRUE(ReportValidator::SameReclaimSeries(b, a));
  Reclaim(6, 1, 1)(&b);
  EXPECT_FALSE(ReportValidator::SameReclaimSeries(b, a));
  v1::AgentReport c = MakeReport(kVictim, kBootB, 15);
  Reclaim(5, 1, 1)(&c);
  EXPECT_FALSE(ReportValidator::SameReclaimSeries(c, a));  // another boot
}

TEST_F(ValidatorTest, RateLimitPerGuest) {
  // Default budget: burst 10, then 2 per second.
  GuestHistory history;
  double t = 1;
  int accepted = 0;
  for (int i = 0; i < 15; ++i) {
    t += 0.01;
    if (!Run(SignAsSelf(MakeReport(kVictim, kBootA, t)), &history, kNow).has_value()) ++accepted;
  }
  EXPECT_EQ(accepted, 10);
  EXPECT_EQ(Run(SignAsSelf(MakeReport(kVictim, kBootA, t += 0.01)), &history, kNow), RejectReason::kRateLimited);
  // Half a second later one token is back.
  EXPECT_EQ(Run(SignAsSelf(MakeReport(kVictim, kBootA, t += 0.5)), &history, kNow + absl::Milliseconds(500)),
            std::nullopt);
  EXPECT_EQ(Run(SignAsSelf(MakeReport(kVictim, kBootA, t += 0.01)), &history, kNow + absl::Milliseconds(500)),
            RejectReason::kRateLimited);
  // A clock stepping backwards refills nothing.
  EXPECT_EQ(Run(SignAsSelf(MakeReport(kVictim, kBootA, t += 0.01)), &history, kNow - absl::Hours(1)),
            RejectReason::kRateLimited);
}

TEST(RejectReasonTest, NamesAreUniqueMetricLabels) {
  std::set<std::string> names;
  for (RejectReason r : AllRejectReasons()) {
    const std::string name(RejectReasonName(r));
    EXPECT_NE(name, "unknown");
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumRejectReasons));
}

}  // namespace
}  // namespace plimsoll::server::agent
