// The control loop against the project's fakes: FakeHypervisor, FakeHostReader,
// FakeClock, and a scripted policy. Each test is one property of the tick.
#include "server/control_loop.h"

#include "gtest/gtest.h"
#include "server/host/fake_host_reader.h"
#include "server/hypervisor/fake_hypervisor.h"

namespace plimsoll::server {
namespace {

using hypervisor::BalloonStats;
using hypervisor::FakeHypervisor;

constexpr int64_t kMiB = 1LL << 20;
constexpr char kA[] = "00000000-0000-0000-0000-00000000000a";
constexpr char kB[] = "00000000-0000-0000-0000-00000000000b";

// Returns whatever targets the test scripted (default: hold), so the loop's own
// safety rules can be tested independently of any real policy.
class ScriptedPolicy : public policy::Policy {
 public:
  absl::string_view name() const override { return "scripted"; }
  policy::Decisions Decide(const policy::Snapshot& s, const policy::PolicyState& state) const override {
    policy::Decisions d;
    for (const auto& g : s.guests) {
      auto it = targets.find(g.uuid);
      policy::GuestDecision decision;
      decision.uuid = g.uuid;
      decision.target_bytes = it == targets.end() ? g.target_bytes : it->second;
      decision.reason = "scripted";
      d.guests.push_back(decision);
    }
    d.next_state = state;
    last_snapshot = s;
    return d;
  }
  absl::flat_hash_map<std::string, int64_t> targets;
  mutable policy::Snapshot last_snapshot;
};

class ControlLoopTest : public ::testing::Test {
 protected:
  ControlLoopTest() : hv_(FakeHypervisor::Options{.balloon_follows_target = true}) {
    host::HostMemory mem;
    mem.mem_total_bytes = 16384 * kMiB;
    mem.mem_available_bytes = 12000 * kMiB;
    mem.mem_free_bytes = 8000 * kMiB;
    host_.SetMemory(mem);
  }

  void MakeLoop(bool dry_run = false) {
    actuator_ = dry_run ? std::unique_ptr<Actuator>(new DryRunActuator())
                        : std::unique_ptr<Actuator>(new HypervisorActuator(&hv_));
    LoopOptions o;
    o.tick = absl::Seconds(2);
    o.host_reserve_bytes = 1024 * kMiB;
    o.guest_memory_budget_bytes = 2048 * kMiB;
    o.rules.min_bytes = 256 * kMiB;
    o.rules.min_fraction = 0.25;
    o.rules.stale_after = absl::Seconds(10);
    o.rules.no_balloon_after = absl::Seconds(6);
    loop_ = std::make_unique<ControlLoop>(
        LoopDeps{&hv_, &host_, &policy_, actuator_.get(), &clock_, &metrics_}, o);
  }

  // Stats as a guest with a working balloon driver reports them.
  void Report(const std::string& uuid, int64_t actual, int64_t last_update) {
    BalloonStats s;
    s.actual_bytes = actual;
    s.unused_bytes = 100 * kMiB;
    s.usable_bytes = 400 * kMiB;
    s.available_bytes = actual;
    s.disk_caches_bytes = 300 * kMiB;
    s.last_update = last_update;
    hv_.SetStats(uuid, s);
  }

  // Advances time by one tick, with fresh stats from every listed guest.
  void TickWithFreshStats(const std::vector<std::string>& uuids) {
    ++guest_clock_;
    for (const auto& u : uuids) Report(u, hv_.GetDomain(u)->current_bytes, guest_clock_);
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
  }

  const plimsoll::v1::Guest* Published(const std::string& uuid) {
    view_ = loop_->Published();
    for (const auto& g : view_->guests()) {
      if (g.uuid() == uuid) return &g;
    }
    return nullptr;
  }

