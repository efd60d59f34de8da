// LoopControlCore over a real ControlLoop with the project's fakes
// (FakeHypervisor, FakeHostReader, FakeClock, and a scripted policy that
// holds every guest): what each ControlCore method does to the loop, the state
// file and the watch feed. No gRPC server: the service is a thin adapter.
#include "server/api/loop_control_core.h"

#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "policy/testing/scripted_policy.h"
#include "server/host/testing/fake_host_reader.h"
#include "server/hypervisor/testing/fake_hypervisor.h"

namespace plimsoll::server {
namespace {

using hypervisor::BalloonStats;
using hypervisor::FakeHypervisor;

constexpr int64_t kMiB = 1LL << 20;
constexpr char kA[] = "00000000-0000-0000-0000-00000000000a";
constexpr char kB[] = "00000000-0000-0000-0000-00000000000b";

// No targets scripted: every guest holds where it is.
using policy::testing::ScriptedPolicy;

class LoopControlCoreTest : public ::testing::Test {
 protected:
  LoopControlCoreTest() : hv_(FakeHypervisor::Options{.balloon_follows_target = true}) {
    host::HostMemory mem;
    mem.mem_total_bytes = 16384 * kMiB;
    mem.mem_available_bytes = 12000 * kMiB;
    mem.mem_free_bytes = 8000 * kMiB;
    host_.SetMemory(mem);
    char tmpl[] = "/tmp/plimsoll-core-XXXXXX";
    dir_ = mkdtemp(tmpl);
    hv_.AddDomain(kA, "a", 2048 * kMiB, 2048 * kMiB);
    hv_.AddDomain(kB, "b", 1024 * kMiB, 1024 * kMiB);
  }
  ~LoopControlCoreTest() override { std::filesystem::remove_all(dir_); }

