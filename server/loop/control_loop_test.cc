// The control loop against the project's fakes: FakeHypervisor, FakeHostReader,
// FakeClock, and a scripted policy. Each test is one property of the tick.
#include "server/loop/control_loop.h"

#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/testing/scripted_policy.h"
#include "server/agent/agent_store.h"
#include "server/agent/testing/test_reports.h"
#include "server/host/testing/fake_host_reader.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server {
namespace {

using ::testing::ElementsAre;
using hypervisor::BalloonStats;
using hypervisor::FakeHypervisor;

constexpr int64_t kMiB = 1LL << 20;
constexpr char kA[] = "00000000-0000-0000-0000-00000000000a";
constexpr char kB[] = "00000000-0000-0000-0000-00000000000b";

using policy::testing::ScriptedPolicy;

// Waits (real time, up to 10 s) for something a balloon worker does.
bool WaitFor(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

class ControlLoopTest : public ::testing::Test {
 protected:
  // balloon_follows_target false: the test moves the balloon (a finite speed).
  explicit ControlLoopTest(bool balloon_follows_target = true)
      : hv_(FakeHypervisor::Options{.balloon_follows_target = balloon_follows_target}) {
    host::HostMemory mem;
    mem.mem_total_bytes = 16384 * kMiB;
    mem.mem_available_bytes = 12000 * kMiB;
    mem.mem_free_bytes = 8000 * kMiB;
    host_.SetMemory(mem);
  }

  // balloon_workers 0: balloon calls run inline, so one Tick() applies its moves; the busy-domain
  // tests use real workers.
  void MakeLoop(bool dry_run = false, int balloon_workers = 0) {
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
    o.balloon_workers = balloon_workers;
    o.balloon_call_deadline = absl::Seconds(10);
    o.line = line_params_;
    o.offer_hold = offer_hold_;
    o.in_guest_reclaim = in_guest_reclaim_;
    LoopDeps deps{&hv_, &host_, loop_policy_, actuator_.get(), &clock_, &metrics_};
    deps.overrides = &store_;
    deps.hub = &hub_;
    deps.agents = agents_;
    loop_ = std::make_unique<ControlLoop>(deps, o);
  }

  // Sets an override as the control core would (validated against the guest's <memory>).
  void SetOverride(const std::string& uuid, const std::string& name, plimsoll::v1::GuestOverride o) {
    plimsoll::v1::Guest g;
    g.set_uuid(uuid);
    g.set_max_bytes(hv_.GetDomain(uuid)->max_bytes);
    auto set = store_.Set({uuid, name}, o, /*replace=*/true, "test", &g);
    ASSERT_TRUE(set.ok()) << set.status();
  }

  void SetHostPolicy(plimsoll::v1::HostPolicy hp, std::vector<std::string> clear = {}) {
    plimsoll::v1::SetHostPolicyRequest r;
    *r.mutable_policy() = std::move(hp);
    for (auto& f : clear) r.add_clear_fields(f);
    ASSERT_TRUE(store_.SetHostPolicy(r, "test").ok());
  }

  // The policy's view of `uuid` in the last snapshot it was given.
  const policy::GuestView* SnapshotView(const std::string& uuid) {
    for (const auto& v : policy_.last_snapshot.guests) {
      if (v.uuid == uuid) return &v;
    }
    return nullptr;
  }

  // Stats as a guest with a working balloon driver reports them.
  void Report(const std::string& uuid, int64_t actual, int64_t last_update) {
    BalloonStats s;
    s.actual_bytes = actual;
    s.unused_bytes = 100 * kMiB;
    s.usable_bytes = actual - hard_demand_;
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

  // Guest kA (2 GiB, at 1 GiB) on a pool of two balloon workers, its stats switched on, and a
  // move to `target` whose SetTarget call blocks (up to 30 s) in a worker.
  void StartBlockedMove(int64_t target) {
    hv_.AddDomain(kA, "a", 2048 * kMiB, 1024 * kMiB);
    MakeLoop(/*dry_run=*/false, /*balloon_workers=*/2);
    TickWithFreshStats({kA});
    TickWithFreshStats({kA});
    ASSERT_TRUE(WaitFor([&] { return hv_.call_count(FakeHypervisor::Method::kEnableStats) == 1; }));
    // Counted as the call starts: its result is ready only once the pool has it back (under
    // ASan a worker was seen to take several ticks' worth of real time).
    ASSERT_TRUE(WaitFor([&] { return loop_->BalloonCallsInPool() == 0; }));
    TickWithFreshStats({kA});  // the stats call's result taken: the domain is free
    hv_.BlockSetTarget(kA, absl::Seconds(30));
    policy_.targets[kA] = target;
    TickWithFreshStats({kA});  // submitted: the call blocks
    ASSERT_TRUE(WaitFor([&] { return hv_.blocked_set_target_calls() == 1; }));
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
  const policy::Policy* loop_policy_ = &policy_;  // the policy MakeLoop gives the loop
  agent::AgentStore* agents_ = nullptr;            // the agent store MakeLoop gives the loop
  Metrics metrics_;
  OverrideStore store_{&clock_};
  WatchHub hub_{&clock_};
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<ControlLoop> loop_;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view_;
  int64_t guest_clock_ = 1000;
  // What Report's guests hold that reclaim cannot free (actual - MemAvailable).
  int64_t hard_demand_ = 64 * kMiB;
  // The Plimsoll line's parameters MakeLoop gives the loop.
  LineParams line_params_{256 * kMiB, 256 * kMiB};
  bool in_guest_reclaim_ = false;  // LoopOptions::in_guest_reclaim for MakeLoop
  absl::Duration offer_hold_ = absl::Seconds(4);
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
  EXPECT_NE(Published(kA)->last_decision().reason().find("stale stats (not seen to change in the 4.0s since first "
                                                        "read: fresh once they do)"),
            std::string::npos)
      << Published(kA)->last_decision().reason();

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

// reclaim-1: guest a (kA) held at 600 MiB, 424 MiB taken.
plimsoll::v1::ReclaimPlan HoldAAt600() {
  plimsoll::v1::ReclaimPlan plan;
  plan.set_id("reclaim-1");
  auto* item = plan.add_items();
  item->set_guest_name("a");
  item->set_guest_uuid(kA);
  item->set_new_target_bytes(600 * kMiB);
  item->set_reclaim_bytes(424 * kMiB);
  return plan;
}

class SlowBalloonLoopTest : public ControlLoopTest {
 protected:
  SlowBalloonLoopTest() : ControlLoopTest(/*balloon_follows_target=*/false) {}

  // One tick of a balloon that moves at most 50 MiB a tick towards its target.
  void TickMovingBalloon(bool fresh_stats) {
    const int64_t actual = hv_.GetDomain(kA)->current_bytes;
    const int64_t target = hv_.LastTarget(kA).value_or(actual);
    const int64_t step = std::clamp(target - actual, -50 * kMiB, 50 * kMiB);
    hv_.SetActualBytes(kA, actual + step);
    if (fresh_stats) {
      TickWithFreshStats({kA});
    } else {
      clock_.Advance(absl::Seconds(2));
      loop_->Tick();
    }
  }

  // Guest a at 1024 MiB, its policy wanting 1000, and a hold at 600 MiB for 60 s: the balloon
  // then travels down 50 MiB a tick.
  void HoldAOnItsWayDown() {
    hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
    MakeLoop();
    policy_.targets[kA] = 1000 * kMiB;
    TickMovingBalloon(true);
    TickMovingBalloon(true);
    loop_->AddReclaimHold(HoldAAt600(), clock_.Now() + absl::Seconds(60));
  }
};

// A balloon still inflating when its guest's stats go stale is stopped where it is: holding
// the target alone would let it go on shrinking the guest on data that went bad.
TEST_F(SlowBalloonLoopTest, StaleStatsStopABalloonInFlight) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 400 * kMiB;
  TickMovingBalloon(true);  // adopted: nothing moves on the first sight
  TickMovingBalloon(true);
  ASSERT_EQ(hv_.LastTarget(kA), 400 * kMiB);
  for (int i = 0; i < 3; ++i) TickMovingBalloon(true);
  ASSERT_EQ(hv_.GetDomain(kA)->current_bytes, 874 * kMiB);  // 3 steps of 50 MiB so far
  // The guest stops reporting; the balloon keeps inflating until the stats are stale (10 s).
  int64_t stopped_at = 0;
  for (int i = 0; i < 8 && stopped_at == 0; ++i) {
    TickMovingBalloon(false);
    if (hv_.LastTarget(kA) != 400 * kMiB) stopped_at = hv_.GetDomain(kA)->current_bytes;
  }
  ASSERT_GT(stopped_at, 400 * kMiB) << "the balloon was never stopped";
  EXPECT_EQ(hv_.LastTarget(kA), stopped_at);
  EXPECT_FALSE(Published(kA)->stats().stats_fresh());
  EXPECT_NE(Published(kA)->last_decision().reason().find("inflation stopped at"), std::string::npos)
      << Published(kA)->last_decision().reason();
  EXPECT_NE(metrics_.Render().find("plimsoll_safety_holds_total{rule=\"inflation_stopped\"} 1"),
            std::string::npos);
  // It stays stopped: no further shrink while the stats are stale.
  for (int i = 0; i < 3; ++i) TickMovingBalloon(false);
  EXPECT_EQ(hv_.GetDomain(kA)->current_bytes, stopped_at);
  EXPECT_EQ(hv_.LastTarget(kA), stopped_at);
}

// A balloon still travelling down to a held target is above it, but falling: not a
// self-deflation, and the hold stays.
TEST_F(SlowBalloonLoopTest, ABalloonOnItsWayDownToAHoldIsNotASelfDeflation) {
  HoldAOnItsWayDown();
  for (int i = 0; i < 10; ++i) {
    TickMovingBalloon(true);
    ASSERT_TRUE(Published(kA)->has_reclaim_hold()) << i << ": " << Published(kA)->last_decision().reason();
  }
  EXPECT_EQ(hv_.GetDomain(kA)->current_bytes, 600 * kMiB);
  EXPECT_NE(metrics_.Render().find("plimsoll_reclaim_holds_released_total 0"), std::string::npos);
}

// While the balloon travels down to a held target, actual and MemAvailable are read at different
// moments, so a hard demand above the hold keeps it until the balloon has landed; landed, the
// same reading ends it.
TEST_F(SlowBalloonLoopTest, HardDemandEndsAHoldOnlyOnceTheBalloonLanded) {
  HoldAOnItsWayDown();
  hard_demand_ = 520 * kMiB;  // + 128 MiB of headroom: 648 MiB, above the held 600 MiB
  int64_t released_at = 0;
  for (int i = 0; i < 12 && released_at == 0; ++i) {
    TickMovingBalloon(true);
    if (!Published(kA)->has_reclaim_hold()) released_at = hv_.GetDomain(kA)->current_bytes;
  }
  EXPECT_EQ(released_at, 600 * kMiB) << "released on the way down, or never";
  EXPECT_NE(Published(kA)->last_decision().reason().find("released: floor_above_hold floor=648MiB held=600MiB"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
}

// A balloon-change event between two ticks reaches the tracker. Here the
// balloon reached the held 600 MiB between ticks and the guest deflated it to 800 MiB before the
// next one: the ticks alone saw 974 then 800 (falling: no self-deflation); with the event the
// tracker knows it was at 600, so the rise ends the hold.
TEST_F(SlowBalloonLoopTest, ABalloonEventBetweenTicksRevealsASelfDeflationTheTicksMiss) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 1000 * kMiB;
  TickMovingBalloon(true);
  loop_->AddReclaimHold(HoldAAt600(), clock_.Now() + absl::Seconds(60));
  TickMovingBalloon(true);
  ASSERT_EQ(hv_.LastTarget(kA), 600 * kMiB);
  TickMovingBalloon(true);
  ASSERT_EQ(Published(kA)->actual_bytes(), 974 * kMiB);
  hv_.SetActualBytes(kA, 600 * kMiB);
  loop_->NoteBalloonChange(kA, 600 * kMiB);
  EXPECT_EQ(loop_->FoldBalloonChanges(), 1);
  EXPECT_EQ(Published(kA)->actual_bytes(), 600 * kMiB) << "the view follows the event";
  EXPECT_NE(metrics_.Render().find("plimsoll_balloon_change_events_total 1"), std::string::npos);
  hv_.SetActualBytes(kA, 800 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_FALSE(Published(kA)->has_reclaim_hold()) << Published(kA)->last_decision().reason();
  EXPECT_NE(Published(kA)->last_decision().reason().find("released: self_deflated actual=800MiB held=600MiB"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
}

// Run() folds balloon events into the published view and /metrics between ticks, at most once
// per min_wake_interval, without a tick.
TEST_F(ControlLoopTest, RunPublishesBalloonEventsBetweenTicks) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  actuator_ = std::make_unique<HypervisorActuator>(&hv_);
  LoopOptions o;
  o.tick = absl::Hours(1);
  o.min_wake_interval = absl::Milliseconds(100);
  ControlLoop loop(LoopDeps{&hv_, &host_, &policy_, actuator_.get(), &clock_, &metrics_}, o);
  std::thread runner([&] { loop.Run(); });
  auto actual_of = [&](const char* uuid) -> int64_t {
    for (const auto& g : loop.Published()->guests()) {
      if (g.uuid() == uuid) return g.actual_bytes();
    }
    return -1;
  };
  ASSERT_TRUE(WaitFor([&] { return actual_of(kA) == 1024 * kMiB; }));
  loop.NoteBalloonChange(kA, 900 * kMiB);
  loop.NoteBalloonChange(kA, 700 * kMiB);  // the last one wins
  loop.NoteBalloonChange("00000000-0000-0000-0000-0000000000ff", 1 * kMiB);  // not tracked: ignored
  const bool folded = WaitFor([&] { return actual_of(kA) == 700 * kMiB; });
  const std::string metrics = metrics_.Render();
  loop.Stop();
  runner.join();
  ASSERT_TRUE(folded) << "actual stayed at " << actual_of(kA);
  EXPECT_EQ(loop.ticks(), 1) << "folded without a tick";
  EXPECT_EQ(actual_of(kB), 1024 * kMiB);
  EXPECT_EQ(loop.Published()->host().guests_actual_bytes(), (700 + 1024) * kMiB);
  EXPECT_NE(metrics.find(absl::StrCat("plimsoll_guest_balloon_actual_bytes{domain=\"a\",uuid=\"", kA, "\"} ",
                                      700 * kMiB)),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(absl::StrCat("plimsoll_host_guests_actual_bytes ", (700 + 1024) * kMiB)), std::string::npos);
  EXPECT_NE(metrics.find("plimsoll_balloon_change_events_total 3"), std::string::npos);
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

// Growing a guest never needs stats, only shrinking does: a guest whose stats are missing (no
// driver stats, or a domain too busy to ask) can still be given memory back.
TEST_F(ControlLoopTest, AGuestWithoutStatsCanBeGrownNeverShrunk) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 600 * kMiB);
  MakeLoop();
  policy_.targets[kA] = 800 * kMiB;
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  EXPECT_EQ(hv_.LastTarget(kA), 800 * kMiB);
  EXPECT_EQ(Published(kA)->last_decision().direction(), plimsoll::v1::DIRECTION_DEFLATE);
  policy_.targets[kA] = 700 * kMiB;
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
  }
  EXPECT_EQ(hv_.target_calls().size(), 1u) << "no shrink without stats";
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON);
  EXPECT_NE(Published(kA)->last_decision().reason().find("no balloon stats"), std::string::npos);
}

// The NOWAIT fallback of a busy domain: the record carries the size only. The guest keeps its
// last full stats (fresh while their last_update is recent) instead of looking stat-less, so it
// can be shrunk on them while they are fresh and is held once they age out.
TEST_F(ControlLoopTest, APartialStatsRecordKeepsTheGuestManaged) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  BalloonStats partial;
  partial.actual_bytes = 1024 * kMiB;
  hv_.SetStats(kA, partial);
  policy_.targets[kA] = 900 * kMiB;
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  EXPECT_TRUE(Published(kA)->stats().has_usable());
  EXPECT_EQ(hv_.LastTarget(kA), 900 * kMiB) << "stats 2 s old by their last_update: fresh";
  policy_.targets[kA] = 800 * kMiB;
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
  }
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_STALE_STATS);
  EXPECT_FALSE(Published(kA)->stats().stats_fresh());
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

TEST_F(ControlLoopTest, PublishesTheLineEachTickSlowToOfferAndStaleOnBadData) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 700 * kMiB);
  MakeLoop();
  const plimsoll::v1::HostLine before = loop_->Published()->host_line();
  EXPECT_TRUE(before.stale());
  EXPECT_EQ(before.stale_reason(), "no tick yet");
  EXPECT_EQ(before.offered_bytes(), 0);
  auto subscription = hub_.Subscribe({});

