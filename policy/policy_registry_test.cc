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
  for (const char* name : {"", "Mom", "Proxmox", "mom ", "page_cache"}) {
    absl::StatusOr<std::unique_ptr<Policy>> policy = MakePolicy(name);
    ASSERT_FALSE(policy.ok()) << name;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(policy.status().message(),
                HasSubstr("known policies: mom, static, pagecache, proxmox"));
  }
  EXPECT_THAT(MakePolicy("Proxmox").status().message(), HasSubstr("unknown policy \"Proxmox\""));
  EXPECT_THAT(MakePolicy("a\nb").status().message(), HasSubstr("\"a\\nb\""));
}

}  // namespace
}  // namespace plimsoll::policy
