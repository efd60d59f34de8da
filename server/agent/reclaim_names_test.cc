#include "server/agent/reclaim_names.h"

#include "agent/reclaim_reason.h"
#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

TEST(ReclaimNamesTest, StatesByName) {
  EXPECT_EQ(ReclaimStateName(v1::RECLAIM_STATE_ACTIVE), "active");
  EXPECT_EQ(ReclaimStateName(v1::RECLAIM_STATE_OFF_UNSUPPORTED), "off_unsupported");
  EXPECT_EQ(ReclaimStateName(v1::RECLAIM_STATE_UNSPECIFIED), "unknown");
  EXPECT_EQ(ReclaimStateName(static_cast<v1::ReclaimState>(77)), "unknown");
  for (absl::string_view name : AllReclaimStateNames()) EXPECT_NE(name, "unknown");
}

TEST(ReclaimNamesTest, OnlyDocumentedReasonsPass) {
  EXPECT_EQ(DocumentedReclaimReason("below_keep"), "below_keep");
  EXPECT_EQ(DocumentedReclaimReason("step"), "step");
  EXPECT_EQ(DocumentedReclaimReason("rate_limit"), "rate_limit");
  EXPECT_EQ(DocumentedReclaimReason(""), "unknown");
  EXPECT_EQ(DocumentedReclaimReason("step\x1b[2J"), "unknown");
  EXPECT_EQ(DocumentedReclaimReason("Step"), "unknown");
}

TEST(ReclaimNamesTest, EveryReasonTheAgentGivesPasses) {
  for (plimsoll::agent::ReclaimReason r : plimsoll::agent::kAllReclaimReasons) {
    const absl::string_view name = plimsoll::agent::ReclaimReasonName(r);
    EXPECT_NE(name, "unknown");
    EXPECT_EQ(DocumentedReclaimReason(name), name);
  }
}

}  // namespace
}  // namespace plimsoll::server::agent
