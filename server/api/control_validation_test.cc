#include "server/api/control_validation.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

template <typename M>
M Parse(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

// One row: a request in text format, the expected code and the expected
// beginning of the message (the field it names).
struct Case {
  std::string request;
  absl::StatusCode code;
  std::string message_prefix;
};

void ExpectStatus(const absl::Status& s, const Case& c) {
  EXPECT_EQ(s.code(), c.code) << c.request << " -> " << s;
  if (!c.message_prefix.empty()) {
    EXPECT_THAT(std::string(s.message()), StartsWith(c.message_prefix)) << c.request;
  }
}

constexpr auto kOk = absl::StatusCode::kOk;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;

TEST(ValidateSetGuestPolicyTest, Table) {
  const std::vector<Case> cases = {
      {R"(guest: "web" override { min_bytes: 536870912 })", kOk, ""},
      {R"(guest: "web" override { exclude: false })", kOk, ""},
      {R"(guest: "web" override { note: "db primary" })", kOk, ""},
      {R"(guest: "web" override { min_bytes: 536870912 max_bytes: 1073741824 pin_bytes: 805306368
                                 shares: 10000 priority: -100 })",
       kOk, ""},
      {R"(override { min_bytes: 536870912 })", kInvalid, "guest: "},
      {R"(guest: "web")", kInvalid, "override: no setting given"},
      {R"(guest: "web" override { guest_uuid: "x" })", kInvalid, "override: no setting given"},
      {R"(guest: "web" override { min_bytes: 512 })", kInvalid, "override.min_bytes: 512 bytes is below"},
      {R"(guest: "web" override { min_bytes: -1 })", kInvalid, "override.min_bytes: "},
      {R"(guest: "web" override { max_bytes: 0 })", kInvalid, "override.max_bytes: "},
      {R"(guest: "web" override { max_bytes: 2251799813685248 })", kInvalid, "override.max_bytes: 2 PiB"},
      {R"(guest: "web" override { pin_bytes: 1048576 })", kInvalid, "override.pin_bytes: 1 MiB"},
      {R"(guest: "web" override { shares: 0 })", kInvalid, "override.shares: 0 is outside [1, 10000]"},
      {R"(guest: "web" override { shares: 10001 })", kInvalid, "override.shares: "},
      {R"(guest: "web" override { priority: 101 })", kInvalid, "override.priority: 101 is outside"},
      {R"(guest: "web" override { priority: -101 })", kInvalid, "override.priority: "},
      {R"(guest: "web" override { min_bytes: 1073741824 max_bytes: 536870912 })", kInvalid,
       "override.min_bytes: 1 GiB (1073741824) is above override.max_bytes"},
      {R"(guest: "web" override { pin_bytes: 268435456 min_bytes: 536870912 })", kInvalid,
       "override.pin_bytes: 256 MiB (268435456) is below override.min_bytes"},
      {R"(guest: "web" override { pin_bytes: 1073741824 max_bytes: 536870912 })", kInvalid,
       "override.pin_bytes: 1 GiB (1073741824) is above override.max_bytes"},
      {R"(guest: "web" override { pin_bytes: 1073741824 exclude: true })", kInvalid,
       "override.pin_bytes: cannot be combined with override.exclude"},
      {R"(guest: "web" override { pin_bytes: 1073741824 exclude: false })", kOk, ""},
      {"guest: \"web\" override { note: \"" + std::string(257, 'x') + "\" }", kInvalid,
       "override.note: 257 bytes"},
  };
  for (const Case& c : cases) {
    ExpectStatus(ValidateSetGuestPolicy(Parse<v1::SetGuestPolicyRequest>(c.request)), c);
  }
}

TEST(ValidateOverrideTest, AgainstTheGuestsMemory) {
  const auto guest = Parse<v1::Guest>(R"(name: "web" max_bytes: 2147483648)");
  const std::vector<Case> cases = {
      {"pin_bytes: 2147483648", kOk, ""},
      {"pin_bytes: 2147483649", kInvalid, "override.pin_bytes: 2 GiB (2147483649) is above guest \"web\"'s <memory>"},
      {"max_bytes: 4294967296", kInvalid, "override.max_bytes: 4 GiB (4294967296) is above guest \"web\""},
      {"min_bytes: 3221225472", kInvalid, "override.min_bytes: 3 GiB"},
  };
  for (const Case& c : cases) {
    ExpectStatus(ValidateOverride(Parse<v1::GuestOverride>(c.request), "override", &guest), c);
  }
  // A guest whose <memory> is unknown (0) is not checked against.
  const auto unknown = Parse<v1::Guest>(R"(name: "new")");
  EXPECT_TRUE(ValidateOverride(Parse<v1::GuestOverride>("pin_bytes: 4294967296"), "override", &unknown).ok());
}

