// The Control service over a real in-process gRPC channel, with the fake core.
#include "server/api/control_service.h"

#include <thread>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/api/testing/fake_control_core.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kMiB = 1LL << 20;

v1::ListGuestsResponse TwoGuests() {
  v1::ListGuestsResponse v;
  google::protobuf::TextFormat::ParseFromString(R"(
    guests { name: "web" uuid: "aaaaaaaa-0000-0000-0000-000000000001" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_MANAGED max_bytes: 2147483648 min_bytes: 536870912
             target_bytes: 1610612736 actual_bytes: 1610612736
             stats { stats_fresh: true usable { bytes: 1073741824 } disk_caches { bytes: 536870912 } } }
    guests { name: "db" uuid: "aaaaaaaa-0000-0000-0000-000000000002" run_state: GUEST_RUN_STATE_RUNNING
             management_state: MANAGEMENT_STATE_STALE_STATS max_bytes: 4294967296 min_bytes: 1073741824
             target_bytes: 4294967296 }
    host { policy: "mom" guest_budget_bytes: 4294967296 })",
                                                &v);
  return v;
}

class ControlServiceTest : public ::testing::Test {
 protected:
  void Start(bool with_core) {
    core_.SetView(TwoGuests());
    ControlServiceOptions options;
    options.policy_names = {"mom", "static"};
    options.watch_poll = absl::Milliseconds(20);
    service_ = std::make_unique<ControlService>([this] { return core_.View(); }, with_core ? &core_ : nullptr,
                                                options);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Control::NewStub(server_->InProcessChannel({}));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }

  grpc::Status Set(const std::string& text, v1::SetGuestPolicyResponse* out = nullptr) {
    v1::SetGuestPolicyRequest r;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r));
    v1::SetGuestPolicyResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->SetGuestPolicy(&ctx, r, &resp);
    if (out) *out = resp;
    return s;
  }
  grpc::Status Reclaim(const std::string& text, v1::ReclaimResponse* out = nullptr) {
    v1::ReclaimRequest r;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r));
    v1::ReclaimResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Reclaim(&ctx, r, &resp);
    if (out) *out = resp;
    return s;
  }
  grpc::Status SetHost(const std::string& text) {
    v1::SetHostPolicyRequest r;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r));
    v1::SetHostPolicyResponse resp;
    grpc::ClientContext ctx;
    return stub_->SetHostPolicy(&ctx, r, &resp);
  }

  FakeClock clock_;
  FakeControlCore core_{&clock_};
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Control::Stub> stub_;
};

TEST_F(ControlServiceTest, SetShowsInListAndGetAndClearRemovesIt) {
  Start(true);
  v1::SetGuestPolicyResponse set;
  ASSERT_TRUE(Set(R"(guest: "web" override { pin_bytes: 1073741824 note: "launch" })", &set).ok());
  EXPECT_EQ(set.override().pin_bytes(), 1024 * kMiB);
  EXPECT_EQ(set.override().guest_uuid(), "aaaaaaaa-0000-0000-0000-000000000001");
  EXPECT_FALSE(set.override().updated_by().empty());
  {
    grpc::ClientContext ctx;
    v1::GetGuestRequest r;
    r.set_guest("web");
    v1::Guest g;
    ASSERT_TRUE(stub_->GetGuest(&ctx, r, &g).ok());
    EXPECT_EQ(g.override().pin_bytes(), 1024 * kMiB);
    EXPECT_EQ(g.management_state(), v1::MANAGEMENT_STATE_PINNED);
  }
  {
    grpc::ClientContext ctx;
    v1::ListGuestPoliciesResponse list;
    ASSERT_TRUE(stub_->ListGuestPolicies(&ctx, {}, &list).ok());
    ASSERT_EQ(list.overrides_size(), 1);
    EXPECT_EQ(list.overrides(0).note(), "launch");
  }
  {
    grpc::ClientContext ctx;
    v1::ClearGuestPolicyRequest r;
    r.set_guest("AAAAAAAA-0000-0000-0000-000000000001");
    v1::ClearGuestPolicyResponse resp;
    ASSERT_TRUE(stub_->ClearGuestPolicy(&ctx, r, &resp).ok());
    EXPECT_TRUE(resp.existed());
    EXPECT_FALSE(resp.has_override());
  }
  {
    grpc::ClientContext ctx;
    v1::HostStatus host;
    ASSERT_TRUE(stub_->GetHostStatus(&ctx, {}, &host).ok());
    EXPECT_EQ(host.guest_overrides(), 0);
  }
}