  TickWithFreshStats({kA});  // the first stats value proves nothing: a counts at its ceiling
  plimsoll::v1::HostLine line = loop_->Published()->host_line();
  EXPECT_FALSE(line.stale()) << line.stale_reason();
  EXPECT_EQ(line.capacity_bytes(), 2048 * kMiB);
  EXPECT_EQ(line.committed_bytes(), (1024 + 256) * kMiB);
  EXPECT_EQ(line.headroom_bytes(), (2048 - 1280 - 256) * kMiB);
  EXPECT_EQ(line.guests(), 1);
  EXPECT_EQ(line.guests_at_ceiling(), 1);
  EXPECT_EQ(line.offered_bytes(), 0) << "nothing offered before the headroom held offer_hold";
  EXPECT_EQ(line.tick(), 1);

  TickWithFreshStats({kA});  // fresh: the scripted policy measures nothing, so its actual size
  line = loop_->Published()->host_line();
  EXPECT_EQ(line.guests_at_ceiling(), 0);
  EXPECT_EQ(line.committed_bytes(), (700 + 256) * kMiB);
  EXPECT_EQ(line.headroom_bytes(), (2048 - 956 - 256) * kMiB);
  EXPECT_EQ(line.offered_bytes(), 0);
  TickWithFreshStats({kA});  // 4 s after the first tick: its headroom held, the later one not yet
  EXPECT_EQ(loop_->Published()->host_line().offered_bytes(), 512 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host_line().offered_bytes(), 836 * kMiB);
  EXPECT_NE(metrics_.Render().find("plimsoll_host_line_offered_bytes " + std::to_string(836 * kMiB)),
            std::string::npos)
      << metrics_.Render();

  host_.SetError(absl::UnavailableError("meminfo gone"));
  TickWithFreshStats({kA});
  line = loop_->Published()->host_line();
  EXPECT_TRUE(line.stale());
  EXPECT_THAT(line.stale_reason(), ::testing::HasSubstr("host memory not read on the last tick"));
  EXPECT_EQ(line.offered_bytes(), 0) << "a host never offers what it cannot back";
  EXPECT_NE(metrics_.Render().find("plimsoll_host_line_stale 1"), std::string::npos);
  host_.SetError(absl::OkStatus());
  TickWithFreshStats({kA});
  EXPECT_FALSE(loop_->Published()->host_line().stale());
  EXPECT_EQ(loop_->Published()->host_line().offered_bytes(), 0) << "good data waits offer_hold again";

  hv_.SimulateDisconnect();
  hv_.FailNext(FakeHypervisor::Method::kConnect, absl::UnavailableError("libvirtd down"));
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();
  line = loop_->Published()->host_line();
  EXPECT_TRUE(line.stale());
  EXPECT_EQ(line.stale_reason(), "libvirt is disconnected");
  EXPECT_EQ(line.committed_bytes(), (700 + 256) * kMiB) << "the last figures stay for the operator";

  // Watch: one host_line event per change of offered, over_line or stale, none for the rest.
  std::vector<plimsoll::v1::HostLine> events;
  plimsoll::v1::WatchEvent e;
  while (subscription->Next(&e, absl::ZeroDuration()) == WatchSubscription::Result::kEvent) {
    if (e.has_host_line()) events.push_back(e.host_line());
  }
  ASSERT_EQ(events.size(), 6u);  // fresh, 512 offered, 836 offered, stale, good, disconnected
  EXPECT_FALSE(events[0].stale());
  EXPECT_EQ(events[1].offered_bytes(), 512 * kMiB);
  EXPECT_EQ(events[2].offered_bytes(), 836 * kMiB);
  EXPECT_TRUE(events[3].stale());
  EXPECT_FALSE(events[4].stale());
  EXPECT_EQ(events[5].stale_reason(), "libvirt is disconnected");
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
  loop_->NoteStopped(kB);  // the daemon does this on the lifecycle event
  TickWithFreshStats({kA});
  EXPECT_EQ(Published(kB), nullptr);
  text = metrics_.Render();
  EXPECT_EQ(text.find("domain=\"b\""), std::string::npos) << text;
  EXPECT_NE(text.find("plimsoll_guest_balloon_actual_bytes{domain=\"a\""), std::string::npos);
}

// A guest missing from one listing without a stop event (a transient
// per-domain error) keeps what the daemon knows and is not moved; after three it is forgotten.
TEST_F(ControlLoopTest, AGuestMissingFromAListingIsKeptHeldThenForgotten) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA, kB});
  TickWithFreshStats({kA, kB});  // b's stats fresh: only its absence holds it below
  hv_.RemoveDomain(kB);
  policy_.targets[kB] = 600 * kMiB;
  TickWithFreshStats({kA});
  ASSERT_NE(Published(kB), nullptr);
  EXPECT_NE(Published(kB)->last_decision().reason().find("absent from the last 1 listing(s)"), std::string::npos)
      << Published(kB)->last_decision().reason();
  EXPECT_EQ(hv_.LastTarget(kB), std::nullopt);
  TickWithFreshStats({kA});
  ASSERT_NE(Published(kB), nullptr);
  TickWithFreshStats({kA});
  EXPECT_EQ(Published(kB), nullptr);
  EXPECT_EQ(metrics_.Render().find("domain=\"b\""), std::string::npos);
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