TEST(ValidateClearGuestPolicyTest, Table) {
  const std::vector<Case> cases = {
      {R"(guest: "web")", kOk, ""},
      {R"(guest: "web" fields: "pin_bytes" fields: "exclude" fields: "note")", kOk, ""},
      {R"(fields: "pin_bytes")", kInvalid, "guest: "},
      {R"(guest: "web" fields: "pin_bytes" fields: "pin")", kInvalid,
       "fields[1]: \"pin\" is not a GuestOverride setting; settings are: min_bytes, max_bytes, shares, "
       "priority, exclude, pin_bytes, note"},
      {R"(guest: "web" fields: "guest_uuid")", kInvalid, "fields[0]: "},
  };
  for (const Case& c : cases) {
    ExpectStatus(ValidateClearGuestPolicy(Parse<v1::ClearGuestPolicyRequest>(c.request)), c);
  }
}

TEST(ValidateSetHostPolicyTest, Table) {
  const std::vector<std::string> policies = {"mom", "static"};
  const std::vector<Case> cases = {
      {R"(policy { paused: true })", kOk, ""},
      {R"(policy { paused: false })", kOk, ""},
      {R"(policy { host_reserve_bytes: 0 })", kOk, ""},
      {R"(policy { guest_memory_budget_bytes: 8589934592 policy: "static" })", kOk, ""},
      {R"(clear_fields: "guest_memory_budget_bytes")", kOk, ""},
      {"", kInvalid, "policy: nothing to change"},
      {R"(policy { host_reserve_bytes: -1 })", kInvalid, "policy.host_reserve_bytes: -1 bytes is outside"},
      {R"(policy { guest_memory_budget_bytes: 1024 })", kInvalid, "policy.guest_memory_budget_bytes: "},
      {R"(policy { policy: "fancy" })", kInvalid, "policy.policy: unknown policy \"fancy\"; known: mom, static"},
      {R"(policy { policy: "static:x=1" })", kOk, ""},
      {R"(policy { policy: "fancy:x=1" })", kInvalid, "policy.policy: unknown policy \"fancy:x=1\"; known: mom, static"},
      {R"(clear_fields: "budget")", kInvalid, "clear_fields[0]: \"budget\" is not a HostPolicy setting"},
      {R"(policy { paused: true } clear_fields: "paused")", kInvalid, "clear_fields[0]: \"paused\" is also set"},
  };
  for (const Case& c : cases) {
    ExpectStatus(ValidateSetHostPolicy(Parse<v1::SetHostPolicyRequest>(c.request), policies), c);
  }
  // Without a list of policies, names are left to the core.
  EXPECT_TRUE(ValidateSetHostPolicy(Parse<v1::SetHostPolicyRequest>(R"(policy { policy: "fancy" })"), {}).ok());
}

TEST(ValidateReclaimTest, Table) {
  const std::vector<Case> cases = {
      {"bytes: 1073741824", kOk, ""},
      {"bytes: 1 dry_run: true hold_seconds: 86400", kOk, ""},
      {"bytes: 1 hold_seconds: 0.5", kOk, ""},
      {"", kInvalid, "bytes: 0 must be positive"},
      {"bytes: -5", kInvalid, "bytes: -5 must be positive"},
      {"bytes: 2251799813685248", kInvalid, "bytes: 2 PiB"},
      {"bytes: 1 hold_seconds: 0", kInvalid, "hold_seconds: 0 is outside (0, 86400]"},
      {"bytes: 1 hold_seconds: -3", kInvalid, "hold_seconds: "},
      {"bytes: 1 hold_seconds: 86401", kInvalid, "hold_seconds: "},
      {"bytes: 1 hold_seconds: nan", kInvalid, "hold_seconds: "},
      {"bytes: 1 hold_seconds: inf", kInvalid, "hold_seconds: "},
  };
  for (const Case& c : cases) ExpectStatus(ValidateReclaim(Parse<v1::ReclaimRequest>(c.request)), c);
  EXPECT_EQ(ReclaimHoldSeconds(Parse<v1::ReclaimRequest>("bytes: 1")), 300);
  EXPECT_EQ(ReclaimHoldSeconds(Parse<v1::ReclaimRequest>("bytes: 1 hold_seconds: 60")), 60);
}

TEST(CheckReclaimAllowedTest, PausedAndDryRunDaemonRefuseOnlyRealReclaims) {
  struct Row {
    bool request_dry_run, paused, daemon_dry_run;
    absl::StatusCode code;
    std::string prefix;
  };
  const std::vector<Row> rows = {
      {false, false, false, kOk, ""},
      {true, true, true, kOk, ""},
      {false, true, false, kPrecondition, "management is paused"},
      {false, true, true, kPrecondition, "management is paused"},
      {false, false, true, kPrecondition, "plimsolld runs with dry_run"},
  };
  for (const Row& r : rows) {
    v1::ReclaimRequest req;
    req.set_bytes(1);
    req.set_dry_run(r.request_dry_run);
    ExpectStatus(CheckReclaimAllowed(req, r.paused, r.daemon_dry_run), {"", r.code, r.prefix});
  }
}

