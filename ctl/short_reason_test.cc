#include "ctl/short_reason.h"

#include <string>

#include "gtest/gtest.h"

namespace plimsoll::ctl {
namespace {

// As pagecache writes them (policy/pagecache_policy.cc), 300-odd characters with the loop's note.
constexpr char kReclaim[] =
    "pagecache: src=agent actual=1023MiB hard=120MiB cache=707MiB free=12MiB floor=376MiB "
    "ws=200MiB allow=1024MiB stall_pct=0.00 refault=0.0MiB/s severity=0.00 level=calm "
    "new_report=1 action=reclaim taken=256MiB -> 767MiB state=ok";
constexpr char kBackoff[] =
    "pagecache: src=agent actual=309MiB hard=150MiB cache=120MiB free=8MiB floor=280MiB ws=290MiB "
    "allow=1024MiB stall_pct=8.86 refault=5.4MiB/s severity=1.20 level=pressured new_report=1 "
    "action=backoff granted=6.5MiB -> 315.5MiB state=ok | held: stale stats (age=31.0s), never "
    "shrink on them";

TEST(ShortReasonTest, ActionThenTheDecidingNumbers) {
  EXPECT_EQ(ShortReason(kReclaim, 60), "reclaim taken=256MiB stall_pct=0.00 refault=0.0MiB/s ...");
  const std::string all = ShortReason(kReclaim, 0);
  EXPECT_EQ(all.rfind("reclaim taken=256MiB stall_pct=0.00 refault=0.0MiB/s ws=200MiB", 0), 0u) << all;
  // The target comes last: a table has a column for it.
  EXPECT_EQ(all.substr(all.size() - 9), " ->767MiB") << all;
  // Said by the table's columns or by the action: not repeated.
  EXPECT_EQ(all.find("actual="), std::string::npos) << all;
  EXPECT_EQ(all.find("level="), std::string::npos) << all;
  EXPECT_EQ(all.find("state=ok"), std::string::npos) << all;
  EXPECT_EQ(all.find("pagecache:"), std::string::npos) << all;
}

TEST(ShortReasonTest, TheLoopsNoteComesBeforeTheNumbers) {
  const std::string s = ShortReason(kBackoff, 80);
  EXPECT_EQ(s.rfind("backoff | held: stale stats (age=31.0s), never shrink on them granted=6.5MiB", 0), 0u) << s;
  EXPECT_LE(s.size(), 80u);
}

TEST(ShortReasonTest, NeverWiderThanAsked) {
  for (size_t w = 1; w < 200; ++w) {
    EXPECT_LE(ShortReason(kBackoff, w).size(), w) << "width " << w;
    EXPECT_LE(ShortReason(kReclaim, w).size(), w) << "width " << w;
  }
  // A first piece that does not fit is cut, and says so.
  EXPECT_EQ(ShortReason(kReclaim, 6), "rec...");
  EXPECT_EQ(ShortReason(kReclaim, 10), "reclaim");
}

TEST(ShortReasonTest, HoldsLeadWithTheirCause) {
  EXPECT_EQ(ShortReason("pagecache: hold stats_fresh=false stats_age_s=31.0 target=1024MiB", 0),
            "hold stats_fresh=false stats_age_s=31.0 target=1024MiB");
  EXPECT_EQ(ShortReason("pagecache: hold pending action=hold_pending -> 500MiB state=churning", 0),
            "hold_pending state=churning ->500MiB");
  EXPECT_EQ(ShortReason("pagecache: hold pending action=backoff -> 500MiB", 0), "hold(backoff) ->500MiB");
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