  void Make(bool dry_run = false) {
    auto store = OverrideStore::Open(std::make_unique<StateStore>(state_file(), &clock_), &clock_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    actuator_ = dry_run ? std::unique_ptr<Actuator>(new DryRunActuator())
                        : std::unique_ptr<Actuator>(new HypervisorActuator(&hv_));
    LoopOptions o;
    o.tick = absl::Seconds(2);
    o.rules.stale_after = absl::Seconds(10);
    LoopDeps deps{&hv_, &host_, &policy_, actuator_.get(), &clock_, nullptr};
    deps.overrides = store_.get();
    deps.hub = &hub_;
    loop_ = std::make_unique<ControlLoop>(deps, o);
    core_ = std::make_unique<LoopControlCore>(loop_.get(), store_.get(), &hub_, &clock_);
  }

  std::string state_file() const { return dir_ + "/state.textproto"; }

  // One tick with stats that advance: every guest holds 64 MiB of hard demand (actual -
  // MemAvailable), the rest is cache it can give (a balloon taking cache takes MemAvailable too).
  void Tick() {
    ++guest_clock_;
    for (const char* u : {kA, kB}) {
      if (!hv_.GetDomain(u).has_value()) continue;
      BalloonStats s;
      s.actual_bytes = hv_.GetDomain(u)->current_bytes;
      s.unused_bytes = 100 * kMiB;
      s.usable_bytes = *s.actual_bytes - 64 * kMiB;
      s.disk_caches_bytes = 400 * kMiB;
      s.last_update = guest_clock_;
      hv_.SetStats(u, s);
    }
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

  static Caller Admin() { return {Role::kAdmin, "unix", true}; }

  absl::StatusOr<plimsoll::v1::SetGuestPolicyResponse> Set(const std::string& guest, plimsoll::v1::GuestOverride o) {
    plimsoll::v1::SetGuestPolicyRequest r;
    r.set_guest(guest);
    *r.mutable_override() = std::move(o);
    return core_->SetGuestPolicy(r, Admin());
  }

  absl::StatusOr<plimsoll::v1::ReclaimPlan> Reclaim(int64_t bytes, bool dry_run, bool require_full = false) {
    plimsoll::v1::ReclaimRequest r;
    r.set_bytes(bytes);
    r.set_dry_run(dry_run);
    r.set_require_full(require_full);
    r.set_hold_seconds(60);
    return core_->Reclaim(r, Admin());
  }

  FakeHypervisor hv_;
  host::FakeHostReader host_;
  FakeClock clock_;
  ScriptedPolicy policy_;
  WatchHub hub_{&clock_};
  std::string dir_;
  std::unique_ptr<OverrideStore> store_;
  std::unique_ptr<Actuator> actuator_;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<LoopControlCore> core_;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view_;
  int64_t guest_clock_ = 1000;
};

TEST_F(LoopControlCoreTest, SetGuestPolicyPersistsPublishesAndActsOnTheNextTick) {
  Make();
  Tick();
  Tick();
  WatchFilter f;
  f.kinds = {plimsoll::v1::WATCH_EVENT_KIND_GUEST_OVERRIDE};
  auto sub = core_->Watch(f);
  plimsoll::v1::GuestOverride o;
  o.set_pin_bytes(1024 * kMiB);
  auto set = Set("A", o);  // unknown name: the UUID must be given in full
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(set.status().message().find("\"A\""), std::string::npos);
  set = Set(absl::AsciiStrToUpper(kA), o);  // UUIDs in any case
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->override().guest_uuid(), kA);
  EXPECT_EQ(set->override().guest_name(), "a");
  EXPECT_EQ(set->override().updated_by(), "unix");
  // Persisted before returning.
  auto reloaded = StateStore(state_file(), &clock_).Load();
  ASSERT_TRUE(reloaded.ok());
  ASSERT_EQ(reloaded->state.guest_overrides_size(), 1);
  EXPECT_EQ(reloaded->state.guest_overrides(0).pin_bytes(), 1024 * kMiB);
  plimsoll::v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_EQ(e.guest_override().guest_name(), "a");
  EXPECT_EQ(e.guest_override().override().pin_bytes(), 1024 * kMiB);

  Tick();  // one envelope step down (512 MiB for a's 2 GiB), then the pin
  EXPECT_EQ(hv_.LastTarget(kA), 1536 * kMiB);
  Tick();
  EXPECT_EQ(hv_.LastTarget(kA), 1024 * kMiB);
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_PINNED);
  EXPECT_EQ(Published(kA)->override().pin_bytes(), 1024 * kMiB);
  EXPECT_EQ(view_->host().state_file(), state_file());
  EXPECT_EQ(view_->host().guest_overrides(), 1);
}

// The safety envelope at the API: what the envelope will do differently is in the reply and the
// event; force needs a note, applies at once, and the event says who and why.
TEST_F(LoopControlCoreTest, AnOverrideBelowTheEnvelopeSaysSoAndForceIsAudited) {
  Make();
  Tick();
  Tick();  // a (2 GiB): envelope floor = the configured floor, 512 MiB (the policy measures none)
  ASSERT_EQ(Published(kA)->envelope_floor_bytes(), 512 * kMiB);
  WatchFilter f;
  f.kinds = {plimsoll::v1::WATCH_EVENT_KIND_GUEST_OVERRIDE};
  auto sub = core_->Watch(f);
  plimsoll::v1::GuestOverride o;
  o.set_min_bytes(128 * kMiB);
  auto set = Set(kA, o);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->warnings_size(), 1);
  EXPECT_NE(set->warnings(0).find("min_bytes 128 MiB (134217728) is below guest \"a\"'s envelope floor of 512 MiB"),
            std::string::npos)
      << set->warnings(0);
  plimsoll::v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  ASSERT_EQ(e.guest_override().warnings_size(), 1);
  EXPECT_EQ(e.guest_override().warnings(0), set->warnings(0));

  plimsoll::v1::GuestOverride pin;
  pin.set_pin_bytes(256 * kMiB);
  pin.set_force(true);
  auto refused = Set(kA, pin);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("override.force"), std::string::npos) << refused.status();
  pin.set_note("host drain, ticket 42");
  set = Set(kA, pin);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->warnings_size(), 0) << set->warnings(0);
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_TRUE(e.guest_override().override().force());
  EXPECT_EQ(e.guest_override().override().updated_by(), "unix");
  EXPECT_EQ(e.guest_override().override().note(), "host drain, ticket 42");
  Tick();
  EXPECT_EQ(hv_.LastTarget(kA), 256 * kMiB) << "forced: below the floor, in one move";

  // Not forced (force: false; unset would keep the stored one), the same pin is held at the floor.
  pin.set_force(false);
  set = Set(kA, pin);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->warnings_size(), 1) << "a's target is the pin already: no step to warn of";
  EXPECT_NE(set->warnings(0).find("pin_bytes 256 MiB (268435456) is below"), std::string::npos) << set->warnings(0);
}

TEST_F(LoopControlCoreTest, SizesAreCheckedAgainstTheGuestsMemory) {
  Make();
  Tick();
  plimsoll::v1::GuestOverride o;
  o.set_pin_bytes(1536 * kMiB);  // b has 1 GiB
  auto set = Set("b", o);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set.status().message().rfind("override.pin_bytes", 0), 0u) << set.status();
  EXPECT_TRUE(core_->ListGuestPolicies()->overrides().empty());
}