TEST(CheckReclaimPlanSufficientTest, OnlyRequireFullRefusesAShortPlan) {
  auto plan = Parse<v1::ReclaimPlan>(R"(planned_bytes: 536870912 summary: "2 guests at floor")");
  auto req = Parse<v1::ReclaimRequest>("bytes: 1073741824");
  EXPECT_TRUE(CheckReclaimPlanSufficient(req, plan).ok());
  req.set_require_full(true);
  absl::Status s = CheckReclaimPlanSufficient(req, plan);
  EXPECT_EQ(s.code(), kPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("only 512 MiB (536870912) of the requested 1 GiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("2 guests at floor"));
  plan.set_planned_bytes(1073741824);
  EXPECT_TRUE(CheckReclaimPlanSufficient(req, plan).ok());
}

TEST(ValidateWatchTest, Table) {
  const std::vector<Case> cases = {
      {"", kOk, ""},
      {R"(guests: "web" kinds: WATCH_EVENT_KIND_DECISION include_holds: true initial_snapshot: true)", kOk, ""},
      {R"(guests: "web" guests: "")", kInvalid, "guests[1]: empty"},
      {R"(kinds: WATCH_EVENT_KIND_UNSPECIFIED)", kInvalid, "kinds[0]: 0 is not a WatchEventKind"},
      {R"(kinds: WATCH_EVENT_KIND_GUEST kinds: 99)", kInvalid, "kinds[1]: 99 is not"},
  };
  for (const Case& c : cases) ExpectStatus(ValidateWatch(Parse<v1::WatchRequest>(c.request)), c);
}

TEST(MergeOverrideTest, MergeKeepsUnsetSettingsAndReplaceDropsThem) {
  const auto stored = Parse<v1::GuestOverride>(
      R"(min_bytes: 536870912 shares: 200 note: "keep" guest_uuid: "u1" guest_name: "web"
         updated_by: "unix" updated_unix_micros: 5)");
  const auto update = Parse<v1::GuestOverride>(R"(shares: 300 exclude: false guest_uuid: "evil" updated_by: "x")");
  const auto merged = MergeOverride(stored, update, /*replace=*/false);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      merged, Parse<v1::GuestOverride>(R"(min_bytes: 536870912 shares: 300 exclude: false note: "keep"
                                          guest_uuid: "u1" guest_name: "web" updated_by: "unix"
                                          updated_unix_micros: 5)")))
      << merged.DebugString();
  const auto replaced = MergeOverride(stored, update, /*replace=*/true);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      replaced, Parse<v1::GuestOverride>(R"(shares: 300 exclude: false guest_uuid: "u1" guest_name: "web"
                                            updated_by: "unix" updated_unix_micros: 5)")))
      << replaced.DebugString();
}

TEST(ClearOverrideSettingsTest, NamedOrAll) {
  const auto o = Parse<v1::GuestOverride>(R"(min_bytes: 536870912 pin_bytes: 805306368 guest_uuid: "u1")");
  const auto some = ClearOverrideSettings(o, {"pin_bytes"});
  EXPECT_TRUE(some.has_min_bytes());
  EXPECT_FALSE(some.has_pin_bytes());
  EXPECT_FALSE(OverrideIsEmpty(some));
  const auto all = ClearOverrideSettings(o, {});
  EXPECT_TRUE(OverrideIsEmpty(all));
  EXPECT_EQ(all.guest_uuid(), "u1");
}

TEST(MergeHostPolicyTest, SetReplacesAndClearReverts) {
  const auto stored = Parse<v1::HostPolicy>(R"(guest_memory_budget_bytes: 8589934592 paused: true updated_by: "a")");
  const auto r = Parse<v1::SetHostPolicyRequest>(
      R"(policy { paused: false policy: "static" updated_by: "ignored" } clear_fields: "guest_memory_budget_bytes")");
  const auto merged = MergeHostPolicy(stored, r);
  EXPECT_FALSE(merged.has_guest_memory_budget_bytes());
  EXPECT_TRUE(merged.has_paused());
  EXPECT_FALSE(merged.paused());
  EXPECT_EQ(merged.policy(), "static");
  EXPECT_EQ(merged.updated_by(), "a");
}

TEST(DescribeBytesTest, ExactAndReadable) {
  EXPECT_EQ(DescribeBytes(512), "512 bytes");
  EXPECT_EQ(DescribeBytes(1536LL << 20), "1.5 GiB (1610612736)");
  EXPECT_EQ(DescribeBytes(64LL << 20), "64 MiB (67108864)");
  EXPECT_EQ(DescribeBytes(3LL << 40), "3 TiB (3298534883328)");
}

TEST(LooksLikeUuidTest, CanonicalFormOnly) {
  EXPECT_TRUE(LooksLikeUuid("aaaaaaaa-0000-0000-0000-000000000001"));
  EXPECT_TRUE(LooksLikeUuid("AAAAAAAA-0000-0000-0000-00000000000F"));
  EXPECT_FALSE(LooksLikeUuid("aaaaaaaa00000000000000000000000000001"));
  EXPECT_FALSE(LooksLikeUuid("web"));
  EXPECT_FALSE(LooksLikeUuid("gaaaaaaa-0000-0000-0000-000000000001"));
}

}  // namespace
}  // namespace plimsoll::server
