#include "ctl/short_reason.h"

#include <string>

#include "gtest/gtest.h"

namespace plimsoll::ctl {
namespace {

// As pagecache writes them (policy/pagecache_policy.cc): the decision, its numbers after " | ",
// and a note of the loop's after another.
constexpr char kTake[] =
    "pagecache: take x=0.00 ws=420MiB taken=256MiB -> 767MiB | src=agent actual=1023MiB "
    "floor=376MiB burst=0MiB ws=420MiB allow=767MiB stall_pct=0.00 refault=0MiB/s measured=1";
constexpr char kBackoff[] =
    "pagecache: backoff x=2.10 cooldown=30s granted=6.5MiB -> 315.5MiB | src=agent actual=309MiB "
    "floor=280MiB burst=0MiB ws=290MiB allow=315.5MiB stall_pct=8.86 refault=5.4MiB/s measured=1 "
    "| held: stale stats (age=31.0s), never shrink on them";

TEST(ShortReasonTest, ActionThenTheDecidingNumbers) {
  EXPECT_EQ(ShortReason(kTake, 60), "take taken=256MiB x=0.00 stall_pct=0.00 refault=0MiB/s ...");
  const std::string all = ShortReason(kTake, 0);
  EXPECT_EQ(all, "take taken=256MiB x=0.00 stall_pct=0.00 refault=0MiB/s ws=420MiB floor=376MiB burst=0MiB "
                 "allow=767MiB measured=1 ->767MiB");
  // Said by the table's columns, or twice by the policy: not repeated.
  EXPECT_EQ(all.find("actual="), std::string::npos) << all;
  EXPECT_EQ(all.find("src="), std::string::npos) << all;
  EXPECT_EQ(all.find("pagecache:"), std::string::npos) << all;
  EXPECT_EQ(all.find("ws=", all.find("ws=") + 1), std::string::npos) << all;
}

TEST(ShortReasonTest, TheLoopsNoteComesBeforeTheNumbers) {
  const std::string s = ShortReason(kBackoff, 80);
  EXPECT_EQ(s.rfind("backoff | held: stale stats (age=31.0s), never shrink on them granted=6.5MiB", 0), 0u) << s;
  EXPECT_LE(s.size(), 80u);
  // The policy's numbers after its " | " are numbers, not a note.
  EXPECT_EQ(ShortReason(kBackoff, 0).find("| src="), std::string::npos) << ShortReason(kBackoff, 0);
}

TEST(ShortReasonTest, NeverWiderThanAsked) {
  for (size_t w = 1; w < 200; ++w) {
    EXPECT_LE(ShortReason(kBackoff, w).size(), w) << "width " << w;
    EXPECT_LE(ShortReason(kTake, w).size(), w) << "width " << w;
  }
  // A first piece that does not fit is cut, and says so.
  EXPECT_EQ(ShortReason(kBackoff, 6), "bac...");
  EXPECT_EQ(ShortReason(kBackoff, 10), "backoff");
}

TEST(ShortReasonTest, HoldsLeadWithTheirCause) {
  EXPECT_EQ(ShortReason("pagecache: hold stats_fresh=false stats_age_s=31.0 target=1024MiB", 0),
            "hold stats_fresh=false stats_age_s=31.0 target=1024MiB");
  EXPECT_EQ(ShortReason("pagecache: retry churning left=85s -> 3637.4MiB | src=agent actual=3637.4MiB "
                        "floor=933.8MiB",
                        0),
            "retry churning floor=933.8MiB left=85s ->3637.4MiB");
}

TEST(ShortReasonTest, ReasonsWithoutActionKeepTheirOrder) {
  EXPECT_EQ(ShortReason("mom: shrink", 0), "shrink");
  EXPECT_EQ(ShortReason("mom: host_free_pct=12.0 used=800MiB -> 700MiB", 0),
            "host_free_pct=12.0 used=800MiB ->700MiB");
  EXPECT_EQ(ShortReason("pinned at 700MiB by override", 0), "pinned at 700MiB by override");
  EXPECT_EQ(ShortReason("", 20), "");
}

}  // namespace
}  // namespace plimsoll::ctl
