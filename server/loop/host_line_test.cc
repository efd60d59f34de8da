// ComputeLine and GuestCommitment on literal snapshots: each case writes the expected figures out.
#include "server/loop/host_line.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

policy::GuestView Guest(const std::string& name, int64_t max, int64_t actual, bool fresh = true) {
  policy::GuestView g;
  g.name = name;
  g.uuid = name + "-uuid";
  g.max_bytes = max;
  g.min_bytes = 256 * kMiB;
  g.actual_bytes = actual;
  g.target_bytes = actual;
  g.has_stats = true;
  g.stats_fresh = fresh;
  return g;
}

policy::GuestDecision Decision(const policy::GuestView& g, int64_t floor, int64_t working_set) {
  policy::GuestDecision d;
  d.uuid = g.uuid;
  d.target_bytes = g.target_bytes;
  d.floor_bytes = floor;
  d.working_set_bytes = working_set;
  return d;
}

struct LineCase {
  std::string name;
  int64_t budget;
  std::vector<policy::GuestView> guests;
  std::vector<policy::GuestDecision> decisions;
  LineParams params;
  int64_t committed;
  int64_t headroom;
  bool over_line;
  int at_ceiling;
};

TEST(HostLineTest, Table) {
  const policy::GuestView a = Guest("a", 4 * kGiB, 3 * kGiB);
  const policy::GuestView b = Guest("b", 8 * kGiB, 6 * kGiB);
  const policy::GuestView stale_b = Guest("b", 8 * kGiB, 2 * kGiB, /*fresh=*/false);
  policy::GuestView no_stats = Guest("c", 2 * kGiB, 1 * kGiB);
  no_stats.has_stats = false;
  const LineParams params{512 * kMiB, 1 * kGiB};
  const std::vector<LineCase> cases = {
      {"no guests: only the reserve is committed", 16 * kGiB, {}, {}, params,
       1 * kGiB, 16 * kGiB - 1 * kGiB - 512 * kMiB, false, 0},
      {"max(floor, working set) per guest", 16 * kGiB, {a, b},
       {Decision(a, 1 * kGiB, 2 * kGiB), Decision(b, 3 * kGiB, 1 * kGiB)}, params,
       2 * kGiB + 3 * kGiB + 1 * kGiB, 16 * kGiB - 6 * kGiB - 512 * kMiB, false, 0},
      {"a guest with stale stats counts at its ceiling, not its decision", 16 * kGiB, {a, stale_b},
       {Decision(a, 1 * kGiB, 2 * kGiB), Decision(stale_b, 1 * kGiB, 1 * kGiB)}, params,
       2 * kGiB + 8 * kGiB + 1 * kGiB, 16 * kGiB - 11 * kGiB - 512 * kMiB, false, 1},
      {"a guest without stats counts at its ceiling", 16 * kGiB, {no_stats},
       {Decision(no_stats, 0, 0)}, params, 2 * kGiB + 1 * kGiB, 16 * kGiB - 3 * kGiB - 512 * kMiB, false, 1},
      {"a policy measuring nothing (0, 0): the actual size", 16 * kGiB, {a, b},
       {Decision(a, 0, 0), Decision(b, 0, 0)}, params, 3 * kGiB + 6 * kGiB + 1 * kGiB,
       16 * kGiB - 10 * kGiB - 512 * kMiB, false, 0},
      {"a working set under the configured floor counts at the floor", 16 * kGiB, {a},
       {Decision(a, 0, 100 * kMiB)}, params, 256 * kMiB + 1 * kGiB,
       16 * kGiB - 256 * kMiB - 1 * kGiB - 512 * kMiB, false, 0},
      {"an estimate above the ceiling is capped at it", 16 * kGiB, {a},
       {Decision(a, 5 * kGiB, 0)}, params, 4 * kGiB + 1 * kGiB, 16 * kGiB - 5 * kGiB - 512 * kMiB, false, 0},
      {"a host already over its line: committed above capacity, headroom negative", 8 * kGiB, {a, stale_b},
       {Decision(a, 1 * kGiB, 2 * kGiB), Decision(stale_b, 1 * kGiB, 1 * kGiB)}, params,
       11 * kGiB, 8 * kGiB - 11 * kGiB - 512 * kMiB, true, 1},
      {"committed equal to capacity is on the line, not over it", 3 * kGiB, {a},
       {Decision(a, 2 * kGiB, 0)}, params, 3 * kGiB, -512 * kMiB, false, 0},
      {"decisions that do not match the guests are ignored: actual sizes", 16 * kGiB, {a, b},
       {Decision(a, 1 * kGiB, 1 * kGiB)}, params, 3 * kGiB + 6 * kGiB + 1 * kGiB,
       16 * kGiB - 10 * kGiB - 512 * kMiB, false, 0},
      {"no reserve, no room: headroom is capacity - guests", 16 * kGiB, {a},
       {Decision(a, 1 * kGiB, 2 * kGiB)}, LineParams{0, 0}, 2 * kGiB, 14 * kGiB, false, 0},
  };
  for (const LineCase& c : cases) {
    SCOPED_TRACE(c.name);
    policy::Snapshot snap;
    snap.host.guest_budget_bytes = c.budget;
    snap.guests = c.guests;
    policy::Decisions decisions;
    decisions.guests = c.decisions;
    const plimsoll::v1::HostLine line = ComputeLine(snap, decisions, c.params);
    EXPECT_EQ(line.capacity_bytes(), c.budget);
    EXPECT_EQ(line.committed_bytes(), c.committed);
    EXPECT_EQ(line.headroom_bytes(), c.headroom);
    EXPECT_EQ(line.headroom_bytes(), line.capacity_bytes() - line.committed_bytes() - c.params.new_guest_room_bytes);
    EXPECT_EQ(line.burst_reserve_bytes(), c.params.burst_reserve_bytes);
    EXPECT_EQ(line.new_guest_room_bytes(), c.params.new_guest_room_bytes);
    EXPECT_EQ(line.over_line(), c.over_line);
    EXPECT_EQ(line.guests(), static_cast<int>(c.guests.size()));
    EXPECT_EQ(line.guests_at_ceiling(), c.at_ceiling);
    EXPECT_EQ(line.offered_bytes(), 0) << "offering is the gate's, not the pure line's";
    EXPECT_FALSE(line.stale());
    EXPECT_NE(line.explanation().find("headroom="), std::string::npos) << line.explanation();
  }
}

