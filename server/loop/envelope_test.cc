// The envelope's rules, one table: each row is a guest, its controls and the policy's decision;
// it says where the envelope takes the target, which rules fired, and a piece of the reason.
#include "server/loop/envelope.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Row {
  std::string name;
  std::function<void(policy::GuestDecision&, EnvelopeGuest&, GuestControl&, EnvelopeHost&,
                     plimsoll::v1::GuestOverride&, policy::GuestView&)>
      setup;
  int64_t want_target_mib;
  std::vector<EnvelopeRule> want_fired;
  std::string want_reason_part;  // "" to skip
  std::string want_released;     // the hold's release reason, a prefix; "" none
};

// A 2 GiB guest at 1536 MiB with fresh stats, configured floor 512 MiB, no controls; the policy
// asks for 1280 MiB with its floor at 600 MiB. MemAvailable 1200 MiB: libvirt's floor is
// 1536 - 1200 + 128 = 464 MiB.
void Defaults(policy::GuestDecision& d, EnvelopeGuest& g, GuestControl& c, EnvelopeHost& h,
              policy::GuestView& v) {
  d.uuid = "u";
  d.target_bytes = 1280 * kMiB;
  d.reason = "policy";
  d.floor_bytes = 600 * kMiB;
  g.target_bytes = 1536 * kMiB;
  g.actual_bytes = 1536 * kMiB;
  g.max_bytes = 2048 * kMiB;
  g.configured_floor_bytes = 512 * kMiB;
  g.has_stats = true;
  g.stats_fresh = true;
  g.stats_seen_changing = true;
  c.floor = 512 * kMiB;
  c.ceiling = 2048 * kMiB;
  h = EnvelopeHost();
  v.uuid = "u";
  v.actual_bytes = 1536 * kMiB;
  v.max_bytes = 2048 * kMiB;
  v.usable_bytes = 1200 * kMiB;
}

void Hold(GuestControl& c, int64_t mib) {
  c.hold.emplace();
  c.hold->set_reclaim_id("r1");
  c.hold->set_max_target_bytes(mib * kMiB);
}

using R = EnvelopeRule;
using O = plimsoll::v1::GuestOverride;

