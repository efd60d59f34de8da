#include "server/agent/reclaim_bounds_provider.h"

#include <limits>

#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

class FixedProvider : public ReclaimBoundsProvider {
 public:
  std::optional<v1::ReclaimBounds> BoundsFor(const std::string& uuid) override {
    asked = uuid;
    if (uuid == "none") return std::nullopt;
    v1::ReclaimBounds b;
    b.set_enabled(true);
    b.set_keep_bytes(123);
    b.set_max_bytes_per_second(1000);
    return b;
  }
  std::string asked;
};

TEST(ReclaimBoundsProviderTest, NoProviderNoBounds) {
  EXPECT_FALSE(BoundsForAck(nullptr, "g", 1e9).has_value());
}

TEST(ReclaimBoundsProviderTest, TheProvidersBoundsForThatGuest) {
  FixedProvider p;
  std::optional<v1::ReclaimBounds> b = BoundsForAck(&p, "g", 1e9);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(p.asked, "g");
  EXPECT_TRUE(b->enabled());
  EXPECT_EQ(b->keep_bytes(), 123u);
  EXPECT_EQ(b->max_bytes_per_second(), 1000u);
  EXPECT_FALSE(BoundsForAck(&p, "none", 1e9).has_value());
}

TEST(ReclaimBoundsProviderTest, TheRateIsCappedAtWhatTheValidatorBelieves) {
  FixedProvider p;
  EXPECT_EQ(BoundsForAck(&p, "g", 600)->max_bytes_per_second(), 600u);
  EXPECT_EQ(BoundsForAck(&p, "g", 0)->max_bytes_per_second(), 0u);
  EXPECT_EQ(BoundsForAck(&p, "g", -5)->max_bytes_per_second(), 0u);
  EXPECT_EQ(BoundsForAck(&p, "g", std::numeric_limits<double>::infinity())->max_bytes_per_second(), 1000u);
}

TEST(ReclaimBoundsProviderTest, ParseSpec) {
  absl::StatusOr<v1::ReclaimBounds> b =
      ParseReclaimBoundsSpec("keep_mib=600, keep_file_mib=64,step_mib=32,rate_mib=16.5,psi_stop=2,refault_stop=500");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->enabled());
  EXPECT_EQ(b->keep_bytes(), 600u << 20);
  EXPECT_EQ(b->keep_file_bytes(), 64u << 20);
  EXPECT_EQ(b->step_bytes(), 32u << 20);
  EXPECT_EQ(b->max_bytes_per_second(), static_cast<uint64_t>(16.5 * (1 << 20)));
  EXPECT_DOUBLE_EQ(b->psi_some_avg10_stop_pct(), 2);
  EXPECT_DOUBLE_EQ(b->refaults_per_second_stop(), 500);
  // Stops not named stay unset (the agent's own apply).
  b = ParseReclaimBoundsSpec("keep_mib=1");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_psi_some_avg10_stop_pct());
  EXPECT_EQ(b->step_bytes(), 0u);
  b = ParseReclaimBoundsSpec(" off ");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->enabled());
  for (const char* bad : {"keep_mib", "keep_mib=-1", "keep_mib=x", "keep=5", "keep_mib=nan", "step_mib=inf"}) {
    EXPECT_EQ(ParseReclaimBoundsSpec(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace plimsoll::server::agent
