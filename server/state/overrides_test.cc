#include "server/state/overrides.h"

#include "server/api/control_validation.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMiB = 1LL << 20;
const GuestKey kWeb{"aaaaaaaa-0000-0000-0000-000000000001", "web"};
const GuestKey kDb{"aaaaaaaa-0000-0000-0000-000000000002", "db"};

std::string NewDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base ? base : "/tmp", "/ovr-XXXXXX");
  return mkdtemp(tmpl.data());
}

v1::GuestOverride Pin(int64_t bytes) {
  v1::GuestOverride o;
  o.set_pin_bytes(bytes);
  return o;
}

TEST(OverrideStoreTest, SetMergesStampsAndPublishes) {
  FakeClock clock;
  OverrideStore store(&clock);
  auto first = store.Set(kWeb, Pin(1024 * kMiB), false, "unix");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->guest_uuid(), kWeb.uuid);
  EXPECT_EQ(first->guest_name(), "web");
  EXPECT_EQ(first->updated_by(), "unix");
  EXPECT_EQ(first->updated_unix_micros(), absl::ToUnixMicros(clock.Now()));
  v1::GuestOverride shares;
  shares.set_shares(500);
  auto second = store.Set(kWeb, shares, false, "CN=ops");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->pin_bytes(), 1024 * kMiB);
  EXPECT_EQ(second->shares(), 500u);
  EXPECT_EQ(second->updated_by(), "CN=ops");
  auto snap = store.snapshot();
  ASSERT_EQ(snap->guests.size(), 1u);
  EXPECT_EQ(snap->guests.at(kWeb.uuid).shares(), 500u);
  EXPECT_EQ(snap->generation, 0u);  // memory-only
}

TEST(OverrideStoreTest, MergedResultIsValidatedAgainstStoredSettingsAndTheGuest) {
  FakeClock clock;
  OverrideStore store(&clock);
  ASSERT_TRUE(store.Set(kWeb, Pin(1024 * kMiB), false, "unix").ok());
  v1::GuestOverride max;
  max.set_max_bytes(512 * kMiB);
  auto s = store.Set(kWeb, max, false, "unix");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("override.pin_bytes"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("together with the stored override"));
  // replace drops the pin, so the same max is fine.
  EXPECT_TRUE(store.Set(kWeb, max, true, "unix").ok());
  EXPECT_FALSE(store.Find("web")->has_pin_bytes());
  // Against the guest's <memory>.
  v1::Guest guest;
  guest.set_name("web");
  guest.set_max_bytes(2048 * kMiB);
  auto big = store.Set(kWeb, Pin(4096 * kMiB), true, "unix", &guest);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("<memory>"));
  EXPECT_EQ(store.Find("web")->max_bytes(), 512 * kMiB);  // refused change changed nothing
}

TEST(OverrideStoreTest, ClearSomeOrAllAndIdempotent) {
  FakeClock clock;
  OverrideStore store(&clock);
  v1::GuestOverride o = Pin(1024 * kMiB);
  o.set_priority(5);
  ASSERT_TRUE(store.Set(kWeb, o, false, "unix").ok());
  auto some = store.Clear(kWeb, {"pin_bytes"}, "unix");
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->existed);
  EXPECT_FALSE(some->remaining.has_pin_bytes());
  EXPECT_EQ(some->remaining.priority(), 5);
  auto again = store.Clear(kWeb, {"pin_bytes"}, "unix");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->existed);
  auto all = store.Clear(kWeb, {}, "unix");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->existed);
  EXPECT_TRUE(OverrideIsEmpty(all->remaining));
  EXPECT_TRUE(store.List().empty());
  EXPECT_FALSE(store.Clear(kWeb, {}, "unix")->existed);
}

TEST(OverrideStoreTest, FindByUuidAnyCaseOrLastName) {
  FakeClock clock;
  OverrideStore store(&clock);
  ASSERT_TRUE(store.Set(kWeb, Pin(1024 * kMiB), false, "unix").ok());
  ASSERT_TRUE(store.Set(kDb, Pin(1024 * kMiB), false, "unix").ok());
  EXPECT_EQ(store.Find("AAAAAAAA-0000-0000-0000-000000000001")->guest_name(), "web");
  EXPECT_EQ(store.Find("db")->guest_uuid(), kDb.uuid);
  EXPECT_FALSE(store.Find("nope").has_value());
  const auto list = store.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].guest_name(), "db");
  EXPECT_EQ(list[1].guest_name(), "web");
}

TEST(OverrideStoreTest, PersistsAcrossRestartsWithHostPolicy) {
  FakeClock clock;
  const std::string path = NewDir() + "/state.textproto";
  {
    auto store = OverrideStore::Open(std::make_unique<StateStore>(path, &clock), &clock);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Set(kWeb, Pin(1024 * kMiB), false, "unix").ok());
    v1::SetHostPolicyRequest r;
    r.mutable_policy()->set_paused(true);
    r.mutable_policy()->set_guest_memory_budget_bytes(8192 * kMiB);
    auto hp = (*store)->SetHostPolicy(r, "CN=admin");
    ASSERT_TRUE(hp.ok());
    EXPECT_EQ(hp->updated_by(), "CN=admin");
    EXPECT_EQ((*store)->snapshot()->generation, 2u);
  }
  auto reopened = OverrideStore::Open(std::make_unique<StateStore>(path, &clock), &clock);
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->load_problem().ok());
  EXPECT_EQ((*reopened)->state_file(), path);
  EXPECT_EQ((*reopened)->Find(kWeb.uuid)->pin_bytes(), 1024 * kMiB);
  EXPECT_TRUE((*reopened)->host_policy().paused());
  EXPECT_EQ((*reopened)->host_policy().guest_memory_budget_bytes(), 8192 * kMiB);
}

TEST(OverrideStoreTest, CorruptStateIsReportedAndTheStoreStartsEmpty) {
  FakeClock clock;
  const std::string path = NewDir() + "/state.textproto";
  std::ofstream(path) << "version: 1\n";  // no checksum line
  auto store = OverrideStore::Open(std::make_unique<StateStore>(path, &clock), &clock);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->load_problem().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string((*store)->load_problem().message()), HasSubstr(".corrupt-"));
  EXPECT_TRUE((*store)->List().empty());
}

TEST(OverrideStoreTest, AFailedWriteRefusesTheChange) {
  FakeClock clock;
  const std::string path = NewDir() + "/state.textproto";
  auto store = OverrideStore::Open(std::make_unique<StateStore>(path, &clock), &clock);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Set(kWeb, Pin(1024 * kMiB), false, "unix").ok());
  std::filesystem::create_directory(path + ".tmp");  // the next write fails
  auto s = (*store)->Set(kWeb, Pin(2048 * kMiB), false, "unix");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("the change was not made"));
  EXPECT_EQ((*store)->Find("web")->pin_bytes(), 1024 * kMiB);
  EXPECT_FALSE((*store)->Clear(kWeb, {}, "unix").ok());
  EXPECT_TRUE((*store)->Find("web").has_value());
}

}  // namespace
}  // namespace plimsoll::server