TEST_F(LoopControlCoreTest, ClearWorksForAGuestThatIsGoneByItsLastName) {
  Make();
  Tick();
  plimsoll::v1::GuestOverride o;
  o.set_exclude(true);
  o.set_note("keep out");
  ASSERT_TRUE(Set("b", o).ok());
  hv_.RemoveDomain(kB);
  loop_->NoteStopped(kB);  // as the daemon does on the lifecycle event
  Tick();
  ASSERT_EQ(Published(kB), nullptr);
  ASSERT_EQ(core_->ListGuestPolicies()->overrides_size(), 1);
  plimsoll::v1::ClearGuestPolicyRequest r;
  r.set_guest("b");
  r.add_fields("exclude");
  auto cleared = core_->ClearGuestPolicy(r, Admin());
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_TRUE(cleared->existed());
  EXPECT_EQ(cleared->override().note(), "keep out");
  r.clear_fields();
  ASSERT_TRUE(core_->ClearGuestPolicy(r, Admin()).ok());
  EXPECT_TRUE(core_->ListGuestPolicies()->overrides().empty());
  r.set_guest("b");
  EXPECT_EQ(core_->ClearGuestPolicy(r, Admin()).status().code(), absl::StatusCode::kNotFound);
}

// A read that follows a successful write sees it, with no tick in between: the override set and
// cleared, the count of stored overrides, and the host policy with the budget it puts in force.
TEST_F(LoopControlCoreTest, ReadsSeeTheirOwnWritesBeforeAnyTick) {
  Make();
  Tick();
  Tick();
  const plimsoll::v1::ManagementState before = Published(kA)->management_state();
  plimsoll::v1::GuestOverride o;
  o.set_pin_bytes(1024 * kMiB);
  ASSERT_TRUE(Set(kA, o).ok());
  EXPECT_EQ(Published(kA)->override().pin_bytes(), 1024 * kMiB);
  EXPECT_EQ(view_->host().guest_overrides(), 1);
  EXPECT_EQ(Published(kA)->management_state(), before) << "the tick's to act on it";

  plimsoll::v1::ClearGuestPolicyRequest clear;
  clear.set_guest(kA);
  ASSERT_TRUE(core_->ClearGuestPolicy(clear, Admin()).ok());
  EXPECT_FALSE(Published(kA)->has_override());
  EXPECT_EQ(view_->host().guest_overrides(), 0);

  plimsoll::v1::SetHostPolicyRequest hp;
  hp.mutable_policy()->set_guest_memory_budget_bytes(1536 * kMiB);
  hp.mutable_policy()->set_paused(true);
  ASSERT_TRUE(core_->SetHostPolicy(hp, Admin()).ok());
  view_ = loop_->Published();
  EXPECT_EQ(view_->host().host_policy().guest_memory_budget_bytes(), 1536 * kMiB);
  EXPECT_EQ(view_->host().guest_budget_bytes(), 1536 * kMiB);
  EXPECT_TRUE(view_->host().paused());
  EXPECT_EQ(loop_->Published(), view_) << "the same overlaid view for the reads that follow";

  Tick();  // the tick publishes what it made of them, and the overlay is no longer needed
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_PAUSED);
  EXPECT_EQ(view_->host().guest_budget_bytes(), 1536 * kMiB);
}

