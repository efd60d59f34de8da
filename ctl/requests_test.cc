#include "ctl/requests.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::ctl {
namespace {

using ::testing::HasSubstr;

TEST(ParseByteSizeTest, Table) {
  const std::vector<std::pair<std::string, int64_t>> ok = {
      {"0", 0},
      {"1073741824", 1073741824},
      {"512M", 512LL << 20},
      {"512m", 512LL << 20},
      {"512MiB", 512LL << 20},
      {"512MB", 512LL << 20},
      {"512Mi", 512LL << 20},
      {"2G", 2LL << 30},
      {"1.5GiB", 1536LL << 20},
      {"1.5g", 1536LL << 20},
      {" 64k ", 64LL << 10},
      {"1T", 1LL << 40},
      {"100B", 100},
      {"0.5K", 512},
  };
  for (const auto& [text, want] : ok) {
    auto got = ParseByteSize(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, want) << text;
  }
  for (const char* bad : {"", "G", "-1G", "1X", "1.2.3G", "12 parsecs", "99999999999T", "1e3"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseByteSize("1X").status().message()), HasSubstr("unknown unit"));
}

TEST(ParseSecondsTest, Table) {
  EXPECT_EQ(*ParseSeconds("300"), 300);
  EXPECT_EQ(*ParseSeconds("300s"), 300);
  EXPECT_EQ(*ParseSeconds("5m"), 300);
  EXPECT_EQ(*ParseSeconds("1h30m"), 5400);
  EXPECT_EQ(*ParseSeconds("0.5"), 0.5);
  EXPECT_FALSE(ParseSeconds("soon").ok());
}

TEST(BuildSetRequestTest, EveryFlag) {
  Flags f = {{"min", "512M"}, {"max", "2G"}, {"shares", "200"}, {"priority", "-5"},
             {"exclude", ""},   {"pin", "1G"}, {"note", "why"},   {"force", ""},  {"replace", ""}};
  auto r = BuildSetRequest("web", f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->guest(), "web");
  EXPECT_EQ(r->override().min_bytes(), 512LL << 20);
  EXPECT_EQ(r->override().max_bytes(), 2LL << 30);
  EXPECT_EQ(r->override().shares(), 200u);
  EXPECT_EQ(r->override().priority(), -5);
  EXPECT_TRUE(r->override().exclude());
  EXPECT_EQ(r->override().pin_bytes(), 1LL << 30);
  EXPECT_EQ(r->override().note(), "why");
  EXPECT_TRUE(r->override().force());
  EXPECT_TRUE(r->replace());
  // Only what is given is set.
  auto one = BuildSetRequest("web", {{"exclude", "false"}});
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->override().has_exclude());
  EXPECT_FALSE(one->override().exclude());
  EXPECT_FALSE(one->override().has_pin_bytes());
  EXPECT_FALSE(one->replace());
}

TEST(BuildSetRequestTest, ReadableErrors) {
  struct Row {
    Flags flags;
    std::string error;
  };
  const std::vector<Row> rows = {
      {{{"pin", "lots"}}, "--pin: \"lots\" is not a size"},
      {{{"shares", "x"}}, "--shares: \"x\" is not a number"},
      {{{"exclude", "maybe"}}, "--exclude: \"maybe\" is not true or false"},
      {{{"pin", "1G"}, {"pin", "2G"}}, "--pin: given more than once"},
      {{{"budget", "1G"}}, "--budget: not a flag of \"set\"; its flags are --min"},
  };
  for (const Row& r : rows) {
    auto got = BuildSetRequest("web", r.flags);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(r.error));
  }
}

TEST(BuildClearRequestTest, ShortAndLongFieldNames) {
  auto r = BuildClearRequest("web", {{"fields", "pin, exclude,max_bytes"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::vector<std::string>(r->fields().begin(), r->fields().end()),
            (std::vector<std::string>{"pin_bytes", "exclude", "max_bytes"}));
  EXPECT_EQ(BuildClearRequest("web", {})->fields_size(), 0);
}

TEST(BuildHostSetRequestTest, FlagsAndConflicts) {
  auto r = BuildHostSetRequest({{"budget", "8G"}, {"reserve", "1G"}, {"policy", "static"}, {"pause", ""}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy().guest_memory_budget_bytes(), 8LL << 30);
  EXPECT_EQ(r->policy().host_reserve_bytes(), 1LL << 30);
  EXPECT_EQ(r->policy().policy(), "static");
  EXPECT_TRUE(r->policy().paused());
  auto resume = BuildHostSetRequest({{"resume", ""}, {"clear", "budget,reserve"}});
  ASSERT_TRUE(resume.ok());
  EXPECT_TRUE(resume->policy().has_paused());
  EXPECT_FALSE(resume->policy().paused());
  EXPECT_EQ(resume->clear_fields(0), "guest_memory_budget_bytes");
  EXPECT_EQ(resume->clear_fields(1), "host_reserve_bytes");
  EXPECT_THAT(std::string(BuildHostSetRequest({{"pause", ""}, {"resume", ""}}).status().message()),
              HasSubstr("choose one"));
}

TEST(BuildReclaimRequestTest, SizeHoldAndFlags) {
  auto r = BuildReclaimRequest("1.5G", {{"dry-run", ""}, {"hold", "10m"}, {"require-full", ""}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes(), 1536LL << 20);
  EXPECT_TRUE(r->dry_run());
  EXPECT_TRUE(r->require_full());
  EXPECT_EQ(r->hold_seconds(), 600);
  auto plain = BuildReclaimRequest("2G", {});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_hold_seconds());
  EXPECT_THAT(std::string(BuildReclaimRequest("much", {}).status().message()), HasSubstr("BYTES: "));
}

TEST(BuildWatchRequestTest, GuestsKindsAndOptions) {
  auto r = BuildWatchRequest({{"guest", "web"}, {"guest", "db"}, {"kinds", "decision,host,override,line"},
                              {"holds", ""}, {"snapshot", ""}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->guests_size(), 2);
  ASSERT_EQ(r->kinds_size(), 4);
  EXPECT_EQ(r->kinds(0), v1::WATCH_EVENT_KIND_DECISION);
  EXPECT_EQ(r->kinds(1), v1::WATCH_EVENT_KIND_HOST_POLICY);
  EXPECT_EQ(r->kinds(2), v1::WATCH_EVENT_KIND_GUEST_OVERRIDE);
  EXPECT_EQ(r->kinds(3), v1::WATCH_EVENT_KIND_HOST_LINE);
  EXPECT_TRUE(r->include_holds());
  EXPECT_TRUE(r->initial_snapshot());
  EXPECT_THAT(std::string(BuildWatchRequest({{"kinds", "gossip"}}).status().message()),
              HasSubstr("\"gossip\" is not one of"));
}

}  // namespace
}  // namespace plimsoll::ctl
