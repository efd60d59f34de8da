#include "agent/reclaim_decision.h"

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A 1 GiB guest with 877 MiB of file cache (the lab's guest after reading a 1 GiB file), calm,
// live bounds: keep 300 MiB used and 64 MiB of file, steps of 64 MiB at 32 MiB/s, last step 10 s
// ago. The law's answer: a 64 MiB step.
ReclaimSituation Base() {
  ReclaimSituation s;
  s.bounds = BoundsStatus::kLive;
  s.limits.enabled = true;
  s.limits.keep_bytes = 300 * kMiB;
  s.limits.keep_file_bytes = 64 * kMiB;
  s.limits.step_bytes = 64 * kMiB;
  s.limits.max_bytes_per_second = 32.0 * kMiB;
  s.limits.psi_stop_pct = 5;
  s.limits.refault_stop_per_second = 1000;
  s.sample.mem_total_bytes = 1024 * kMiB;
  s.sample.mem_free_bytes = 50 * kMiB;
  s.sample.active_file_bytes = 100 * kMiB;
  s.sample.inactive_file_bytes = 777 * kMiB;
  s.sample.psi_some_avg10 = 0.5;
  s.sample.psi_some_recent_pct = 0.2;
  s.sample.file_refaults_per_second = 10;
  s.since_step = absl::Seconds(10);
  return s;
}

struct Row {
  const char* name;
  std::function<void(ReclaimSituation&)> change;
  ReclaimReason want;
  uint64_t want_bytes = 0;
};

TEST(ReclaimDecisionTest, Table) {
  const uint64_t used = (1024 - 50) * kMiB;
  const std::vector<Row> rows = {
      {"calm guest with cache above both keeps: a whole step", [](ReclaimSituation&) {}, ReclaimReason::kStep,
       64 * kMiB},
      {"first step ever: a whole step", [](ReclaimSituation& s) { s.since_step = absl::InfiniteDuration(); },
       ReclaimReason::kStep, 64 * kMiB},
      {"rate: 1 s since the last step earns 32 MiB", [](ReclaimSituation& s) { s.since_step = absl::Seconds(1); },
       ReclaimReason::kStep, 32 * kMiB},
      {"used keep leaves 10 MiB of headroom: half of it",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used - 10 * kMiB; }, ReclaimReason::kStep, 5 * kMiB},
      {"file keep leaves 7 MiB of headroom: half of it",
       [](ReclaimSituation& s) { s.limits.keep_file_bytes = 870 * kMiB; }, ReclaimReason::kStep, 3584 * 1024},
      {"a headroom of 10 MiB + 200 pages asks for whole pages",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used - 10 * kMiB - 200 * 4096 - 100; }, ReclaimReason::kStep,
       5 * kMiB + 100 * 4096},
      {"headroom of exactly one step: half of it",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used - 64 * kMiB; }, ReclaimReason::kStep, 32 * kMiB},
      {"headroom just over a step: a whole step",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used - 65 * kMiB; }, ReclaimReason::kStep, 64 * kMiB},
      {"headroom of 1.5 MiB: the smallest step",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used - 3 * kMiB / 2; }, ReclaimReason::kStep, kMiB},
      {"pressure exactly at the stops still steps",
       [](ReclaimSituation& s) {
         s.sample.psi_some_avg10 = 5;
         s.sample.file_refaults_per_second = 1000;
       },
       ReclaimReason::kStep, 64 * kMiB},
      {"no PSI in the guest: refaults alone judge",
       [](ReclaimSituation& s) {
         s.sample.psi_some_avg10.reset();
         s.sample.psi_some_recent_pct.reset();
       },
       ReclaimReason::kStep, 64 * kMiB},
      {"--reclaim=off", [](ReclaimSituation& s) { s.enabled = false; }, ReclaimReason::kOffDisabled},
      {"off wins over unsupported",
       [](ReclaimSituation& s) {
         s.enabled = false;
         s.supported = false;
       },
       ReclaimReason::kOffDisabled},
      {"no memory.reclaim", [](ReclaimSituation& s) { s.supported = false; }, ReclaimReason::kOffUnsupported},
      {"no bounds from the host yet", [](ReclaimSituation& s) { s.bounds = BoundsStatus::kNone; },
       ReclaimReason::kNoBounds},
      {"bounds expired", [](ReclaimSituation& s) { s.bounds = BoundsStatus::kExpired; },
       ReclaimReason::kBoundsExpired},
      {"bounds invalid", [](ReclaimSituation& s) { s.bounds = BoundsStatus::kInvalid; },
       ReclaimReason::kBoundsInvalid},
      {"host says disabled", [](ReclaimSituation& s) { s.limits.enabled = false; }, ReclaimReason::kHostDisabled},
      {"host gives no step", [](ReclaimSituation& s) { s.limits.step_bytes = 0; }, ReclaimReason::kHostDisabled},
      {"host gives no rate", [](ReclaimSituation& s) { s.limits.max_bytes_per_second = 0; },
       ReclaimReason::kHostDisabled},
      {"a NaN rate is no rate", [](ReclaimSituation& s) { s.limits.max_bytes_per_second = std::nan(""); },
       ReclaimReason::kHostDisabled},
      {"no bounds wins over pressure",
       [](ReclaimSituation& s) {
         s.bounds = BoundsStatus::kNone;
         s.sample.psi_some_avg10 = 50;
       },
       ReclaimReason::kNoBounds},
      {"a write failed 30 s ago", [](ReclaimSituation& s) { s.since_error = absl::Seconds(30); },
       ReclaimReason::kAfterError},
      {"a write failed 61 s ago: try again", [](ReclaimSituation& s) { s.since_error = absl::Seconds(61); },
       ReclaimReason::kStep, 64 * kMiB},
      {"EAGAIN 10 s ago", [](ReclaimSituation& s) { s.since_partial = absl::Seconds(10); },
       ReclaimReason::kAfterPartial},
      {"EAGAIN 31 s ago: try again", [](ReclaimSituation& s) { s.since_partial = absl::Seconds(31); },
       ReclaimReason::kStep, 64 * kMiB},
      {"meminfo without MemFree", [](ReclaimSituation& s) { s.sample.mem_free_bytes.reset(); },
       ReclaimReason::kNoSample},
      {"meminfo without Inactive(file)", [](ReclaimSituation& s) { s.sample.inactive_file_bytes.reset(); },
       ReclaimReason::kNoSample},
      {"no refault rate yet", [](ReclaimSituation& s) { s.sample.file_refaults_per_second.reset(); },
       ReclaimReason::kNoBaseline},
      {"PSI avg10 over the stop", [](ReclaimSituation& s) { s.sample.psi_some_avg10 = 5.01; },
       ReclaimReason::kPressure},
      {"a stall in the last period while avg10 still lags",
       [](ReclaimSituation& s) {
         s.sample.psi_some_avg10 = 0.1;
         s.sample.psi_some_recent_pct = 20;
       },
       ReclaimReason::kPressure},
      {"refaults over the stop", [](ReclaimSituation& s) { s.sample.file_refaults_per_second = 1500; },
       ReclaimReason::kPressure},
      {"a NaN PSI stops", [](ReclaimSituation& s) { s.sample.psi_some_avg10 = std::nan(""); },
       ReclaimReason::kPressure},
      {"a NaN refault stop stops", [](ReclaimSituation& s) { s.limits.refault_stop_per_second = std::nan(""); },
       ReclaimReason::kPressure},
      {"pressure wins over below keep",
       [=](ReclaimSituation& s) {
         s.sample.psi_some_avg10 = 30;
         s.limits.keep_bytes = used;
       },
       ReclaimReason::kPressure},
      {"used at the keep", [=](ReclaimSituation& s) { s.limits.keep_bytes = used; }, ReclaimReason::kBelowKeep},
      {"used under the keep (the guest grew its anon)",
       [=](ReclaimSituation& s) { s.limits.keep_bytes = used + 100 * kMiB; }, ReclaimReason::kBelowKeep},
      {"file at its keep", [](ReclaimSituation& s) { s.limits.keep_file_bytes = 877 * kMiB; },
       ReclaimReason::kBelowKeep},
      {"headroom under the smallest step", [=](ReclaimSituation& s) { s.limits.keep_bytes = used - kMiB / 2; },
       ReclaimReason::kBelowKeep},
      {"below keep wins over the rate limit",
       [=](ReclaimSituation& s) {
         s.limits.keep_bytes = used;
         s.since_step = absl::Milliseconds(1);
       },
       ReclaimReason::kBelowKeep},
      {"10 ms since the last step earns 0.3 MiB", [](ReclaimSituation& s) { s.since_step = absl::Milliseconds(10); },
       ReclaimReason::kRateLimit},
      {"a clock that went back earns nothing", [](ReclaimSituation& s) { s.since_step = absl::Seconds(-5); },
       ReclaimReason::kRateLimit},
  };
  std::set<ReclaimReason> seen;
  for (const Row& row : rows) {
    ReclaimSituation s = Base();
    row.change(s);
    const ReclaimDecision d = DecideReclaim(s);
    EXPECT_EQ(ReclaimReasonName(d.reason), ReclaimReasonName(row.want)) << row.name << ": " << d.detail;
    EXPECT_EQ(d.bytes, row.want_bytes) << row.name << ": " << d.detail;
    seen.insert(row.want);
  }
  // Every reason has a row.
  EXPECT_EQ(seen.size(), 14u);
}