// The disks are read every block_stats_interval (5 s here, ticks 2 s apart): in between the
// policy sees the last reads, with their age, not a count stamped with the tick's time.
TEST_F(ControlLoopTest, DiskReadsAreReadEveryBlockStatsIntervalAndKeptWithTheirAge) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 900 * kMiB);
  MakeLoop();
  std::vector<std::optional<uint64_t>> bytes;
  std::vector<std::optional<double>> ages;
  for (int i = 0; i < 7; ++i) {
    ++guest_clock_;
    BalloonStats st;
    st.actual_bytes = 900 * kMiB;
    st.unused_bytes = 100 * kMiB;
    st.usable_bytes = 400 * kMiB;
    st.last_update = guest_clock_;
    st.disk_read_bytes = 1000 * static_cast<uint64_t>(i + 1);
    hv_.SetStats(kA, st);
    clock_.Advance(absl::Seconds(2));
    loop_->Tick();
    const policy::GuestView* v = SnapshotView(kA);
    ASSERT_NE(v, nullptr);
    bytes.push_back(v->disk_read_bytes);
    ages.push_back(v->disk_read_age_seconds);
  }
  // Ticks at 0, 2, ..., 12 s: the disks read at 0, 6 and 12 (a read is due 5 s after the last,
  // less a tenth of slack).
  EXPECT_EQ(hv_.survey_block_stats(), (std::vector<bool>{true, false, false, true, false, false, true}));
  EXPECT_EQ(bytes, (std::vector<std::optional<uint64_t>>{1000, 1000, 1000, 4000, 4000, 4000, 7000}));
  EXPECT_EQ(ages, (std::vector<std::optional<double>>{0, 2, 4, 0, 2, 4, 0}));
}

// What each guest costs the host travels from the hypervisor to the policy's view, the API and
// /metrics: QEMU's RSS and free page reporting where known, nothing where not (never an "off"
// or a 0), and the host's sum of the RSS.
TEST_F(ControlLoopTest, WhatGuestsCostTheHostReachesThePolicyTheViewAndTheMetrics) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  hv_.SetFreePageReporting(kA, true);
  MakeLoop();
  BalloonStats st;
  st.actual_bytes = 1024 * kMiB;
  st.usable_bytes = 400 * kMiB;
  st.last_update = 1000;
  st.rss_bytes = 621 * kMiB;
  hv_.SetStats(kA, st);
  st.rss_bytes.reset();
  hv_.SetStats(kB, st);
  loop_->Tick();

  const policy::GuestView* a = SnapshotView(kA);
  const policy::GuestView* b = SnapshotView(kB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->host_rss_bytes, 621 * kMiB);
  EXPECT_EQ(a->free_page_reporting, std::optional<bool>(true));
  EXPECT_FALSE(b->host_rss_bytes.has_value());
  EXPECT_FALSE(b->free_page_reporting.has_value());

  ASSERT_NE(Published(kA), nullptr);
  EXPECT_TRUE(Published(kA)->has_free_page_reporting());
  EXPECT_TRUE(Published(kA)->free_page_reporting());
  EXPECT_EQ(Published(kA)->stats().rss().bytes(), 621 * kMiB);
  EXPECT_FALSE(Published(kB)->has_free_page_reporting());
  EXPECT_EQ(view_->host().guests_rss_bytes(), 621 * kMiB);

  std::string text = metrics_.Render();
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_host_rss_bytes{domain=\"a\",uuid=\"", kA, "\"} ", 621 * kMiB, "\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_free_page_reporting{domain=\"a\",uuid=\"", kA, "\"} 1\n")),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("plimsoll_guest_free_page_reporting{domain=\"b\""), std::string::npos) << text;
  EXPECT_EQ(text.find("plimsoll_guest_host_rss_bytes{domain=\"b\""), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("plimsoll_host_guests_rss_bytes ", 621 * kMiB, "\n")), std::string::npos) << text;

  // b turns out to have reporting off (its XML read at last): a 0, not an absence.
  hv_.SetFreePageReporting(kB, false);
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();
  EXPECT_EQ(SnapshotView(kB)->free_page_reporting, std::optional<bool>(false));
  EXPECT_TRUE(Published(kB)->has_free_page_reporting());
  EXPECT_FALSE(Published(kB)->free_page_reporting());
  text = metrics_.Render();
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_free_page_reporting{domain=\"b\",uuid=\"", kB, "\"} 0\n")),
            std::string::npos)
      << text;
}

// An agent's reclaim reaches the API and /metrics: its state, the bounds sent, what it claims,
// and the check of its claims against QEMU's RSS (reclaim_claim_check.h). A guest whose agent
// has no reclaimer shows none of it.
TEST_F(ControlLoopTest, AnAgentsClaimedReclaimIsCheckedAgainstQemuRssAndShown) {
  agent::ReportValidator validator(agent::testing::TestHostKey());
  agent::AgentStore agents(&validator, &clock_);
  agents_ = &agents;
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  double guest_s = 100;
  uint64_t sequence = 0;
  // One tick 2 s on: the guest's stats with QEMU's RSS, and an agent report claiming `claimed`
  // (nullopt: a report without a reclaim part; -1: no report).
  auto tick = [&](std::optional<int64_t> claimed_mib, int64_t rss_mib) {
    BalloonStats st;
    st.actual_bytes = 1024 * kMiB;
    st.usable_bytes = 600 * kMiB;
    st.last_update = ++guest_clock_;
    st.rss_bytes = rss_mib * kMiB;
    hv_.SetStats(kA, st);
    clock_.Advance(absl::Seconds(2));
    guest_s += 2;
    if (claimed_mib != std::optional<int64_t>(-1)) {
      v1::AgentReport r = agent::testing::MakeReport(kA, agent::testing::kBootA, guest_s, ++sequence);
      if (claimed_mib.has_value()) {
        v1::ReclaimReport* rc = r.mutable_reclaim();
        rc->set_state(v1::RECLAIM_STATE_ACTIVE);
        rc->set_reason("step");
        rc->set_counters_since_boottime_ns(int64_t{105} * 1000000000);  // after the report without
        rc->set_requested_bytes(static_cast<uint64_t>(*claimed_mib * kMiB));
        rc->set_achieved_bytes(static_cast<uint64_t>(*claimed_mib * kMiB));
        rc->set_steps(1);
        rc->set_keep_bytes(256 * kMiB);
      }
      const agent::IngestResult in = agents.Ingest(agent::testing::SignAsSelf(r));
      EXPECT_TRUE(in.ok()) << in.detail;
    }
    loop_->Tick();
  };
  auto reclaim = [&] { return Published(kA)->agent().reclaim(); };
  const std::string series = absl::StrCat("{domain=\"a\",uuid=\"", kA, "\"} ");

  tick(-1, 1000);  // the store learns the guest
  tick(std::nullopt, 1000);
  ASSERT_TRUE(Published(kA)->has_agent());
  EXPECT_FALSE(Published(kA)->agent().has_reclaim());
  EXPECT_EQ(metrics_.Render().find("plimsoll_guest_reclaim"), std::string::npos);

  // A claim of 1 GiB the RSS never shows: judged 20 s after the last claim.
  tick(0, 1000);
  tick(0, 1000);
  tick(1024, 1000);
  EXPECT_EQ(reclaim().state(), "active");
  EXPECT_EQ(reclaim().reason(), "step");
  EXPECT_EQ(reclaim().agent_keep_bytes(), 256 * kMiB);
  EXPECT_FALSE(reclaim().has_bounds_enabled());
  EXPECT_EQ(reclaim().claimed_bytes(), 1024 * kMiB);
  EXPECT_EQ(reclaim().pending_claim_bytes(), 1024 * kMiB);
  EXPECT_EQ(reclaim().last_verdict(), "none");
  EXPECT_EQ(SnapshotView(kA)->agent_reclaims, std::optional<bool>(true));
  for (int i = 0; i < 10; ++i) tick(1024, 1000);
  EXPECT_EQ(reclaim().pending_claim_bytes(), 0u);
  EXPECT_EQ(reclaim().unconfirmed_bytes(), 1024 * kMiB);
  EXPECT_EQ(reclaim().confirmed_bytes(), 0u);
  EXPECT_EQ(reclaim().unconfirmed_claims(), 1u);
  EXPECT_EQ(reclaim().last_verdict(), "unconfirmed");
  // Its bounds are paused for 10 minutes from the verdict (a few ticks ago).
  EXPECT_GT(reclaim().bounds_pause_left_seconds(), 500);
  EXPECT_LE(reclaim().bounds_pause_left_seconds(), 600);
  // Paused, its agent earns no pool privileges for the policy (reclaim_pool.h).
  EXPECT_EQ(SnapshotView(kA)->agent_reclaims, std::optional<bool>(false));
  std::string text = metrics_.Render();
  EXPECT_NE(text.find("plimsoll_guest_reclaim_bounds_pause_seconds" + series), std::string::npos) << text;
  EXPECT_NE(text.find("plimsoll_guest_reclaim_unconfirmed_claims_total" + series + "1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_reclaim_claimed_bytes_total", series, 1024 * kMiB, "\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_reclaim_state{domain=\"a\",state=\"active\",uuid=\"", kA,
                                   "\"} 1\n")),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("plimsoll_guest_reclaim_keep_bytes"), std::string::npos) << text;

  // 300 MiB more, and the RSS falls by as much: confirmed.
  v1::ReclaimBounds sent;
  sent.set_enabled(true);
  sent.set_keep_bytes(256 * kMiB);
  agents.NoteBoundsSent(kA, sent);
  tick(1324, 800);
  tick(1324, 700);
  for (int i = 0; i < 10; ++i) tick(1324, 700);
  EXPECT_EQ(reclaim().confirmed_bytes(), 300 * kMiB);
  EXPECT_EQ(reclaim().unconfirmed_bytes(), 1024 * kMiB);
  EXPECT_EQ(reclaim().unconfirmed_claims(), 1u);
  EXPECT_EQ(reclaim().last_verdict(), "confirmed");
  EXPECT_TRUE(reclaim().bounds_enabled());
  EXPECT_EQ(reclaim().bounds_keep_bytes(), 256 * kMiB);
  text = metrics_.Render();
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_reclaim_keep_bytes", series, 256 * kMiB, "\n")), std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("plimsoll_guest_reclaim_confirmed_bytes_total", series, 300 * kMiB, "\n")),
            std::string::npos)
      << text;
  loop_.reset();  // before the store it borrows
}