std::vector<Row> Rows() {
  return {
      {"no controls: the policy's target", [](auto&...) {}, 1280, {}, "policy", ""},
      {"growth passes through",
       [](policy::GuestDecision& d, auto&...) { d.target_bytes = 1900 * kMiB; }, 1900, {}, "", ""},
      {"pin above the floor, within a step",
       [](auto& d, auto& g, GuestControl& c, auto& h, O& o, auto& v) { c.pin = 1400 * kMiB; c.override = &o; },
       1400, {R::kPin}, "pinned at 1400MiB by override", ""},
      {"pin below the policy's floor is raised to it",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, O& o, auto& v) {
         g.target_bytes = 700 * kMiB;
         c.pin = 300 * kMiB;
         c.override = &o;
       },
       600, {R::kPin, R::kPinFloor}, "raised to hard demand + headroom 600MiB", ""},
      {"pin below libvirt's floor is raised to that",
       [](policy::GuestDecision& d, EnvelopeGuest& g, GuestControl& c, auto& h, O& o, policy::GuestView& v) {
         d.floor_bytes = 0;
         g.target_bytes = 700 * kMiB;
         v.usable_bytes = 900 * kMiB;  // 1536 - 900 + 128 = 764
         c.pin = 300 * kMiB;
         c.override = &o;
       },
       764, {R::kPin, R::kPinFloor}, "as libvirt shows it 764MiB", ""},
      {"a far pin moves one step a tick",
       [](auto& d, auto& g, GuestControl& c, auto& h, O& o, auto& v) { c.pin = 700 * kMiB; c.override = &o; },
       1536 - 512, {R::kPin, R::kPinStep}, "step of 512MiB per tick", ""},
      {"a forced pin goes straight there",
       [](auto& d, auto& g, GuestControl& c, auto& h, O& o, auto& v) {
         o.set_force(true);
         o.set_updated_by("ops");
         c.pin = 300 * kMiB;
         c.override = &o;
       },
       300, {R::kPin}, "forced by=\"ops\"", ""},
      {"a hold caps the target",
       [](auto& d, auto& g, GuestControl& c, auto&...) { Hold(c, 1000); }, 1000, {R::kHold},
       "reclaim r1 holds it at <= 1000MiB", ""},
      {"distress ends the hold",
       [](policy::GuestDecision& d, auto& g, GuestControl& c, auto&...) {
         Hold(c, 1000);
         d.distress = "pressure x=1.40";
       },
       1280, {R::kHoldReleased}, "reclaim r1 released: pressure x=1.40", "pressure"},
      {"a self-deflated balloon ends the hold",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         Hold(c, 1000);
         g.target_bytes = 1000 * kMiB;
         g.actual_bytes = 1300 * kMiB;
         v.history.emplace().progress = policy::ProgressEvent::kSelfDeflated;
       },
       1280, {R::kHoldReleased}, "self_deflated actual=1300MiB", "self_deflated"},
      {"a balloon within the landing tolerance of a large hold is not above it",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         g.max_bytes = c.ceiling = 4096 * kMiB;
         Hold(c, 3000);
         g.target_bytes = 3000 * kMiB;
         g.actual_bytes = 3020 * kMiB;  // within max(16 MiB, 1% of 3000 MiB)
         v.history.emplace().progress = policy::ProgressEvent::kSelfDeflated;
       },
       1280, {}, "policy", ""},
      {"a balloon above its hold that the history did not see rise has not self-deflated",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto&...) {
         Hold(c, 1000);
         g.target_bytes = 1000 * kMiB;
         g.actual_bytes = 1300 * kMiB;  // still on its way down, say
       },
       1000, {R::kHold}, "holds it at <= 1000MiB", ""},
      {"hard demand above a landed hold ends it",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         Hold(c, 400);
         g.target_bytes = 400 * kMiB;
         g.actual_bytes = 400 * kMiB;
         v.actual_bytes = 400 * kMiB;
         v.usable_bytes = 20 * kMiB;  // 400 - 20 + 128 = 508 > 400 + 16
         v.history.emplace().report_after_landing = true;
         d.floor_bytes = 0;
       },
       1280, {R::kHoldReleased}, "floor_above_hold floor=508MiB held=400MiB", "floor_above_hold"},
      {"hard demand is not judged while the balloon travels to the hold",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         Hold(c, 400);
         c.floor = 256 * kMiB;
         g.target_bytes = 400 * kMiB;
         g.actual_bytes = 700 * kMiB;
         v.actual_bytes = 700 * kMiB;
         v.usable_bytes = 100 * kMiB;
         d.floor_bytes = 0;
       },
       400, {R::kHold}, "holds it at <= 400MiB", ""},
      {"hard demand is not judged on a report taken before the landing",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         Hold(c, 624);
         c.floor = 256 * kMiB;
         g.target_bytes = 624 * kMiB;
         g.actual_bytes = v.actual_bytes = 624 * kMiB;
         v.usable_bytes = 20 * kMiB;  // 624 - 20 + 128 = 732 > 624 + 16, but not yet measured
         v.history.emplace().report_after_landing = false;
         d.floor_bytes = 0;
       },
       624, {R::kHold}, "holds it at <= 624MiB", ""},
      {"nor is the policy's floor from such a report",
       [](auto& d, EnvelopeGuest& g, GuestControl& c, auto& h, auto& o, policy::GuestView& v) {
         Hold(c, 624);
         c.floor = 256 * kMiB;
         g.target_bytes = 624 * kMiB;
         g.actual_bytes = v.actual_bytes = 624 * kMiB;
         v.usable_bytes = 500 * kMiB;
         v.history.emplace().report_after_landing = false;
         d.floor_bytes = 696 * kMiB;  // 1023 - 455 + 128: the size libvirt showed at the report
       },
       624, {R::kHold}, "holds it at <= 624MiB", ""},
      {"clamped to an override's ceiling",
       [](policy::GuestDecision& d, auto& g, GuestControl& c, auto& h, O& o, auto& v) {
         d.target_bytes = 1900 * kMiB;
         o.set_max_bytes(1600 * kMiB);
         c.ceiling = 1600 * kMiB;
         c.override = &o;
       },
       1600, {R::kClamp}, "clamped to [512MiB, 1600MiB] (override)", ""},
      {"under a lowered min: the envelope floor",
       [](policy::GuestDecision& d, EnvelopeGuest& g, GuestControl& c, auto& h, O& o, auto& v) {
         d.target_bytes = 256 * kMiB;
         g.target_bytes = 700 * kMiB;
         o.set_min_bytes(128 * kMiB);
         c.floor = 128 * kMiB;
         c.override = &o;
       },
       600, {R::kLoweredMinFloor}, "the override's min 128MiB is below it", ""},
      {"a forced lowered min goes under the floor",
       [](policy::GuestDecision& d, EnvelopeGuest& g, GuestControl& c, auto& h, O& o, auto& v) {
         d.target_bytes = 256 * kMiB;
         g.target_bytes = 700 * kMiB;
         o.set_min_bytes(128 * kMiB);
         o.set_force(true);
         c.floor = 128 * kMiB;
         c.override = &o;
       },
       256, {}, "override min 128MiB (forced", ""},
      {"an excluded guest is never moved",
       [](auto& d, auto& g, GuestControl& c, auto&...) { c.exclude = true; }, 1536, {R::kExclude},
       "excluded by override: never moved", ""},
      {"no stats: no shrink",
       [](auto& d, EnvelopeGuest& g, auto&...) { g.has_stats = false; }, 1536, {R::kNoStats},
       "no balloon stats from guest", ""},
      {"no stats: growth is fine",
       [](policy::GuestDecision& d, EnvelopeGuest& g, auto&...) {
         g.has_stats = false;
         d.target_bytes = 1800 * kMiB;
       },
       1800, {}, "", ""},
      {"stale stats: no shrink, with their age",
       [](auto& d, EnvelopeGuest& g, auto&...) {
         g.stats_fresh = false;
         g.stats_age_seconds = 42;
       },
       1536, {R::kStaleStats}, "stale stats (age=42.0s)", ""},
      {"stats never seen to change are stale, and it says so",
       [](auto& d, EnvelopeGuest& g, auto&...) {
         g.stats_fresh = false;
         g.stats_seen_changing = false;
         g.stats_age_seconds = 3;
       },
       1536, {R::kStaleStats}, "not seen to change in the 3.0s", ""},
      {"host data stale: no shrink",
       [](auto& d, auto& g, auto& c, EnvelopeHost& h, auto&...) {
         h.stale = true;
         h.data_age_seconds = 9;
       },
       1536, {R::kHostStale}, "host memory not read this tick (data age=9.0s)", ""},
      {"a balloon inflating on stale stats stops where it is",
       [](auto& d, EnvelopeGuest& g, auto&...) {
         g.target_bytes = 1000 * kMiB;
         g.actual_bytes = 1400 * kMiB;
         g.stats_fresh = false;
       },
       1400, {R::kInflationStopped}, "inflation stopped at 1400MiB (was heading for 1280MiB)", ""},
      {"absent from the listing: kept",
       [](policy::GuestDecision& d, EnvelopeGuest& g, auto&...) {
         g.missed_listings = 2;
         d.target_bytes = 1800 * kMiB;
       },
       1536, {R::kAbsent}, "absent from the last 2 listing(s)", ""},
      {"an unsure target is set again",
       [](policy::GuestDecision& d, EnvelopeGuest& g, auto&...) {
         g.target_unsure = true;
         d.target_bytes = 1536 * kMiB;
       },
       1536, {R::kReassert}, "re-asserting target 1536MiB", ""},
  };
}