  FakeHypervisor hv_;
  host::FakeHostReader host_;
  FakeClock clock_;
  ScriptedPolicy policy_;
  Metrics metrics_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<ControlLoop> loop_;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view_;
  int64_t guest_clock_ = 1000;
};

TEST_F(ControlLoopTest, AdoptsCurrentBalloonSizesAndMovesNothingOnStart) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 700 * kMiB);
  hv_.AddDomain(kB, "b", 2048 * kMiB, 2048 * kMiB);
  MakeLoop();
  loop_->Tick();
  EXPECT_TRUE(hv_.target_calls().empty());
  ASSERT_NE(Published(kA), nullptr);
  EXPECT_EQ(Published(kA)->target_bytes(), 700 * kMiB);
  EXPECT_EQ(Published(kB)->target_bytes(), 2048 * kMiB);
  EXPECT_EQ(hv_.StatsPeriod(kA), 2);  // stats switched on for every adopted guest
  EXPECT_EQ(view_->host().guest_budget_bytes(), 2048 * kMiB);
  EXPECT_TRUE(view_->host().libvirt_connected());
}

TEST_F(ControlLoopTest, NeverShrinksOnStatsThatDoNotAdvance) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 600 * kMiB;
  Report(kA, 1024 * kMiB, 5000);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();  // last_update stays 5000: its first value proves nothing
  }
  EXPECT_TRUE(hv_.target_calls().empty());
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_STALE_STATS);
  EXPECT_NE(Published(kA)->last_decision().reason().find("stale stats"), std::string::npos);

  TickWithFreshStats({kA});  // last_update moves: now fresh
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  EXPECT_EQ(hv_.target_calls()[0].bytes, 600 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  EXPECT_EQ(Published(kA)->last_decision().direction(), plimsoll::v1::DIRECTION_INFLATE);

  // The guest stops reporting: after stale_after, a further shrink is refused, growth is not.
  hv_.ClearTargetCalls();
  policy_.targets[kA] = 500 * kMiB;
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
  }
  ASSERT_EQ(hv_.target_calls().size(), 1u) << "shrinks while fresh, then stops";
  hv_.ClearTargetCalls();
  EXPECT_FALSE(Published(kA)->stats().stats_fresh());
  policy_.targets[kA] = 900 * kMiB;
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  EXPECT_EQ(hv_.target_calls()[0].bytes, 900 * kMiB);
}

TEST_F(ControlLoopTest, GuestWithoutBalloonStatsIsReportedNotPushed) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 512 * kMiB;
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
  }
  EXPECT_TRUE(hv_.target_calls().empty());
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON);
  EXPECT_NE(Published(kA)->last_decision().reason().find("no balloon stats"), std::string::npos);
}

TEST_F(ControlLoopTest, ClampsToFloorAndCeiling) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 4096 * kMiB, 2048 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 10 * kMiB;     // under the floor max(256MiB, 0.25 * 1024MiB)
  policy_.targets[kB] = 9999 * kMiB;   // over <memory>
  TickWithFreshStats({kA, kB});
  TickWithFreshStats({kA, kB});
  EXPECT_EQ(hv_.LastTarget(kA), 256 * kMiB);
  EXPECT_EQ(hv_.LastTarget(kB), 4096 * kMiB);
  EXPECT_EQ(Published(kB)->min_bytes(), 1024 * kMiB);  // 0.25 * 4096MiB
  EXPECT_NE(Published(kA)->last_decision().reason().find("clamped"), std::string::npos);
}

TEST_F(ControlLoopTest, LibvirtFailureIsReportedRetriedAndNeverRecordedAsTarget) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 700 * kMiB;
  TickWithFreshStats({kA});  // makes stats fresh (first value is not proof)
  hv_.ClearTargetCalls();
  hv_.FailNext(FakeHypervisor::Method::kSetBalloonTarget, absl::InternalError("qemu monitor busy"));
  TickWithFreshStats({kA});
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  EXPECT_FALSE(hv_.target_calls()[0].result.ok());
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB) << "a failed target must not be recorded";
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_APPLY_FAILED);
  EXPECT_NE(Published(kA)->state_detail().find("qemu monitor busy"), std::string::npos);
  EXPECT_NE(metrics_.Render().find("plimsoll_libvirt_errors_total{operation=\"set_target\"} 1"),
            std::string::npos);
  TickWithFreshStats({kA});  // retried on the next tick
  EXPECT_EQ(hv_.target_calls().size(), 2u);
  EXPECT_EQ(Published(kA)->target_bytes(), 700 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
}