TEST(HostLineTest, ExplanationCarriesTheNumbers) {
  policy::Snapshot snap;
  snap.host.guest_budget_bytes = 8 * kGiB;
  snap.guests = {Guest("a", 4 * kGiB, 3 * kGiB)};
  policy::Decisions d;
  d.guests = {Decision(snap.guests[0], 1 * kGiB, 2 * kGiB)};
  EXPECT_EQ(ComputeLine(snap, d, LineParams{512 * kMiB, 1 * kGiB}).explanation(),
            "capacity=8192MiB committed=3072MiB (guests=2048MiB burst_reserve=1024MiB) new_guest_room=512MiB "
            "headroom=4608MiB guests=1 at_ceiling=0");
}

// The reserve for guests counted by RSS (their floors keep no burst room) is committed too.
TEST(HostLineTest, ThePoolReserveIsCommitted) {
  policy::Snapshot snap;
  snap.host.guest_budget_bytes = 8 * kGiB;
  snap.guests = {Guest("a", 4 * kGiB, 3 * kGiB)};
  policy::Decisions d;
  d.guests = {Decision(snap.guests[0], 1 * kGiB, 2 * kGiB)};
  d.pool_reserve_bytes = 256 * kMiB;
  const plimsoll::v1::HostLine line = ComputeLine(snap, d, LineParams{512 * kMiB, 1 * kGiB});
  EXPECT_EQ(line.committed_bytes(), 2 * kGiB + 1 * kGiB + 256 * kMiB);
  EXPECT_EQ(line.explanation(),
            "capacity=8192MiB committed=3328MiB (guests=2048MiB burst_reserve=1024MiB pool_reserve=256MiB) "
            "new_guest_room=512MiB headroom=4352MiB guests=1 at_ceiling=0");
}

TEST(HostLineTest, GuestCommitmentSaysWhenItIsTheCeiling) {
  bool at_ceiling = true;
  const policy::GuestView fresh = Guest("a", 4 * kGiB, 3 * kGiB);
  EXPECT_EQ(GuestCommitment(fresh, nullptr, &at_ceiling), 3 * kGiB) << "no decision: the actual size";
  EXPECT_FALSE(at_ceiling);
  const policy::GuestView stale = Guest("a", 4 * kGiB, 3 * kGiB, /*fresh=*/false);
  EXPECT_EQ(GuestCommitment(stale, nullptr, &at_ceiling), 4 * kGiB);
  EXPECT_TRUE(at_ceiling);
}

}  // namespace
}  // namespace plimsoll::server
