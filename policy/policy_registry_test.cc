#include <memory>
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

TEST(PolicyRegistryTest, NamesAreEveryPolicy) {
  EXPECT_THAT(PolicyNames(), ElementsAre("mom", "static", "pagecache", "proxmox", "pagecache_law"));
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
  for (const char* name : {"", "Mom", "Proxmox", "mom ", "page_cache"}) {
    absl::StatusOr<std::unique_ptr<Policy>> policy = MakePolicy(name);
    ASSERT_FALSE(policy.ok()) << name;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(policy.status().message(),
                HasSubstr("known policies: mom, static, pagecache, proxmox, pagecache_law"));
  }
  EXPECT_THAT(MakePolicy("Proxmox").status().message(), HasSubstr("unknown policy \"Proxmox\""));
  EXPECT_THAT(MakePolicy("a\nb").status().message(), HasSubstr("\"a\\nb\""));
}

TEST(PolicyRegistryTest, PagecacheLawVariantsNameTheirBadParameter) {
  absl::StatusOr<std::unique_ptr<Policy>> ok = MakePolicy("pagecache_law:profile_ratio=0:probe_fraction=0.01");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->name(), "pagecache_law");
  EXPECT_THAT(MakePolicy("pagecache_law:bogus=1").status().message(),
              HasSubstr("unknown pagecache_law parameter \"bogus\"; known: headroom_min_mib,"));
  EXPECT_THAT(MakePolicy("pagecache_law:probe_fraction=2").status().message(),
              HasSubstr("probe_fraction=2 is outside [0, 1]"));
  EXPECT_THAT(MakePolicy("pagecache_law:probe_fraction").status().message(),
              HasSubstr("\"probe_fraction\" is not name=number"));
}

}  // namespace
}  // namespace plimsoll::policy