TEST_F(ControlServiceTest, PreciseErrors) {
  Start(true);
  struct Row {
    std::string request;
    grpc::StatusCode code;
    std::string prefix;
  };
  const std::vector<Row> rows = {
      {R"(guest: "web" override { shares: 0 })", grpc::StatusCode::INVALID_ARGUMENT, "override.shares: 0"},
      {R"(guest: "web")", grpc::StatusCode::INVALID_ARGUMENT, "override: no setting given"},
      {R"(override { shares: 5 })", grpc::StatusCode::INVALID_ARGUMENT, "guest: "},
      {R"(guest: "nope" override { shares: 5 })", grpc::StatusCode::NOT_FOUND, "no guest named or with UUID \"nope\""},
      {R"(guest: "web" override { pin_bytes: 4294967296 })", grpc::StatusCode::INVALID_ARGUMENT,
       "override.pin_bytes: 4 GiB (4294967296) is above guest \"web\"'s <memory>"},
  };
  for (const Row& r : rows) {
    grpc::Status s = Set(r.request);
    EXPECT_EQ(s.error_code(), r.code) << r.request << " -> " << s.error_message();
    EXPECT_THAT(s.error_message(), StartsWith(r.prefix)) << r.request;
  }
  grpc::Status host = SetHost(R"(policy { policy: "fancy" })");
  EXPECT_EQ(host.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(host.error_message(), StartsWith("policy.policy: unknown policy \"fancy\"; known: mom, static"));
  grpc::Status reclaim = Reclaim("bytes: 0");
  EXPECT_EQ(reclaim.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reclaim.error_message(), StartsWith("bytes: "));
  {
    grpc::ClientContext ctx;
    v1::ClearGuestPolicyRequest r;
    r.set_guest("ghost");
    v1::ClearGuestPolicyResponse resp;
    EXPECT_EQ(stub_->ClearGuestPolicy(&ctx, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(ControlServiceTest, ReclaimPlansAppliesAndIsRefusedWhilePaused) {
  Start(true);
  v1::ReclaimResponse dry;
  ASSERT_TRUE(Reclaim("bytes: 268435456 dry_run: true", &dry).ok());
  EXPECT_TRUE(dry.plan().dry_run());
  EXPECT_FALSE(dry.plan().applied());
  ASSERT_EQ(dry.plan().items_size(), 1);
  EXPECT_EQ(dry.plan().items(0).guest_name(), "web");
  EXPECT_EQ(dry.plan().items(0).reclaim_bytes(), 256 * kMiB);
  ASSERT_EQ(dry.plan().skipped_size(), 1);
  EXPECT_THAT(dry.plan().skipped(0).reason(), HasSubstr("stale stats"));

  v1::ReclaimResponse real;
  ASSERT_TRUE(Reclaim("bytes: 268435456 hold_seconds: 60", &real).ok());
  EXPECT_TRUE(real.plan().applied());
  EXPECT_EQ(real.plan().hold_seconds(), 60);
  EXPECT_EQ(real.plan().hold_until_unix_micros(), absl::ToUnixMicros(clock_.Now() + absl::Seconds(60)));

  grpc::Status full = Reclaim("bytes: 10737418240 require_full: true");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(full.error_message(), HasSubstr("require_full: only"));

  ASSERT_TRUE(SetHost("policy { paused: true }").ok());
  grpc::Status paused = Reclaim("bytes: 268435456");
  EXPECT_EQ(paused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(paused.error_message(), HasSubstr("management is paused"));
  EXPECT_TRUE(Reclaim("bytes: 268435456 dry_run: true").ok());  // plans still work
  ASSERT_TRUE(SetHost("policy { paused: false }").ok());
  EXPECT_TRUE(Reclaim("bytes: 268435456").ok());
}

TEST_F(ControlServiceTest, WatchStreamsSnapshotThenChangesWithFilters) {
  Start(true);
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.set_initial_snapshot(true);
  req.add_guests("web");
  auto reader = stub_->Watch(&ctx, req);
  v1::WatchEvent e;
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.guest().change(), v1::GuestEvent::CHANGE_SNAPSHOT);
  EXPECT_EQ(e.guest().guest().name(), "web");  // db filtered out
  ASSERT_TRUE(reader->Read(&e));
  ASSERT_TRUE(e.has_snapshot_complete());
  // Wait until the stream's subscription exists, then change things.
  for (int i = 0; i < 200 && core_.hub().subscribers() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(Set(R"(guest: "db" override { priority: 5 })").ok());  // filtered out
  ASSERT_TRUE(Set(R"(guest: "web" override { priority: 7 })").ok());
  ASSERT_TRUE(SetHost("policy { paused: true }").ok());
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.guest_override().guest_name(), "web");
  EXPECT_EQ(e.guest_override().override().priority(), 7);
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_TRUE(e.host_policy().policy().paused());
  EXPECT_GT(e.sequence(), 0u);
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 200 && core_.hub().subscribers() != 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(core_.hub().subscribers(), 0);  // the handler unsubscribed
}

TEST_F(ControlServiceTest, WatchInvalidRequest) {
  Start(true);
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.add_kinds(v1::WATCH_EVENT_KIND_UNSPECIFIED);
  auto reader = stub_->Watch(&ctx, req);
  v1::WatchEvent e;
  EXPECT_FALSE(reader->Read(&e));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("kinds[0]: "));
}

TEST_F(ControlServiceTest, WithoutACoreMutationsAreUnimplementedAfterValidation) {
  Start(false);
  grpc::Status s = Set(R"(guest: "web" override { shares: 5 })");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("SetGuestPolicy is not available"));
  EXPECT_EQ(Set(R"(guest: "web" override { shares: 0 })").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reclaim("bytes: 1 dry_run: true").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(SetHost("policy { paused: true }").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  grpc::ClientContext ctx;
  v1::ListGuestsResponse list;
  EXPECT_TRUE(stub_->ListGuests(&ctx, {}, &list).ok());
}

TEST_F(ControlServiceTest, WithoutACoreWatchFollowsTheView) {
  Start(false);
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.set_initial_snapshot(true);
  auto reader = stub_->Watch(&ctx, req);
  v1::WatchEvent e;
  ASSERT_TRUE(reader->Read(&e));
  ASSERT_TRUE(reader->Read(&e));
  ASSERT_TRUE(reader->Read(&e));
  ASSERT_TRUE(e.has_snapshot_complete());
  v1::ListGuestsResponse changed = TwoGuests();
  changed.mutable_guests(1)->set_management_state(v1::MANAGEMENT_STATE_MANAGED);
  changed.mutable_guests()->RemoveLast();
  core_.SetView(changed);  // db disappears
  ASSERT_TRUE(reader->Read(&e));
  EXPECT_EQ(e.guest().change(), v1::GuestEvent::CHANGE_DISAPPEARED);
  EXPECT_EQ(e.guest().guest().name(), "db");
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();
}

}  // namespace
}  // namespace plimsoll::server

namespace plimsoll::server {
namespace {

class HostLineServiceTest : public ControlServiceTest {
 protected:
  void SetLine(absl::Time computed) {
    v1::ListGuestsResponse view = TwoGuests();
    view.mutable_host()->set_tick_seconds(5);
    google::protobuf::TextFormat::ParseFromString(R"(
      capacity_bytes: 4294967296 committed_bytes: 3221225472 burst_reserve_bytes: 1073741824
      new_guest_room_bytes: 536870912 headroom_bytes: 536870912 offered_bytes: 536870912 tick: 12
      guests: 2 guests_at_ceiling: 1)",
                                                  view.mutable_host_line());
    view.mutable_host_line()->set_computed_unix_micros(absl::ToUnixMicros(computed));
    core_.SetView(view);
  }
  grpc::Status Line(v1::HostLine* out) {
    grpc::ClientContext ctx;
    return stub_->GetHostLine(&ctx, {}, out);
  }
};

TEST_F(HostLineServiceTest, ServedThroughTheCoreAndWithdrawnWhenTheLoopStopsPublishing) {
  Start(true);
  SetLine(clock_.Now());
  v1::HostLine line;
  ASSERT_TRUE(Line(&line).ok());
  EXPECT_EQ(line.capacity_bytes(), 4096 * kMiB);
  EXPECT_EQ(line.offered_bytes(), 512 * kMiB);
  EXPECT_EQ(line.guests_at_ceiling(), 1);
  EXPECT_FALSE(line.stale());
  EXPECT_THAT(core_.calls(), ::testing::Contains("GetHostLine"));
  clock_.Advance(absl::Seconds(60));
  ASSERT_TRUE(Line(&line).ok());
  EXPECT_TRUE(line.stale());
  EXPECT_EQ(line.offered_bytes(), 0);
  EXPECT_THAT(line.stale_reason(), HasSubstr("published nothing for 60.0s"));
}

TEST_F(HostLineServiceTest, WithoutACoreTheViewsLineIsServed) {
  Start(false);
  SetLine(clock_.Now() - absl::Hours(1));
  v1::HostLine line;
  ASSERT_TRUE(Line(&line).ok());
  EXPECT_EQ(line.tick(), 12);
  EXPECT_EQ(line.offered_bytes(), 512 * kMiB);
}

}  // namespace
}  // namespace plimsoll::server
