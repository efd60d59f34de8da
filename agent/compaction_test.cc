#include "agent/compaction.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

constexpr uint64_t kMib = 1 << 20;

TEST(CompactionDueTest, OncePerRoundThatFreedEnough) {
  const CompactionOptions o;  // 32 MiB, settle 5 s, 30 s apart
  const absl::Duration inf = absl::InfiniteDuration();
  struct Case {
    const char* name;
    uint64_t freed;
    absl::Duration since_step, since_compaction;
    bool due;
  };
  const Case cases[] = {
      {"a round that freed 400 MiB, over for 5 s", 400 * kMib, absl::Seconds(5), inf, true},
      {"between two steps of a round", 400 * kMib, absl::Seconds(2), inf, false},
      {"freed too little to be worth it", 31 * kMib, absl::Seconds(10), inf, false},
      {"exactly the least", 32 * kMib, absl::Seconds(5), absl::Seconds(30), true},
      {"compacted 20 s ago", 400 * kMib, absl::Seconds(10), absl::Seconds(20), false},
      {"never stepped", 0, inf, inf, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CompactionDue(c.freed, c.since_step, c.since_compaction, o), c.due) << c.name;
  }
}

TEST(ProcCompactorTest, WritesOneToTheFile) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/compact_memory";
  { std::ofstream(path) << ""; }
  auto c = ProcCompactor::Open(path);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Compact().ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "1");
}

TEST(ProcCompactorTest, AMissingFileSaysWhy) {
  auto c = ProcCompactor::Open(std::string(getenv("TEST_TMPDIR")) + "/nothing_here");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("CONFIG_COMPACTION"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace plimsoll::agent