// Over any span the steps add up to at most rate * span + one step, however often the law is
// asked: the promise the daemon's plausibility check on reported reclaim relies on.
TEST(ReclaimDecisionTest, StepsNeverOutrunTheRatePlusOneStep) {
  for (const absl::Duration tick : {absl::Milliseconds(50), absl::Milliseconds(700), absl::Seconds(3)}) {
    ReclaimSituation s = Base();
    s.limits.keep_bytes = 0;
    s.limits.keep_file_bytes = 0;
    s.sample.inactive_file_bytes = uint64_t{1} << 40;  // never runs out
    s.sample.mem_total_bytes = uint64_t{1} << 41;
    absl::Duration since = absl::InfiniteDuration();
    absl::Duration elapsed;
    uint64_t total = 0;
    int steps = 0;
    for (int i = 0; i < 400; ++i) {
      s.since_step = since;
      const ReclaimDecision d = DecideReclaim(s);
      if (d.reason == ReclaimReason::kStep) {
        total += d.bytes;
        ++steps;
        since = absl::ZeroDuration();
      }
      since += tick;
      elapsed += tick;
      EXPECT_LE(static_cast<double>(total),
                s.limits.max_bytes_per_second * absl::ToDoubleSeconds(elapsed) + s.limits.step_bytes)
          << "tick " << tick << " at " << elapsed;
    }
    EXPECT_GT(steps, 10) << tick;
  }
}

TEST(ReclaimDecisionTest, NamesAndStates) {
  std::set<std::string> names;
  for (int i = 0; i <= static_cast<int>(ReclaimReason::kRateLimit); ++i) {
    names.insert(std::string(ReclaimReasonName(static_cast<ReclaimReason>(i))));
  }
  EXPECT_EQ(names.size(), 14u);
  EXPECT_EQ(names.count("unknown"), 0u);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kStep), v1::RECLAIM_STATE_ACTIVE);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kRateLimit), v1::RECLAIM_STATE_ACTIVE);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kPressure), v1::RECLAIM_STATE_STOPPED_PRESSURE);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kAfterError), v1::RECLAIM_STATE_FAILED);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kOffDisabled), v1::RECLAIM_STATE_OFF_DISABLED);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kOffUnsupported), v1::RECLAIM_STATE_OFF_UNSUPPORTED);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kBelowKeep), v1::RECLAIM_STATE_IDLE);
  EXPECT_EQ(ReclaimStateFor(ReclaimReason::kNoBounds), v1::RECLAIM_STATE_IDLE);
}

}  // namespace
}  // namespace plimsoll::agent