// ---- The operator's overrides, host policy and reclaim holds (control_loop.h) ----

TEST_F(ControlLoopTest, OverrideFloorCeilingAndSharesReplaceTheConfiguredOnes) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::GuestOverride o;
  o.set_min_bytes(128 * kMiB);  // below the configured floor (256 MiB): replaces it downwards
  o.set_max_bytes(900 * kMiB);
  o.set_shares(400);
  SetOverride(kA, "a", o);
  policy_.targets[kA] = 10 * kMiB;
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  // The policy may go to the override's floor, but the envelope holds it at the guest's own floor
  // (here the configured one: the scripted policy measures no hard demand); force would not.
  EXPECT_EQ(hv_.LastTarget(kA), 256 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("clamped to the configured floor 256MiB"), std::string::npos)
      << Published(kA)->last_decision().reason();
  const policy::GuestView* v = SnapshotView(kA);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->min_bytes, 128 * kMiB);
  EXPECT_EQ(v->max_bytes, 900 * kMiB);
  EXPECT_EQ(v->shares, 4000) << "API shares x 10: the API's default 100 is the policies' 1000";
  const auto* g = Published(kA);
  EXPECT_EQ(g->min_bytes(), 128 * kMiB);
  EXPECT_EQ(g->max_bytes(), 1024 * kMiB) << "max_bytes stays <memory>";
  EXPECT_EQ(g->override().shares(), 400u);
  EXPECT_NE(g->last_decision().reason().find("(override)"), std::string::npos) << g->last_decision().reason();
  EXPECT_EQ(view_->host().guest_overrides(), 1);

  policy_.targets[kA] = 9999 * kMiB;  // the override's ceiling, not <memory>
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 900 * kMiB);
}

TEST_F(ControlLoopTest, PinHoldsTheTargetWhateverThePolicySays) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 2048 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::GuestOverride pin_a;
  pin_a.set_pin_bytes(700 * kMiB);
  SetOverride(kA, "a", pin_a);
  plimsoll::v1::GuestOverride pin_b;
  pin_b.set_pin_bytes(1536 * kMiB);
  SetOverride(kB, "b", pin_b);
  policy_.targets[kA] = 300 * kMiB;
  policy_.targets[kB] = 300 * kMiB;
  // b's stats never advance: growing it to its pin is allowed, a shrink would not be.
  Report(kB, 1024 * kMiB, 1);
  Report(kA, 1024 * kMiB, guest_clock_);
  clock_.Advance(absl::Seconds(2));
  loop_->Tick();  // a has not proven fresh stats yet: a shrinking pin waits
  EXPECT_EQ(hv_.LastTarget(kB), 1536 * kMiB);
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("stale stats"), std::string::npos);
  TickWithFreshStats({kA});  // a's stats advance: fresh, towards the pin by one step (256 MiB)
  EXPECT_EQ(hv_.LastTarget(kA), 768 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 700 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.target_calls().size(), 3u) << "b once, a in two steps, none after the pin is reached";
  const auto* a = Published(kA);
  EXPECT_EQ(a->management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  EXPECT_EQ(a->target_bytes(), 700 * kMiB);
  EXPECT_NE(a->last_decision().reason().find("pinned at 700MiB"), std::string::npos) << a->last_decision().reason();
  EXPECT_EQ(Published(kB)->management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  // The policy sees a pinned guest's floor at its pin, so that its own floor (hard demand +
  // headroom, which the envelope holds the pin to) is still measured above it.
  EXPECT_EQ(SnapshotView(kA)->min_bytes, 700 * kMiB);
  EXPECT_EQ(SnapshotView(kA)->max_bytes, 1024 * kMiB);
}

TEST_F(ControlLoopTest, ExcludedGuestIsReportedButNeverMoved) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::GuestOverride o;
  o.set_exclude(true);
  SetOverride(kA, "a", o);
  policy_.targets[kA] = 500 * kMiB;
  for (int i = 0; i < 3; ++i) TickWithFreshStats({kA});
  EXPECT_TRUE(hv_.target_calls().empty());
  const auto* g = Published(kA);
  EXPECT_EQ(g->management_state(), plimsoll::v1::MANAGEMENT_STATE_EXCLUDED);
  EXPECT_EQ(g->last_decision().direction(), plimsoll::v1::DIRECTION_HOLD);
  EXPECT_NE(g->last_decision().reason().find("excluded"), std::string::npos);
  EXPECT_TRUE(g->stats().has_usable()) << "still reported";
  EXPECT_TRUE(g->override().exclude());

  ASSERT_TRUE(store_.Clear({kA, "a"}, {}, "test").ok());
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 500 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  EXPECT_FALSE(Published(kA)->has_override());
}

TEST_F(ControlLoopTest, PausedManagementDecidesAndReportsButMovesNoBalloon) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::HostPolicy hp;
  hp.set_paused(true);
  SetHostPolicy(hp);
  policy_.targets[kA] = 500 * kMiB;
  for (int i = 0; i < 3; ++i) TickWithFreshStats({kA});
  EXPECT_TRUE(hv_.target_calls().empty());
  const auto* g = Published(kA);
  EXPECT_EQ(g->management_state(), plimsoll::v1::MANAGEMENT_STATE_PAUSED);
  EXPECT_EQ(g->last_decision().target_bytes(), 500 * kMiB) << "the decision is still taken and shown";
  EXPECT_FALSE(g->last_decision().applied());
  EXPECT_NE(g->last_decision().reason().find("paused"), std::string::npos);
  EXPECT_EQ(g->target_bytes(), 1024 * kMiB);
  EXPECT_TRUE(view_->host().paused());
  EXPECT_TRUE(view_->host().host_policy().paused());

  hp.set_paused(false);
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 500 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  EXPECT_FALSE(view_->host().paused());
}

// agent.reclaim_bounds reaches the policy as HostView::in_guest_reclaim (reclaim_pool.h).
TEST_F(ControlLoopTest, TheSnapshotSaysWhetherAgentsReclaim) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  EXPECT_FALSE(policy_.last_snapshot.host.in_guest_reclaim);
  in_guest_reclaim_ = true;
  MakeLoop();
  TickWithFreshStats({kA});
  EXPECT_TRUE(policy_.last_snapshot.host.in_guest_reclaim);
}

// The policy's host line and its pool reach the view and the metrics; the pool goes with its
// members.
TEST_F(ControlLoopTest, ThePolicysHostLineAndPoolArePublished) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  policy_.summary = "scripted: limit=2048MiB";
  policy_.pool_members = 1;
  policy_.pool_lent_bytes = 300 * kMiB;
  policy_.pool_reserve_bytes = 128 * kMiB;
  policy_.pool_covers = true;
  MakeLoop();
  TickWithFreshStats({kA});
  ASSERT_NE(Published(kA), nullptr);
  EXPECT_EQ(view_->host().policy_summary(), "scripted: limit=2048MiB");
  ASSERT_TRUE(view_->host().has_reclaim_pool());
  EXPECT_EQ(view_->host().reclaim_pool().members(), 1);
  EXPECT_EQ(view_->host().reclaim_pool().lent_bytes(), 300 * kMiB);
  EXPECT_EQ(view_->host().reclaim_pool().reserve_bytes(), 128 * kMiB);
  EXPECT_TRUE(view_->host().reclaim_pool().covers());
  EXPECT_NE(metrics_.Render().find("plimsoll_reclaim_pool_covers 1"), std::string::npos) << metrics_.Render();
  policy_.pool_members = 0;
  policy_.summary = "scripted: empty";
  TickWithFreshStats({kA});
  ASSERT_NE(Published(kA), nullptr);
  EXPECT_EQ(view_->host().policy_summary(), "scripted: empty");
  EXPECT_FALSE(view_->host().has_reclaim_pool());
  EXPECT_NE(metrics_.Render().find("plimsoll_reclaim_pool_members 0"), std::string::npos) << metrics_.Render();
}

// With no guest reporting its RSS there is no sum: absent, never a 0 that reads as "free".
TEST_F(ControlLoopTest, NoGuestRssIsNoSum) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  ASSERT_NE(Published(kA), nullptr);
  EXPECT_FALSE(view_->host().has_guests_rss_bytes());
  EXPECT_EQ(metrics_.Render().find("plimsoll_host_guests_rss_bytes "), std::string::npos);
}

TEST_F(ControlLoopTest, HostPolicyOverlaysReserveAndBudgetAndSwitchesThePolicy) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::HostPolicy hp;
  hp.set_host_reserve_bytes(15 * 1024 * kMiB);  // 16 GiB - 15 GiB = 1 GiB < the 2 GiB cap
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(policy_.last_snapshot.host.host_reserve_bytes, 15 * 1024 * kMiB);
  EXPECT_EQ(policy_.last_snapshot.host.guest_budget_bytes, 1024 * kMiB);
  EXPECT_EQ(loop_->Published()->host().guest_budget_bytes(), 1024 * kMiB);
  EXPECT_EQ(loop_->Published()->host().host_reserve_bytes(), 15 * 1024 * kMiB);

  SetHostPolicy({}, {"host_reserve_bytes"});
  hp.Clear();
  hp.set_guest_memory_budget_bytes(512 * kMiB);
  hp.set_policy("static");
  SetHostPolicy(hp);
  const int64_t before = policy_.last_snapshot.tick;
  TickWithFreshStats({kA});
  EXPECT_EQ(policy_.last_snapshot.tick, before) << "the scripted policy is no longer asked";
  EXPECT_EQ(loop_->Published()->host().policy(), "static");
  EXPECT_EQ(loop_->Published()->host().guest_budget_bytes(), 512 * kMiB);
  EXPECT_EQ(Published(kA)->last_decision().policy(), "static");

  SetHostPolicy({}, {"policy", "guest_memory_budget_bytes"});
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host().policy(), "scripted");
  EXPECT_EQ(policy_.last_snapshot.host.guest_budget_bytes, 2048 * kMiB);
}

// A host policy stored by an earlier plimsolld names the pagecache policy "pagecache_law": the
// same policy runs under its current name, and the log says so once.
TEST_F(ControlLoopTest, AStoredHostPolicyWithADeprecatedPolicyNameRunsItUnderItsCurrentOne) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::HostPolicy hp;
  hp.set_policy("pagecache_law");
  SetHostPolicy(hp);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) TickWithFreshStats({kA});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(loop_->Published()->host().policy(), "pagecache");
  EXPECT_EQ(Published(kA)->last_decision().policy(), "pagecache");
  const std::string warning = "\"pagecache_law\", a deprecated name of \"pagecache\"";
  const size_t at = log.find(warning);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, at + 1), std::string::npos) << "logged once: " << log;
  EXPECT_EQ(log.find("keeping policy="), std::string::npos) << "not refused: " << log;
}