TEST_F(LoopControlCoreTest, HostPolicyRefusesUnknownPoliciesAndPausesTheLoop) {
  Make();
  Tick();
  plimsoll::v1::SetHostPolicyRequest r;
  r.mutable_policy()->set_policy("magic");
  auto bad = core_->SetHostPolicy(r, Admin());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("policy.policy: ", 0), 0u) << bad.status();
  // A variant is a policy; its parameters are checked.
  r.mutable_policy()->set_policy("pagecache:probe_fraction=0.01");
  EXPECT_TRUE(core_->SetHostPolicy(r, Admin()).ok());
  r.mutable_policy()->set_policy("pagecache:bogus=1");
  auto bad_param = core_->SetHostPolicy(r, Admin());
  EXPECT_EQ(bad_param.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_param.status().message().find("unknown pagecache parameter \"bogus\""), std::string::npos)
      << bad_param.status();
  r.mutable_policy()->clear_policy();
  r.mutable_policy()->set_paused(true);
  auto ok = core_->SetHostPolicy(r, Admin());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->policy().paused());
  // Refused at once, before any tick has seen the pause.
  auto refused = Reclaim(256 * kMiB, /*dry_run=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("paused"), std::string::npos) << refused.status();
  Tick();
  EXPECT_EQ(Published(kA)->management_state(), plimsoll::v1::MANAGEMENT_STATE_PAUSED);
  EXPECT_TRUE(view_->host().paused());
}

TEST_F(LoopControlCoreTest, ReclaimDryRunPlansAndARealOneHoldsTheGuests) {
  Make();
  Tick();
  Tick();  // stats proven fresh: both guests are candidates
  auto plan = Reclaim(300 * kMiB, /*dry_run=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->dry_run());
  EXPECT_FALSE(plan->applied());
  EXPECT_EQ(plan->planned_bytes(), 300 * kMiB);
  Tick();
  EXPECT_TRUE(hv_.target_calls().empty()) << "a dry run moves nothing";

  WatchFilter f;
  f.kinds = {plimsoll::v1::WATCH_EVENT_KIND_RECLAIM};
  auto sub = core_->Watch(f);
  plan = Reclaim(300 * kMiB, /*dry_run=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->applied());
  EXPECT_GT(plan->hold_until_unix_micros(), plan->created_unix_micros());
  ASSERT_GE(plan->items_size(), 1);
  const auto& item = plan->items(0);
  Tick();
  EXPECT_EQ(hv_.LastTarget(item.guest_uuid()), item.new_target_bytes());
  const auto* g = Published(item.guest_uuid());
  EXPECT_EQ(g->reclaim_hold().reclaim_id(), plan->id());
  EXPECT_EQ(view_->host().reclaim_held_bytes(), 300 * kMiB);
  plimsoll::v1::WatchEvent e;
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_APPLIED);
  EXPECT_EQ(e.reclaim().plan().id(), plan->id());
  clock_.Advance(absl::Seconds(60));
  Tick();
  ASSERT_EQ(sub->Next(&e, absl::Seconds(1)), WatchSubscription::Result::kEvent);
  EXPECT_EQ(e.reclaim().phase(), plimsoll::v1::ReclaimEvent::PHASE_EXPIRED);
  EXPECT_FALSE(Published(item.guest_uuid())->has_reclaim_hold());
}

TEST_F(LoopControlCoreTest, ReclaimHonoursOverridesSetSinceTheLastTickAndRequireFull) {
  Make();
  Tick();
  Tick();
  plimsoll::v1::GuestOverride o;
  o.set_exclude(true);
  ASSERT_TRUE(Set("a", o).ok());  // no tick since: the view does not show it yet
  auto plan = Reclaim(4096 * kMiB, /*dry_run=*/true);
  ASSERT_TRUE(plan.ok());
  for (const auto& item : plan->items()) EXPECT_NE(item.guest_uuid(), kA);
  bool skipped_a = false;
  for (const auto& s : plan->skipped()) skipped_a |= s.guest_uuid() == kA && s.reason().find("excluded") != std::string::npos;
  EXPECT_TRUE(skipped_a);
  auto full = Reclaim(4096 * kMiB, /*dry_run=*/false, /*require_full=*/true);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kFailedPrecondition);
  Tick();
  EXPECT_TRUE(hv_.target_calls().empty()) << "a refused reclaim moves nothing";
}

TEST_F(LoopControlCoreTest, AReclaimWithNothingToTakeHoldsNothing) {
  Make();
  Tick();  // stats not proven fresh yet: every guest is skipped
  auto plan = Reclaim(128 * kMiB, /*dry_run=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->items_size(), 0);
  EXPECT_EQ(plan->skipped_size(), 2);
  EXPECT_FALSE(plan->applied());
  EXPECT_EQ(plan->hold_until_unix_micros(), 0);
  Tick();
  view_ = loop_->Published();
  EXPECT_EQ(view_->host().reclaim_held_bytes(), 0);
}

TEST_F(LoopControlCoreTest, ReclaimIsRefusedWhenTheDaemonRunsDry) {
  Make(/*dry_run=*/true);
  Tick();
  Tick();
  auto r = Reclaim(128 * kMiB, /*dry_run=*/false);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Reclaim(128 * kMiB, /*dry_run=*/true).ok());
}

TEST_F(LoopControlCoreTest, CallsFromManyThreadsWhileTheLoopTicks) {
  Make();
  Tick();
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop) Tick();
  });
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        plimsoll::v1::GuestOverride o;
        o.set_shares(static_cast<uint32_t>(1 + t * 100 + i));
        EXPECT_TRUE(Set(t % 2 ? "a" : "b", o).ok());
        EXPECT_TRUE(Reclaim(64 * kMiB, /*dry_run=*/true).ok());
        EXPECT_TRUE(core_->ListGuestPolicies().ok());
      }
    });
  }
  for (auto& c : callers) c.join();
  stop = true;
  ticker.join();
  EXPECT_EQ(core_->ListGuestPolicies()->overrides_size(), 2);
}

}  // namespace
}  // namespace plimsoll::server
