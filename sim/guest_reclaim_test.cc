#include "sim/guest_reclaim.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The law on literal situations (the limits in force: 64 MiB steps, 32 MiB/s, a 64 MiB file
// keep, a 5% PSI stop, a 1 MiB/s refault stop).
TEST(GuestReclaimTest, TheAgentsLawTable) {
  struct Row {
    const char* name;
    double keep_mib, used_mib, file_mib, since_step_s, psi_pct, refault_mib_s;
    double want_mib;
  };
  const std::vector<Row> rows = {
      {"far above the keep after a pause: a whole step", 1000, 3000, 2000, kInf, 0, 0, 64},
      {"a second after the last step: the rate", 1000, 3000, 2000, 1, 0, 0, 32},
      {"half a second after: half the rate", 1000, 3000, 2000, 0.5, 0, 0, 16},
      {"within a step of the keep: half of what is left", 1000, 1040, 2000, kInf, 0, 0, 20},
      {"just above the keep: the least step", 1000, 1001.5, 2000, kInf, 0, 0, 1},
      {"less than the least step above the keep: none", 1000, 1000.5, 2000, kInf, 0, 0, 0},
      {"at the keep: none", 1000, 1000, 2000, kInf, 0, 0, 0},
      {"below the keep: none", 1000, 900, 2000, kInf, 0, 0, 0},
      {"the file keep binds first", 0, 3000, 100, kInf, 0, 0, 18},
      {"the file LRU at the agent's floor: none", 0, 3000, 64, kInf, 0, 0, 0},
      {"PSI at the stop: a step", 1000, 3000, 2000, kInf, 5, 0, 64},
      {"PSI over the stop: none", 1000, 3000, 2000, kInf, 5.1, 0, 0},
      {"refaults at the stop: a step", 1000, 3000, 2000, kInf, 0, 1, 64},
      {"refaults over the stop: none", 1000, 3000, 2000, kInf, 0, 1.5, 0},
      {"straight after a step: none", 1000, 3000, 2000, 0, 0, 0, 0},
  };
  for (const Row& r : rows) {
    GuestReclaimSituation s;
    s.keep = r.keep_mib * kMib;
    s.used = r.used_mib * kMib;
    s.file = r.file_mib * kMib;
    s.since_step = r.since_step_s;
    s.psi_pct = r.psi_pct;
    s.refault_bytes_per_second = r.refault_mib_s * kMib;
    EXPECT_EQ(GuestReclaimBytes(s), r.want_mib * kMib) << r.name;
  }
}

// Whole pages: the kernel reclaims pages.
TEST(GuestReclaimTest, AsksForWholePages) {
  GuestReclaimSituation s;
  s.keep = 1000 * kMib;
  s.used = 1000 * kMib + 10 * kMib + 100;  // half of it is not a whole number of pages
  s.file = 2000 * kMib;
  const double bytes = GuestReclaimBytes(s);
  EXPECT_GT(bytes, 4 * kMib);
  EXPECT_EQ(static_cast<long long>(bytes) % 4096, 0);
}

// The limits in force: plimsolld's refault stop is pagecache's refault target.
TEST(GuestReclaimTest, TheLimitsInForce) {
  const GuestReclaimLimits l;
  EXPECT_EQ(l.step_bytes, 64 * kMib);
  EXPECT_EQ(l.bytes_per_second, 32 * kMib);
  EXPECT_EQ(l.keep_file_bytes, 64 * kMib);
  EXPECT_EQ(l.psi_stop_pct, 5);
  EXPECT_EQ(l.refault_stop_bytes_per_second, 1 * kMib);
}

}  // namespace
}  // namespace plimsoll::sim