// A variant is another policy than the plain one: a host policy naming it switches to it, and
// back when it names the plain one again; each decision says which variant decided.
TEST_F(ControlLoopTest, AHostPolicyNamingAPagecacheVariantRunsThatVariant) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  plimsoll::v1::HostPolicy hp;
  hp.set_policy("pagecache");
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host().policy(), "pagecache");
  hp.set_policy("pagecache:probe_fraction=0.01");
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host().policy(), "pagecache:probe_fraction=0.01");
  EXPECT_EQ(Published(kA)->last_decision().policy(), "pagecache:probe_fraction=0.01");
  hp.set_policy("pagecache_law:probe_fraction=0.02");
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host().policy(), "pagecache:probe_fraction=0.02");
  hp.set_policy("pagecache");
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host().policy(), "pagecache");
  EXPECT_EQ(Published(kA)->last_decision().policy(), "pagecache");
}

// A held guest is logged after a move or a minute of silence; log_every_decision (a live
// config field) logs every tick's decision, holds included, for following a policy step by step.
TEST_F(ControlLoopTest, LogEveryDecisionLogsHoldsEveryTick) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  auto decision_lines = [](const std::string& log) {
    int n = 0;
    for (size_t at = log.find("decision tick="); at != std::string::npos; at = log.find("decision tick=", at + 1)) ++n;
    return n;
  };
  TickWithFreshStats({kA});  // the first decision is logged
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 4; ++i) TickWithFreshStats({kA});
  EXPECT_EQ(decision_lines(::testing::internal::GetCapturedStderr()), 0) << "holds within a minute are quiet";

  LoopReconfig r;
  r.options.tick = absl::Seconds(2);
  r.options.host_reserve_bytes = 1024 * kMiB;
  r.options.guest_memory_budget_bytes = 2048 * kMiB;
  r.options.rules.min_bytes = 256 * kMiB;
  r.options.rules.stale_after = absl::Seconds(10);
  r.options.rules.no_balloon_after = absl::Seconds(6);
  r.options.log_every_decision = true;
  loop_->Reconfigure(std::move(r));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 4; ++i) TickWithFreshStats({kA});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(decision_lines(log), 4) << log;
  EXPECT_NE(log.find("direction=hold"), std::string::npos) << log;
}

// A reload's line settings take effect from the next tick: the terms at once, a shorter hold
// on the offer at its next update.
TEST_F(ControlLoopTest, ReconfigureChangesTheLineFromTheNextTick) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 700 * kMiB);
  offer_hold_ = absl::Hours(1);
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host_line().headroom_bytes(), (2048 - 700 - 256 - 256) * kMiB);
  EXPECT_EQ(loop_->Published()->host_line().offered_bytes(), 0) << "an hour's hold";
  LoopReconfig r;
  r.options.tick = absl::Seconds(2);
  r.options.host_reserve_bytes = 1024 * kMiB;
  r.options.guest_memory_budget_bytes = 2048 * kMiB;
  r.options.rules.min_bytes = 256 * kMiB;
  r.options.rules.min_fraction = 0.25;
  r.options.rules.stale_after = absl::Seconds(10);
  r.options.rules.no_balloon_after = absl::Seconds(6);
  r.options.line = LineParams{128 * kMiB, 64 * kMiB};
  r.options.offer_hold = absl::Seconds(2);
  loop_->Reconfigure(std::move(r));
  TickWithFreshStats({kA});
  const plimsoll::v1::HostLine line = loop_->Published()->host_line();
  EXPECT_EQ(line.new_guest_room_bytes(), 128 * kMiB);
  EXPECT_EQ(line.burst_reserve_bytes(), 64 * kMiB);
  EXPECT_EQ(line.headroom_bytes(), (2048 - 700 - 64 - 128) * kMiB);
  EXPECT_EQ(line.offered_bytes(), (2048 - 700 - 256 - 256) * kMiB)
      << "the old headroom held the 2 s before; the new one not yet";
  EXPECT_NE(line.explanation().find("offer_hold=2s"), std::string::npos) << line.explanation();
  TickWithFreshStats({kA});
  EXPECT_EQ(loop_->Published()->host_line().offered_bytes(), (2048 - 700 - 64 - 128) * kMiB);
}

// A config reload (Reconfigure) replaces the configured layer from the next tick; the
// host policy set through the control API still wins over it.
TEST_F(ControlLoopTest, ReconfigureIsTheBaseLayerBeneathTheHostPolicy) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.StatsPeriod(kA), 2);
  DryRunActuator dry_run;
  auto reconfig = [&](const std::string& policy, int64_t reserve) {
    LoopReconfig r;
    r.options.tick = absl::Seconds(1);
    r.options.stats_period_seconds = 5;
    r.options.rules.min_bytes = 600 * kMiB;
    r.options.rules.min_fraction = 0.5;
    r.options.rules.stale_after = absl::Seconds(10);
    r.options.rules.no_balloon_after = absl::Seconds(6);
    r.options.host_reserve_bytes = reserve;
    r.options.guest_memory_budget_bytes = std::nullopt;
    if (!policy.empty()) r.policy = *policy::MakePolicy(policy);
    r.actuator = &dry_run;
    loop_->Reconfigure(std::move(r));
  };
  reconfig("mom", 14 * 1024 * kMiB);
  EXPECT_EQ(loop_->Published()->host().tick_seconds(), 2) << "nothing changes before the next tick";
  TickWithFreshStats({kA});
  auto host = loop_->Published()->host();
  EXPECT_EQ(host.policy(), "mom");
  EXPECT_EQ(host.tick_seconds(), 1);
  EXPECT_EQ(host.host_reserve_bytes(), 14 * 1024 * kMiB);
  EXPECT_EQ(host.guest_budget_bytes(), 2 * 1024 * kMiB);  // 16 - 14 GiB, the 2 GiB cap is gone
  EXPECT_TRUE(host.dry_run());
  EXPECT_EQ(Published(kA)->min_bytes(), 600 * kMiB);  // max(600 MiB, 0.5 * 1 GiB)
  EXPECT_EQ(hv_.StatsPeriod(kA), 5);                  // re-enabled with the new period

  plimsoll::v1::HostPolicy hp;
  hp.set_policy("static");
  hp.set_host_reserve_bytes(15 * 1024 * kMiB);
  SetHostPolicy(hp);
  TickWithFreshStats({kA});
  reconfig("proxmox", 13 * 1024 * kMiB);
  TickWithFreshStats({kA});
  host = loop_->Published()->host();
  EXPECT_EQ(host.policy(), "static") << "the host policy wins over the reloaded config";
  EXPECT_EQ(host.host_reserve_bytes(), 15 * 1024 * kMiB);

  SetHostPolicy({}, {"policy", "host_reserve_bytes"});
  TickWithFreshStats({kA});
  host = loop_->Published()->host();
  EXPECT_EQ(host.policy(), "proxmox") << "cleared: the reloaded base shows through";
  EXPECT_EQ(host.host_reserve_bytes(), 13 * 1024 * kMiB);

  // Two reloads before a tick: the second keeps the first's pending policy.
  reconfig("pagecache", 13 * 1024 * kMiB);
  reconfig("", 12 * 1024 * kMiB);
  TickWithFreshStats({kA});
  host = loop_->Published()->host();
  EXPECT_EQ(host.policy(), "pagecache");
  EXPECT_EQ(host.host_reserve_bytes(), 12 * 1024 * kMiB);
}

TEST_F(ControlLoopTest, ReclaimHoldCapsThePolicyUntilItExpires) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  WatchFilter reclaims;
  reclaims.kinds = {plimsoll::v1::WATCH_EVENT_KIND_RECLAIM};
  auto sub = hub_.Subscribe(reclaims);
  TickWithFreshStats({kA});
  plimsoll::v1::ReclaimPlan plan;
  plan.set_id("reclaim-1");
  plan.set_planned_bytes(424 * kMiB);
  auto* item = plan.add_items();
  item->set_guest_name("a");
  item->set_guest_uuid(kA);
  item->set_current_target_bytes(1024 * kMiB);
  item->set_new_target_bytes(600 * kMiB);
  item->set_reclaim_bytes(424 * kMiB);
  loop_->AddReclaimHold(plan, clock_.Now() + absl::Seconds(10));
  policy_.targets[kA] = 1000 * kMiB;  // wants more than the hold allows
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 600 * kMiB);
  const auto* g = Published(kA);
  EXPECT_EQ(g->reclaim_hold().reclaim_id(), "reclaim-1");
  EXPECT_EQ(g->reclaim_hold().max_target_bytes(), 600 * kMiB);
  EXPECT_NE(g->last_decision().reason().find("reclaim reclaim-1 holds it"), std::string::npos);
  EXPECT_EQ(view_->host().reclaim_held_bytes(), 424 * kMiB);
  plimsoll::v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_APPLIED);
  EXPECT_EQ(e.reclaim().plan().id(), "reclaim-1");

  policy_.targets[kA] = 500 * kMiB;  // below the hold: the policy may go lower
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 500 * kMiB);

  policy_.targets[kA] = 1000 * kMiB;
  for (int i = 0; i < 5; ++i) TickWithFreshStats({kA});  // 10 s later the hold ends
  EXPECT_EQ(hv_.LastTarget(kA), 1000 * kMiB);
  EXPECT_FALSE(Published(kA)->has_reclaim_hold());
  EXPECT_EQ(view_->host().reclaim_held_bytes(), 0);
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_EXPIRED);
}

class ReclaimHoldTest : public ControlLoopTest {
 protected:
  // Guest a at 1024 MiB, held at 600 MiB by reclaim-1 for 60 s while the policy wants 1000.
  void HoldA() {
    hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
    MakeLoop();
    WatchFilter reclaims;
    reclaims.kinds = {plimsoll::v1::WATCH_EVENT_KIND_RECLAIM};
    sub_ = hub_.Subscribe(reclaims);
    TickWithFreshStats({kA});
    loop_->AddReclaimHold(HoldAAt600(), clock_.Now() + absl::Seconds(60));
    policy_.targets[kA] = 1000 * kMiB;
    TickWithFreshStats({kA});
    ASSERT_EQ(hv_.LastTarget(kA), 600 * kMiB);
    plimsoll::v1::WatchEvent e;
    ASSERT_EQ(sub_->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
    ASSERT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_APPLIED);
  }

  // The RELEASED event for a, and that the hold is gone for good.
  void ExpectReleased(const std::string& why) {
    plimsoll::v1::WatchEvent e;
    ASSERT_EQ(sub_->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
    EXPECT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_RELEASED);
    EXPECT_EQ(e.reclaim().guest_uuid(), kA);
    EXPECT_EQ(e.reclaim().why().rfind(why, 0), 0u) << e.reclaim().why();
    EXPECT_EQ(hv_.LastTarget(kA), 1000 * kMiB);
    EXPECT_FALSE(Published(kA)->has_reclaim_hold());
    EXPECT_EQ(view_->host().reclaim_held_bytes(), 0);
    EXPECT_NE(Published(kA)->last_decision().reason().find("reclaim reclaim-1 released: " + why),
              std::string::npos)
        << Published(kA)->last_decision().reason();
    EXPECT_NE(metrics_.Render().find("plimsoll_reclaim_holds_released_total 1"), std::string::npos);
    // Released for the rest of the plan's time, distress or not.
    policy_.distress.clear();
    policy_.targets[kA] = 900 * kMiB;
    TickWithFreshStats({kA});
    EXPECT_EQ(hv_.LastTarget(kA), 900 * kMiB);
    EXPECT_EQ(sub_->Next(&e, absl::Milliseconds(50)), WatchSubscription::Result::kTimeout);
  }