TEST_F(ControlLoopTest, ReconnectsWithBackoffKeepsGuestsAndRequiresFreshStatsAgain) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  EXPECT_TRUE(Published(kA)->stats().stats_fresh());
  hv_.SimulateDisconnect();
  hv_.FailNext(FakeHypervisor::Method::kConnect, absl::UnavailableError("libvirtd down"), 2);
  policy_.targets[kA] = 600 * kMiB;
  const int connects_before = hv_.call_count(FakeHypervisor::Method::kConnect);
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    loop_->Tick();
  }
  // 1 s, then 2 s of backoff: two failed attempts in these 2 s, not four.
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kConnect) - connects_before, 2);
  EXPECT_FALSE(loop_->Published()->host().libvirt_connected());
  ASSERT_NE(Published(kA), nullptr) << "guests survive a lost connection";
  EXPECT_FALSE(Published(kA)->stats().stats_fresh());
  EXPECT_TRUE(hv_.target_calls().empty());
  clock_.Advance(absl::Seconds(3));
  loop_->Tick();  // reconnects; the same stats value again is not fresh
  EXPECT_TRUE(loop_->Published()->host().libvirt_connected());
  EXPECT_TRUE(hv_.target_calls().empty()) << "no shrink before stats prove fresh after reconnect";
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 600 * kMiB);
}

TEST_F(ControlLoopTest, GuestThatGoesAwayLeavesViewAndMetrics) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA, kB});
  std::string text = metrics_.Render();
  EXPECT_NE(text.find("plimsoll_guest_balloon_actual_bytes{domain=\"b\""), std::string::npos) << text;
  hv_.RemoveDomain(kB);
  TickWithFreshStats({kA});
  EXPECT_EQ(Published(kB), nullptr);
  text = metrics_.Render();
  EXPECT_EQ(text.find("domain=\"b\""), std::string::npos) << text;
  EXPECT_NE(text.find("plimsoll_guest_balloon_actual_bytes{domain=\"a\""), std::string::npos);
}

TEST_F(ControlLoopTest, DryRunDecidesButNeverTouchesABalloon) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop(/*dry_run=*/true);
  policy_.targets[kA] = 512 * kMiB;
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  EXPECT_TRUE(hv_.target_calls().empty());
  const auto* g = Published(kA);
  EXPECT_EQ(g->last_decision().target_bytes(), 512 * kMiB);
  EXPECT_FALSE(g->last_decision().applied());
  EXPECT_EQ(g->management_state(), plimsoll::v1::MANAGEMENT_STATE_DRY_RUN);
  EXPECT_TRUE(view_->host().dry_run());
}

TEST_F(ControlLoopTest, SnapshotCarriesBudgetAndStats) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 900 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  const policy::Snapshot& s = policy_.last_snapshot;
  EXPECT_EQ(s.host.guest_budget_bytes, 2048 * kMiB);  // min(16GiB - 1GiB, 2GiB)
  ASSERT_EQ(s.guests.size(), 1u);
  EXPECT_EQ(s.guests[0].actual_bytes, 900 * kMiB);
  EXPECT_EQ(s.guests[0].disk_caches_bytes, 300 * kMiB);
  EXPECT_EQ(s.guests[0].min_bytes, 256 * kMiB);
}

TEST(GuestBudgetTest, IsTheSmallerOfHostLessReserveAndCap) {
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, std::nullopt), 12 * kMiB);
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(GuestBudget(16 * kMiB, 4 * kMiB, 20 * kMiB), 12 * kMiB);
  EXPECT_EQ(GuestBudget(2 * kMiB, 4 * kMiB, std::nullopt), 0);
}

}  // namespace
}  // namespace plimsoll::server
