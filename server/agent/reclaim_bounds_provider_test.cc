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

}  // namespace
}  // namespace plimsoll::server::agent