  std::unique_ptr<WatchSubscription> sub_;
};

// A hold must not override pressure.
TEST_F(ReclaimHoldTest, PressureEndsTheHoldAtOnce) {
  HoldA();
  policy_.distress[kA] = "pressure x=2.00";
  TickWithFreshStats({kA});
  ExpectReleased("pressure x=2.00");
}

// Whatever the policy (this one says nothing): the balloon rising above the held target by
// itself is the guest deflating it on OOM.
TEST_F(ReclaimHoldTest, ASelfDeflationEndsTheHoldWhateverThePolicy) {
  HoldA();
  TickWithFreshStats({kA});  // landed at the held 600 MiB
  hv_.SetActualBytes(kA, 800 * kMiB);
  TickWithFreshStats({kA});
  ExpectReleased("self_deflated actual=800MiB held=600MiB");
}

// Whatever the policy (this one measures no floor) and without an agent: hard demand as libvirt
// shows it (actual - MemAvailable) + headroom rising above the held target ends the hold, before
// the guest's allocations meet the OOM killer.
TEST_F(ReclaimHoldTest, HardDemandAboveTheHoldEndsItWhateverThePolicy) {
  HoldA();
  hard_demand_ = 470 * kMiB;  // + 128 MiB headroom = 598 MiB: fits under the 600 MiB hold
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 600 * kMiB) << "still held";
  EXPECT_EQ(Published(kA)->last_decision().seen_floor_bytes(), 598 * kMiB);
  hard_demand_ = 520 * kMiB;
  TickWithFreshStats({kA});
  ExpectReleased("floor_above_hold floor=648MiB held=600MiB (actual - MemAvailable + headroom)");
}

// A pin without force stops at hard demand + headroom as libvirt shows it, under a policy that
// measures no floor of its own, and the decision says so.
TEST_F(ControlLoopTest, APinStopsAtTheHardDemandLibvirtShowsWhateverThePolicy) {
  hv_.AddDomain(kA, "a", 4096 * kMiB, 2048 * kMiB);  // configured floor 1024 MiB
  MakeLoop();
  hard_demand_ = 1400 * kMiB;  // + 5% of 4 GiB headroom: 1604.8 MiB
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(512 * kMiB);
  SetOverride(kA, "a", pin);
  TickWithFreshStats({kA});
  const int64_t seen = 1400 * kMiB + static_cast<int64_t>(0.05 * 4096 * kMiB);
  EXPECT_EQ(hv_.LastTarget(kA), seen / 1024 * 1024) << "libvirt sets KiB";
  const plimsoll::v1::Guest* a = Published(kA);
  EXPECT_EQ(a->envelope_floor_bytes(), seen);
  EXPECT_NE(a->last_decision().reason().find("raised to hard demand + headroom as libvirt shows it 1604.8MiB"),
            std::string::npos)
      << a->last_decision().reason();
}

TEST_F(ControlLoopTest, PublishesGuestChangesAndDecisionsToWatchers) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  WatchFilter all;
  all.include_holds = true;
  auto sub = hub_.Subscribe(all);
  policy_.targets[kA] = 600 * kMiB;
  TickWithFreshStats({kA});  // appears (stale: first value), a held decision
  TickWithFreshStats({kA});  // fresh: MANAGED, inflates
  std::vector<plimsoll::v1::WatchEvent> events;
  plimsoll::v1::WatchEvent e;
  while (sub->Next(&e, absl::Milliseconds(50)) == WatchSubscription::Result::kEvent) events.push_back(e);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0].guest().change(), plimsoll::v1::GuestEvent::CHANGE_APPEARED);
  bool changed = false, inflated = false;
  for (const auto& ev : events) {
    changed |= ev.guest().change() == plimsoll::v1::GuestEvent::CHANGE_CHANGED &&
               ev.guest().detail().find("STALE_STATS -> MANAGED") != std::string::npos;
    inflated |= ev.decision().decision().direction() == plimsoll::v1::DIRECTION_INFLATE;
  }
  EXPECT_TRUE(changed);
  EXPECT_TRUE(inflated);
  EXPECT_EQ(loop_->Published()->host().watch_subscribers(), 1);
}

TEST_F(ControlLoopTest, FailingToSwitchStatsOnIsRetriedWithBackoffNotEveryTick) {
  // A guest without a balloon device: libvirt refuses the stats period every time.
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  hv_.FailNext(FakeHypervisor::Method::kEnableStats,
               absl::InternalError("No memory balloon device configured"), 1000);
  loop_->Tick();
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kEnableStats), 1);
  for (int i = 0; i < 9; ++i) {
    clock_.Advance(absl::Seconds(1));
    loop_->Tick();
  }
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kEnableStats), 1) << "retried before 10 s";
  clock_.Advance(absl::Seconds(1));
  loop_->Tick();
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kEnableStats), 2);  // at 10 s
  for (int i = 0; i < 19; ++i) {
    clock_.Advance(absl::Seconds(1));
    loop_->Tick();
  }
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kEnableStats), 2) << "backoff doubles to 20 s";
  clock_.Advance(absl::Seconds(1));
  loop_->Tick();
  EXPECT_EQ(hv_.call_count(FakeHypervisor::Method::kEnableStats), 3);
  EXPECT_NE(metrics_.Render().find("plimsoll_libvirt_errors_total{operation=\"enable_stats\"} 3"),
            std::string::npos);
}

// A failed host read used to leave the last reading in use forever, so the policy went on
// shrinking guests for a host it could no longer see. Now the reading carries its age and a tick
// that could not read the host shrinks nobody (growing is still allowed).
TEST_F(ControlLoopTest, NoGuestIsShrunkOnHostDataThisTickCouldNotRead) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 600 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA, kB});
  TickWithFreshStats({kA, kB});
  EXPECT_FALSE(loop_->Published()->host().host_data_stale());
  EXPECT_EQ(loop_->Published()->host().host_data_age_seconds(), 0);

  host_.SetError(absl::ResourceExhaustedError("Too many open files"));
  policy_.targets[kA] = 700 * kMiB;  // a shrink
  policy_.targets[kB] = 800 * kMiB;  // a growth
  ::testing::internal::CaptureStderr();
  TickWithFreshStats({kA, kB});
  TickWithFreshStats({kA, kB});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(hv_.target_calls().size(), 1u) << "only the growth";
  EXPECT_EQ(hv_.target_calls()[0].uuid, kB);
  EXPECT_EQ(hv_.LastTarget(kB), 800 * kMiB);
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("held: host memory not read this tick (data age=4.0s)"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
  EXPECT_TRUE(view_->host().host_data_stale());
  EXPECT_EQ(view_->host().host_data_age_seconds(), 4);
  EXPECT_NE(log.find("no guest is shrunk this tick"), std::string::npos) << log;
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("plimsoll_host_stale_ticks_total 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("plimsoll_host_data_age_seconds 4\n"), std::string::npos) << text;

  host_.SetError(absl::OkStatus());  // the host reads again: the shrink goes ahead
  TickWithFreshStats({kA, kB});
  EXPECT_EQ(hv_.LastTarget(kA), 700 * kMiB);
  EXPECT_FALSE(loop_->Published()->host().host_data_stale());
}

// ---- Early ticks (wake_gate.h) ----

// A guest whose agent spiked is served first in the tick its spike brought forward: its balloon
// call goes out before the others' (guests are otherwise applied in name order).
TEST_F(ControlLoopTest, TheGuestThatSpikedIsServedFirst) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA, kB});
  policy_.targets[kA] = 900 * kMiB;
  policy_.targets[kB] = 900 * kMiB;
  loop_->WakeForSpike(kB);
  TickWithFreshStats({kA, kB});
  ASSERT_EQ(hv_.target_calls().size(), 2u);
  EXPECT_EQ(hv_.target_calls()[0].uuid, kB);
  EXPECT_EQ(hv_.target_calls()[1].uuid, kA);

  hv_.ClearTargetCalls();  // the next tick, with no spike: name order again
  policy_.targets[kA] = 800 * kMiB;
  policy_.targets[kB] = 800 * kMiB;
  TickWithFreshStats({kA, kB});
  ASSERT_EQ(hv_.target_calls().size(), 2u);
  EXPECT_EQ(hv_.target_calls()[0].uuid, kA);
  EXPECT_NE(metrics_.Render().find("plimsoll_agent_spikes_total 1\n"), std::string::npos);
}

// Run() in real time: spikes every 5 ms for a second against min_wake_interval 200 ms and a tick
// far away. Every spike used to buy a tick (a couple of hundred here); now they coalesce into at
// most one tick per 200 ms, and one log line.
TEST_F(ControlLoopTest, RunCoalescesWakesIntoOneTickPerMinWakeInterval) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  actuator_ = std::make_unique<HypervisorActuator>(&hv_);
  LoopOptions o;
  o.tick = absl::Hours(1);
  o.min_wake_interval = absl::Milliseconds(200);
  ControlLoop loop(LoopDeps{&hv_, &host_, &policy_, actuator_.get(), &clock_, &metrics_}, o);
  ::testing::internal::CaptureStderr();
  std::thread runner([&] { loop.Run(); });
  const absl::Time start = absl::Now();
  int spikes = 0;
  while (absl::Now() - start < absl::Seconds(1)) {
    loop.WakeForSpike(kA);
    ++spikes;
    absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Duration took = absl::Now() - start;
  loop.Stop();
  runner.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  const int64_t ticks = loop.ticks();
  std::cout << spikes << " spikes in " << absl::FormatDuration(took) << ": " << ticks << " ticks\n";
  // The first tick, then at most one per started 200 ms.
  EXPECT_LE(ticks, 1 + absl::ToInt64Milliseconds(took) / 200 + 1);
  EXPECT_GE(ticks, 3) << "early ticks must still happen";
  int lines = 0;
  for (size_t at = log.find("agent spike uuid="); at != std::string::npos; at = log.find("agent spike uuid=", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1) << log;
  EXPECT_NE(metrics_.Render().find(absl::StrCat("plimsoll_agent_spikes_total ", spikes, "\n")), std::string::npos);
}

// Every call into the world costs a known time on the fake clock, so the test knows how long
// each phase of a tick took and can tell a misattributed phase. (The clock this test used to
// have moved on by 1 ms at every reading, which made "each phase took at least 1 ms" true by
// construction, wherever the phase boundaries were.)
class TimedHypervisor : public hypervisor::Hypervisor {
 public:
  TimedHypervisor(FakeHypervisor* hv, FakeClock* clock) : hv_(hv), clock_(clock) {}
  absl::Status Connect() override { return hv_->Connect(); }
  bool IsConnected() const override {
    clock_->Advance(absl::Milliseconds(5));
    return hv_->IsConnected();
  }
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> ListActiveDomains() override {
    clock_->Advance(absl::Milliseconds(30));
    return hv_->ListActiveDomains();
  }
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) override {
    clock_->Advance(absl::Milliseconds(10));
    return hv_->GetBalloonStats(uuids);
  }
  absl::Status EnableStats(const std::string& uuid, int period_seconds) override {
    return hv_->EnableStats(uuid, period_seconds);
  }
  absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) override {
    clock_->Advance(absl::Milliseconds(7));
    return hv_->SetBalloonTarget(uuid, bytes);
  }
  void SetEventCallback(std::function<void(const hypervisor::DomainEvent&)> callback) override {
    hv_->SetEventCallback(std::move(callback));
  }

 private:
  FakeHypervisor* const hv_;
  FakeClock* const clock_;
};

