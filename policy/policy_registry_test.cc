#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"

namespace plimsoll::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(PolicyRegistryTest, NamesAreEveryPolicy) {
  EXPECT_THAT(PolicyNames(), ElementsAre("mom", "static", "pagecache", "proxmox"));
}

TEST(PolicyRegistryTest, EveryNameBuildsAPolicyOfThatName) {
  for (const std::string& name : PolicyNames()) {
    absl::StatusOr<std::unique_ptr<Policy>> policy = MakePolicy(name);
    ASSERT_TRUE(policy.ok()) << policy.status();
    ASSERT_NE(*policy, nullptr);
    EXPECT_EQ((*policy)->name(), name);
    // Every policy answers an empty snapshot with no decisions.
    EXPECT_TRUE((*policy)->Decide(Snapshot(), PolicyState()).guests.empty());
  }
}

TEST(PolicyRegistryTest, UnknownNameListsKnownNames) {
  for (const char* name : {"", "Mom", "Proxmox", "mom ", "page_cache", "pagecache_law"}) {
    absl::StatusOr<std::unique_ptr<Policy>> policy = MakePolicy(name);
    ASSERT_FALSE(policy.ok()) << name;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(policy.status().message(),
                HasSubstr("known policies: mom, static, pagecache, proxmox"));
  }
  EXPECT_THAT(MakePolicy("Proxmox").status().message(), HasSubstr("unknown policy \"Proxmox\""));
  EXPECT_THAT(MakePolicy("a\nb").status().message(), HasSubstr("\"a\\nb\""));
}

TEST(PolicyRegistryTest, PagecacheVariantsNameTheirBadParameter) {
  absl::StatusOr<std::unique_ptr<Policy>> ok = MakePolicy("pagecache:profile_ratio=0:probe_fraction=0.01");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->name(), "pagecache:profile_ratio=0:probe_fraction=0.01");
  EXPECT_THAT(MakePolicy("pagecache:bogus=1").status().message(),
              HasSubstr("unknown pagecache parameter \"bogus\"; known: headroom_min_mib,"));
  EXPECT_THAT(MakePolicy("pagecache:probe_fraction=2").status().message(),
              HasSubstr("probe_fraction=2 is outside [0, 1]"));
  EXPECT_THAT(MakePolicy("pagecache:probe_fraction").status().message(),
              HasSubstr("\"probe_fraction\" is not name=number"));
}

// Configs and stored host policies written for an earlier plimsolld call the pagecache policy
// "pagecache_law".
TEST(PolicyRegistryTest, TheLawsOldNameIsRenamedPagecache) {
  EXPECT_THAT(RenamedPolicy("pagecache_law"), Optional(std::string("pagecache")));
  EXPECT_THAT(RenamedPolicy("pagecache_law:profile_ratio=0"),
              Optional(std::string("pagecache:profile_ratio=0")));
  for (const std::string& name : PolicyNames()) EXPECT_EQ(RenamedPolicy(name), std::nullopt) << name;
  EXPECT_EQ(RenamedPolicy("pagecache:profile_ratio=0"), std::nullopt);
  EXPECT_EQ(RenamedPolicy("pagecache_lawless"), std::nullopt);
  EXPECT_EQ(RenamedPolicy(""), std::nullopt);
  // What a renamed name becomes is a policy MakePolicy builds.
  absl::StatusOr<std::unique_ptr<Policy>> made = MakePolicy(*RenamedPolicy("pagecache_law:profile_ratio=0"));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->name(), "pagecache:profile_ratio=0");
}

}  // namespace
}  // namespace plimsoll::policy