class EnvelopeTable : public testing::TestWithParam<Row> {};

TEST_P(EnvelopeTable, Constrains) {
  const Row& row = GetParam();
  policy::GuestDecision d;
  EnvelopeGuest g;
  GuestControl c;
  EnvelopeHost h;
  plimsoll::v1::GuestOverride o;
  policy::GuestView v;
  Defaults(d, g, c, h, v);
  row.setup(d, g, c, h, o, v);
  const Move m = Constrain(d, &v, g, c, h);
  EXPECT_EQ(m.target_bytes, row.want_target_mib * kMiB) << m.reason;
  EXPECT_EQ(m.fired, row.want_fired) << m.reason;
  if (!row.want_reason_part.empty()) {
    EXPECT_NE(m.reason.find(row.want_reason_part), std::string::npos) << m.reason;
  }
  EXPECT_EQ(m.hold_released.rfind(row.want_released, 0) == 0 && !m.hold_released.empty(), !row.want_released.empty())
      << m.hold_released;
  const auto want_dir = m.target_bytes < g.target_bytes   ? plimsoll::v1::DIRECTION_INFLATE
                        : m.target_bytes > g.target_bytes ? plimsoll::v1::DIRECTION_DEFLATE
                                                          : plimsoll::v1::DIRECTION_HOLD;
  EXPECT_EQ(m.direction, want_dir);
}

INSTANTIATE_TEST_SUITE_P(Rules, EnvelopeTable, testing::ValuesIn(Rows()), [](const auto& info) {
  std::string n;
  for (char ch : info.param.name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
});

TEST(EnvelopeTest, TheFloorIsTheLargerOfThePolicysAndLibvirtsCappedAtTheCeiling) {
  policy::GuestDecision d;
  EnvelopeGuest g;
  GuestControl c;
  EnvelopeHost h;
  policy::GuestView v;
  Defaults(d, g, c, h, v);
  EXPECT_EQ(Constrain(d, &v, g, c, h).envelope_floor_bytes, 600 * kMiB);
  EXPECT_EQ(Constrain(d, &v, g, c, h).seen_floor_bytes, 464 * kMiB);
  d.floor_bytes = 0;  // no measure from the policy: the configured floor, or libvirt's if higher
  EXPECT_EQ(Constrain(d, &v, g, c, h).envelope_floor_bytes, 512 * kMiB);
  EXPECT_EQ(Constrain(d, nullptr, g, c, h).seen_floor_bytes, 0);
  c.ceiling = 300 * kMiB;
  EXPECT_EQ(Constrain(d, &v, g, c, h).envelope_floor_bytes, 300 * kMiB);
}

}  // namespace
}  // namespace plimsoll::server