class TimedHostReader : public host::HostReader {
 public:
  TimedHostReader(host::HostReader* host, FakeClock* clock) : host_(host), clock_(clock) {}
  absl::StatusOr<host::HostMemory> Read() override {
    clock_->Advance(absl::Milliseconds(3));
    return host_->Read();
  }

 private:
  host::HostReader* const host_;
  FakeClock* const clock_;
};

class TimedPolicy : public policy::Policy {
 public:
  TimedPolicy(const policy::Policy* policy, FakeClock* clock) : policy_(policy), clock_(clock) {}
  absl::string_view name() const override { return policy_->name(); }
  policy::Decisions Decide(const policy::Snapshot& s, policy::PolicyState state) const override {
    clock_->Advance(absl::Milliseconds(20));
    return policy_->Decide(s, std::move(state));
  }

 private:
  const policy::Policy* const policy_;
  FakeClock* const clock_;
};

TEST_F(ControlLoopTest, RecordsWhereTheTickTimeWent) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  TimedHypervisor hv(&hv_, &clock_);
  TimedHostReader host(&host_, &clock_);
  TimedPolicy policy(&policy_, &clock_);
  HypervisorActuator actuator(&hv);
  LoopDeps deps{&hv, &host, &policy, &actuator, &clock_, &metrics_};
  LoopOptions o;
  o.rules.stale_after = absl::Seconds(10);
  ControlLoop loop(deps, o);
  EXPECT_EQ(loop.last_tick_times().total, absl::ZeroDuration()) << "no tick yet";
  Report(kA, 1024 * kMiB, 1);
  loop.Tick();  // the first stats value proves nothing: a hold, no actuator call
  policy_.targets[kA] = 700 * kMiB;
  Report(kA, 1024 * kMiB, 2);
  clock_.Advance(absl::Seconds(2));
  loop.Tick();  // fresh now: one SetTarget
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  TickTimes t = loop.last_tick_times();
  // collect: IsConnected 5 + list 30 + stats 10 + host 3; decide: the policy's 20; apply: one
  // SetTarget 7; publish: IsConnected 5 for the view's libvirt_connected.
  EXPECT_EQ(t.collect, absl::Milliseconds(48));
  EXPECT_EQ(t.decide, absl::Milliseconds(20));
  EXPECT_EQ(t.apply, absl::Milliseconds(7));
  EXPECT_EQ(t.publish, absl::Milliseconds(5));
  EXPECT_EQ(t.total, absl::Milliseconds(80));

  hv_.SimulateDisconnect();
  hv_.FailNext(FakeHypervisor::Method::kConnect, absl::UnavailableError("libvirtd is down"));
  clock_.Advance(absl::Seconds(2));
  loop.Tick();
  t = loop.last_tick_times();
  EXPECT_EQ(t.collect, absl::Milliseconds(5)) << "only the connection check";
  EXPECT_EQ(t.decide, absl::ZeroDuration()) << "nothing collected, nothing decided";
  EXPECT_EQ(t.apply, absl::ZeroDuration());
  EXPECT_EQ(t.publish, absl::Milliseconds(5));
  EXPECT_EQ(t.total, absl::Milliseconds(10));
}

int TargetCallsTo(const FakeHypervisor& hv, const std::string& uuid) {
  int n = 0;
  for (const auto& c : hv.target_calls()) n += c.uuid == uuid;
  return n;
}

// A SetTarget that hangs for 30 s on one guest holds up neither the loop nor
// the other guests; the hung guest is reported busy and not re-issued while in flight; once the
// call returns it is recorded (and only then), and the guest is handled as usual again.
TEST_F(ControlLoopTest, OneBusyDomainDoesNotStallTheOthers) {
  hv_.AddDomain(kA, "a", 2048 * kMiB, 1024 * kMiB);
  hv_.AddDomain(kB, "b", 2048 * kMiB, 1024 * kMiB);
  MakeLoop(/*dry_run=*/false, /*balloon_workers=*/2);
  TickWithFreshStats({kA, kB});
  TickWithFreshStats({kA, kB});  // stats proven fresh; nothing moved yet
  ASSERT_TRUE(WaitFor([&] { return hv_.call_count(FakeHypervisor::Method::kEnableStats) == 2; }));
  ASSERT_TRUE(WaitFor([&] { return loop_->BalloonCallsInPool() == 0; }));  // returned, not just begun
  TickWithFreshStats({kA, kB});  // the stats calls' results taken

  hv_.BlockSetTarget(kA, absl::Seconds(30));
  policy_.targets[kA] = 1500 * kMiB;
  TickWithFreshStats({kA, kB});
  ASSERT_TRUE(WaitFor([&] { return hv_.blocked_set_target_calls() == 1; }));
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB) << "a call in flight is not a target";

  // b comes under pressure while a's call hangs: grown in this one tick, which does not wait.
  policy_.targets[kB] = 1600 * kMiB;
  const absl::Time started = absl::Now();
  TickWithFreshStats({kA, kB});
  EXPECT_LT(absl::Now() - started, absl::Seconds(5)) << "the tick waited for the hung call";
  ASSERT_TRUE(WaitFor([&] { return hv_.LastTarget(kB) == 1600 * kMiB; }));
  EXPECT_EQ(TargetCallsTo(hv_, kA), 0) << "a's call has not returned, the fake records it then";
  EXPECT_EQ(hv_.blocked_set_target_calls(), 1) << "not re-issued while in flight";
  const plimsoll::v1::Guest* a = Published(kA);
  EXPECT_EQ(a->management_state(), plimsoll::v1::MANAGEMENT_STATE_BUSY);
  EXPECT_EQ(a->target_bytes(), 1024 * kMiB);
  EXPECT_NE(a->last_decision().reason().find("busy: set_target to 1500MiB issued 2s ago has not returned"),
            std::string::npos)
      << a->last_decision().reason();
  EXPECT_EQ(a->last_decision().direction(), plimsoll::v1::DIRECTION_HOLD);
  EXPECT_NE(metrics_.Render().find("plimsoll_balloon_busy_skips_total{reason=\"in_flight\"} 1"), std::string::npos);
  TickWithFreshStats({kA, kB});  // b's result taken
  EXPECT_EQ(Published(kB)->target_bytes(), 1600 * kMiB);
  EXPECT_EQ(Published(kB)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  EXPECT_EQ(hv_.blocked_set_target_calls(), 1) << "still not re-issued";

  // The call returns: recorded at the next tick, the guest managed again and free to move.
  hv_.UnblockSetTarget(kA);
  ASSERT_TRUE(WaitFor([&] { return TargetCallsTo(hv_, kA) == 1; }));
  TickWithFreshStats({kA, kB});
  a = Published(kA);
  EXPECT_EQ(a->target_bytes(), 1500 * kMiB);
  EXPECT_EQ(hv_.LastTarget(kA), 1500 * kMiB);
  EXPECT_EQ(a->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
  policy_.targets[kA] = 1300 * kMiB;
  TickWithFreshStats({kA, kB});
  ASSERT_TRUE(WaitFor([&] { return hv_.LastTarget(kA) == 1300 * kMiB; }));
  EXPECT_EQ(TargetCallsTo(hv_, kA), 2);
}

// A call that outlives balloon_call_deadline is reported, the guest is served again (a new call
// is issued), and when the old call returns after all, what the loop believes is what libvirt
// holds: the two calls overlapped, so the target is set once more, alone, before it is believed.
TEST_F(ControlLoopTest, ACallPastItsDeadlineIsReportedAndItsLateResultNeverMisleads) {
  ASSERT_NO_FATAL_FAILURE(StartBlockedMove(1500 * kMiB));
  for (int i = 0; i < 4; ++i) TickWithFreshStats({kA});  // 8 s: busy, within the 10 s deadline
  EXPECT_EQ(hv_.blocked_set_target_calls(), 1);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_BUSY);

  // Past the deadline (10 s): timed out, and served as usual again: the policy now wants 1200.
  policy_.targets[kA] = 1200 * kMiB;
  TickWithFreshStats({kA});
  EXPECT_NE(metrics_.Render().find("plimsoll_balloon_call_timeouts_total 1"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return hv_.blocked_set_target_calls() == 2; })) << "a new call, behind the hung one";
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB) << "neither call has returned";

  // Both return, in whatever order and whichever tick sees each: the target is set again, with no
  // other call of the domain in the pool, before the loop believes it.
  hv_.UnblockSetTarget(kA);
  ASSERT_TRUE(WaitFor([&] { return TargetCallsTo(hv_, kA) == 2; }));
  for (int i = 0; i < 4; ++i) {
    TickWithFreshStats({kA});
    absl::SleepFor(absl::Milliseconds(50));  // the workers report back (the calls are instant now)
  }
  EXPECT_GE(TargetCallsTo(hv_, kA), 3) << "set again after the overlap";
  EXPECT_EQ(hv_.target_calls().back().bytes, 1200 * kMiB);
  EXPECT_EQ(hv_.LastTarget(kA), 1200 * kMiB);
  EXPECT_EQ(Published(kA)->target_bytes(), 1200 * kMiB) << "what libvirt holds is what the loop believes";
  EXPECT_EQ(Published(kA)->last_decision().reason().find("re-asserting"), std::string::npos)
      << "sure by now: " << Published(kA)->last_decision().reason();
  const int calls = TargetCallsTo(hv_, kA);
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  EXPECT_EQ(TargetCallsTo(hv_, kA), calls) << "once sure, no more calls";
}

// Shutting down with a balloon call in flight: the loop's destructor joins its workers, waiting for
// the call (libvirt cannot cancel one), and nothing it used is gone before (ASan runs this).
TEST_F(ControlLoopTest, DestroyingTheLoopJoinsAWorkerStillInACall) {
  ASSERT_NO_FATAL_FAILURE(StartBlockedMove(1500 * kMiB));
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(300));
    hv_.UnblockSetTarget(kA);
  });
  const absl::Time started = absl::Now();
  loop_.reset();
  EXPECT_GE(absl::Now() - started, absl::Milliseconds(250)) << "returned before the call did";
  release.join();
  EXPECT_EQ(TargetCallsTo(hv_, kA), 1) << "the call ran to its end";
  EXPECT_EQ(hv_.LastTarget(kA), 1500 * kMiB);
}

// A domain in a libvirt job (a migration) is not called at all: skipped, reported busy.
TEST_F(ControlLoopTest, ADomainInALibvirtJobIsSkippedNotWaitedFor) {
  hv_.AddDomain(kA, "a", 2048 * kMiB, 1024 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  hv_.SetActiveJob(kA, "unbounded job running for 12.0s");
  policy_.targets[kA] = 1500 * kMiB;
  TickWithFreshStats({kA});
  EXPECT_EQ(TargetCallsTo(hv_, kA), 0);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_BUSY);
  EXPECT_EQ(Published(kA)->target_bytes(), 1024 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("active libvirt job (unbounded job running for 12.0s)"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
  EXPECT_NE(metrics_.Render().find("plimsoll_balloon_busy_skips_total{reason=\"job\"} 1"), std::string::npos);
  EXPECT_NE(metrics_.Render().find("plimsoll_libvirt_errors_total{operation=\"set_target\"} 0"), std::string::npos)
      << "busy is not a libvirt error";
  hv_.SetActiveJob(kA, "");
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 1500 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_MANAGED);
}

// The scripted policy, reporting the floor (hard demand + headroom) a measuring policy would.
class FlooredPolicy : public policy::Policy {
 public:
  explicit FlooredPolicy(const ScriptedPolicy* scripted) : scripted_(scripted) {}
  absl::string_view name() const override { return "floored"; }
  policy::Decisions Decide(const policy::Snapshot& s, policy::PolicyState state) const override {
    policy::Decisions d = scripted_->Decide(s, std::move(state));
    for (policy::GuestDecision& g : d.guests) {
      if (auto it = floors.find(g.uuid); it != floors.end()) g.floor_bytes = it->second;
    }
    return d;
  }
  absl::flat_hash_map<std::string, int64_t> floors;

 private:
  const ScriptedPolicy* const scripted_;
};

// A pin 2 GiB below the guest's size moves one envelope step per tick; a pin
// above it is applied at once (growth is never stepped).
TEST_F(ControlLoopTest, APinFarBelowTheGuestMovesOneStepPerTick) {
  hv_.AddDomain(kA, "a", 4096 * kMiB, 4096 * kMiB);
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});  // fresh
  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(2048 * kMiB);
  SetOverride(kA, "a", pin);
  TickWithFreshStats({kA});  // the step: max(256 MiB, 4096 MiB / 4) = 1 GiB
  EXPECT_EQ(hv_.LastTarget(kA), 3072 * kMiB);
  const plimsoll::v1::Guest* a = Published(kA);
  EXPECT_EQ(a->management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  EXPECT_NE(a->last_decision().reason().find("towards the pin at the envelope's step of 1024MiB per tick"),
            std::string::npos)
      << a->last_decision().reason();
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 2048 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.target_calls().size(), 2u) << "at the pin: no more calls";
  pin.set_pin_bytes(4096 * kMiB);
  SetOverride(kA, "a", pin);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 4096 * kMiB) << "up to a pin in one move";
}

// A lowered min below the guest's hard demand + headroom is clamped to it and the decision says
// so; under a policy that measures no floor, the configured floor holds instead.
TEST_F(ControlLoopTest, AMinBelowHardDemandIsClampedToTheFloor) {
  hv_.AddDomain(kA, "a", 4096 * kMiB, 2048 * kMiB);  // configured floor: 0.25 x 4096 = 1024 MiB
  FlooredPolicy floored(&policy_);
  floored.floors[kA] = 1500 * kMiB;
  loop_policy_ = &floored;
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  plimsoll::v1::GuestOverride low;
  low.set_min_bytes(256 * kMiB);
  SetOverride(kA, "a", low);
  policy_.targets[kA] = 300 * kMiB;
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 1500 * kMiB);
  const plimsoll::v1::Guest* a = Published(kA);
  EXPECT_NE(a->last_decision().reason().find(
                "clamped to hard demand + headroom 1500MiB: the override's min 256MiB is below it"),
            std::string::npos)
      << a->last_decision().reason();
  EXPECT_EQ(a->envelope_floor_bytes(), 1500 * kMiB);
  EXPECT_EQ(a->min_bytes(), 256 * kMiB) << "the override's floor is shown as set";

  floored.floors.clear();  // a policy without a floor of its own (mom, proxmox, static)
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 1024 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("clamped to the configured floor 1024MiB"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
  EXPECT_EQ(Published(kA)->envelope_floor_bytes(), 1024 * kMiB);
}

// An override's max below the configured floor wins over it, as before: the envelope's floor and
// step are for a lowered min, and never raise a target above the guest's ceiling.
TEST_F(ControlLoopTest, AnOverrideCeilingBelowTheConfiguredFloorIsNotRaisedByTheEnvelope) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);  // configured floor 256 MiB
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  plimsoll::v1::GuestOverride o;
  o.set_min_bytes(128 * kMiB);
  o.set_max_bytes(200 * kMiB);
  SetOverride(kA, "a", o);
  policy_.targets[kA] = 150 * kMiB;
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 150 * kMiB) << Published(kA)->last_decision().reason();
}

// force: a pin below the floor and far below the guest applies at once, and the decision says
// who forced it and why.
TEST_F(ControlLoopTest, AForcedPinAppliesAtOnceBelowTheFloor) {
  hv_.AddDomain(kA, "a", 4096 * kMiB, 4096 * kMiB);
  FlooredPolicy floored(&policy_);
  floored.floors[kA] = 3000 * kMiB;
  loop_policy_ = &floored;
  MakeLoop();
  TickWithFreshStats({kA});
  TickWithFreshStats({kA});
  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(1024 * kMiB);
  SetOverride(kA, "a", pin);
  TickWithFreshStats({kA});  // not forced: raised to the floor, then a step from 4096 MiB
  EXPECT_EQ(hv_.LastTarget(kA), 3072 * kMiB);
  EXPECT_NE(Published(kA)->last_decision().reason().find("raised to hard demand + headroom 3000MiB"),
            std::string::npos)
      << Published(kA)->last_decision().reason();
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 3000 * kMiB) << "held at the floor";

  pin.set_force(true);
  pin.set_note("drain before the host's maintenance");
  SetOverride(kA, "a", pin);
  TickWithFreshStats({kA});
  EXPECT_EQ(hv_.LastTarget(kA), 1024 * kMiB) << "at once";
  const plimsoll::v1::Guest* a = Published(kA);
  EXPECT_NE(a->last_decision().reason().find("forced by=\"test\": drain before the host's maintenance"),
            std::string::npos)
      << a->last_decision().reason();
  EXPECT_EQ(SnapshotView(kA)->max_bytes, 1024 * kMiB) << "a forced pin is fixed for the policy";
}

// A policy that moves as scripted and records, for each guest and each Decide, the target the
// snapshot gave and the history's call in flight (0: none).
class WitnessPolicy : public policy::Policy {
 public:
  explicit WitnessPolicy(const ScriptedPolicy* scripted) : scripted_(scripted) {}
  absl::string_view name() const override { return "witness"; }
  policy::Decisions Decide(const policy::Snapshot& s, policy::PolicyState state) const override {
    for (const policy::GuestView& g : s.guests) {
      targets[g.uuid].push_back(g.target_bytes / kMiB);
      pending[g.uuid].push_back(g.history.has_value() ? g.history->pending_target_bytes.value_or(0) / kMiB : -1);
    }
    return scripted_->Decide(s, std::move(state));
  }
  mutable absl::flat_hash_map<std::string, std::vector<int64_t>> targets;
  mutable absl::flat_hash_map<std::string, std::vector<int64_t>> pending;

 private:
  const ScriptedPolicy* const scripted_;
};

// The policy learns what happened to its moves from the snapshot: a move the envelope held
// (stale stats) or whose call failed leaves the target as it was in the next snapshot; a move
// made shows as the new target. Nothing of the policy's state is undone by the loop.
TEST_F(ControlLoopTest, ThePolicySeesAMoveNotMadeAsAnUnchangedTarget) {
  hv_.AddDomain(kA, "a", 1024 * kMiB, 1024 * kMiB);
  WitnessPolicy witness(&policy_);
  loop_policy_ = &witness;
  MakeLoop();
  policy_.targets[kA] = 700 * kMiB;
  TickWithFreshStats({kA});  // the first stats prove nothing: the shrink is held
  EXPECT_EQ(hv_.target_calls().size(), 0u);
  hv_.FailNext(FakeHypervisor::Method::kSetBalloonTarget, absl::InternalError("qemu monitor busy"));
  TickWithFreshStats({kA});  // fresh: the move is made, and its call fails
  ASSERT_EQ(hv_.target_calls().size(), 1u);
  TickWithFreshStats({kA});  // made, and it succeeds
  EXPECT_EQ(hv_.LastTarget(kA), 700 * kMiB);
  TickWithFreshStats({kA});
  EXPECT_THAT(witness.targets[kA], ElementsAre(1024, 1024, 1024, 700))
      << "the held and the failed move left the target as it was";
  EXPECT_THAT(witness.pending[kA], ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(metrics_.Render().find("plimsoll_policy_moves_undone_total"), std::string::npos);
}

// With the balloon pool: while a move's call is in flight the snapshot says so (the target is
// still the old one, the history names the one under way); when the call times out, the history
// shows the target unchanged and no call: the move was not made.
TEST_F(ControlLoopTest, ThePolicySeesACallInFlightAndItsTimeout) {
  WitnessPolicy witness(&policy_);
  loop_policy_ = &witness;
  ASSERT_NO_FATAL_FAILURE(StartBlockedMove(1500 * kMiB));
  for (int i = 0; i < 4; ++i) TickWithFreshStats({kA});  // 8 s: busy, within the 10 s deadline
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_BUSY);
  TickWithFreshStats({kA});  // past the deadline: timed out before this tick's decision
  EXPECT_NE(metrics_.Render().find("plimsoll_balloon_call_timeouts_total 1"), std::string::npos);
  EXPECT_THAT(witness.targets[kA], ElementsAre(1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024));
  EXPECT_THAT(witness.pending[kA], ElementsAre(0, 0, 0, 0, 1500, 1500, 1500, 1500, 0));
  hv_.UnblockSetTarget(kA);
  ASSERT_TRUE(WaitFor([&] { return TargetCallsTo(hv_, kA) == 2; }));
}

}  // namespace
}  // namespace plimsoll::server
