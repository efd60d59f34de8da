#include "server/hypervisor/bulk_stats.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

constexpr int64_t kKiB = 1024;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
// The largest KiB count whose bytes fit an int64_t, and the first that does not.
constexpr uint64_t kMaxKiB = static_cast<uint64_t>(kI64Max / kKiB);

// A record as a QEMU domain's bulk answer (STATE | BALLOON | BLOCK) has it: libvirt 9.0 on a
// guest with its balloon stats period set and two disks (the types are libvirt's: state.* are
// INT, balloon.* ULLONG, block.count and block.<n>.backingIndex UINT, block.<n>.name STRING).
std::vector<StatField> FullRecord() {
  return {
      {"state.state", int32_t{1}},
      {"state.reason", int32_t{1}},
      {"balloon.current", uint64_t{1048576}},
      {"balloon.maximum", uint64_t{2097152}},
      {"balloon.swap_in", uint64_t{12}},
      {"balloon.swap_out", uint64_t{34}},
      {"balloon.major_fault", uint64_t{567}},
      {"balloon.minor_fault", uint64_t{891011}},
      {"balloon.unused", uint64_t{524288}},
      {"balloon.available", uint64_t{1000000}},
      {"balloon.usable", uint64_t{700000}},
      {"balloon.last-update", uint64_t{1700000000}},
      {"balloon.disk_caches", uint64_t{150000}},
      {"balloon.hugetlb_pgalloc", uint64_t{0}},
      {"balloon.hugetlb_pgfail", uint64_t{0}},
      {"balloon.rss", uint64_t{1100000}},
      {"block.count", uint32_t{2}},
      {"block.0.name", absl::string_view("vda")},
      {"block.0.path", absl::string_view("/var/lib/libvirt/images/g.qcow2")},
      {"block.0.backingIndex", uint32_t{1}},
      {"block.0.rd.reqs", uint64_t{300}},
      {"block.0.rd.bytes", uint64_t{4096000}},
      {"block.0.rd.times", uint64_t{99999}},
      {"block.0.wr.reqs", uint64_t{7}},
      {"block.0.wr.bytes", uint64_t{28672}},
      {"block.0.allocation", uint64_t{1 << 30}},
      {"block.1.name", absl::string_view("sda")},
      {"block.1.rd.reqs", uint64_t{5}},
      {"block.1.rd.bytes", uint64_t{2048}},
  };
}

TEST(BulkStatsTest, FullRecord) {
  const std::vector<StatField> fields = FullRecord();
  const BulkRecord r = ParseBulkRecord(fields);
  EXPECT_EQ(r.state, 1u);
  EXPECT_EQ(r.max_bytes, 2097152 * kKiB);
  EXPECT_EQ(r.balloon_fields, 14);  // hugetlb_* included, though not stored
  const BalloonStats& s = r.stats;
  EXPECT_EQ(s.actual_bytes, 1048576 * kKiB);
  EXPECT_EQ(s.unused_bytes, 524288 * kKiB);
  EXPECT_EQ(s.usable_bytes, 700000 * kKiB);
  EXPECT_EQ(s.available_bytes, 1000000 * kKiB);
  EXPECT_EQ(s.disk_caches_bytes, 150000 * kKiB);
  EXPECT_EQ(s.rss_bytes, 1100000 * kKiB);
  // swap is KiB as libvirt says it, faults are counts, last-update unix seconds: not scaled.
  EXPECT_EQ(s.swap_in, 12u);
  EXPECT_EQ(s.swap_out, 34u);
  EXPECT_EQ(s.major_fault, 567u);
  EXPECT_EQ(s.minor_fault, 891011u);
  EXPECT_EQ(s.last_update, 1700000000);
  EXPECT_EQ(s.disk_read_bytes, 4096000u + 2048u);
  EXPECT_EQ(s.disk_read_requests, 305u);
}

// What each case expects of the record; a field left nullopt must be absent. Cases name only the
// fields they expect (designated initializers); gcc's -Wextra in C++17 mode would otherwise ask
// every case to spell out all the others.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
struct Expected {
  std::optional<uint64_t> state;
  std::optional<int64_t> max_bytes;
  int balloon_fields = 0;
  std::optional<int64_t> actual_bytes;
  std::optional<int64_t> unused_bytes;
  std::optional<int64_t> rss_bytes;
  std::optional<uint64_t> swap_in;
  std::optional<uint64_t> major_fault;
  std::optional<int64_t> last_update;
  std::optional<uint64_t> disk_read_bytes;
  std::optional<uint64_t> disk_read_requests;
};

struct Case {
  const char* name;
  std::vector<StatField> fields;
  Expected want;
};

TEST(BulkStatsTest, Table) {
  const Case cases[] = {
      {"empty record", {}, {}},
      {"no balloon group (the test driver): state only",
       {{"state.state", int32_t{3}}, {"state.reason", int32_t{1}}},
       {.state = 3}},
      {"balloon group without guest stats (NOWAIT, busy domain): current and maximum",
       {{"state.state", int32_t{1}}, {"balloon.current", uint64_t{4}}, {"balloon.maximum", uint64_t{8}}},
       {.state = 1, .max_bytes = 8 * kKiB, .balloon_fields = 2, .actual_bytes = 4 * kKiB}},
      {"partial guest stats: only what is there",
       {{"balloon.unused", uint64_t{1}}, {"balloon.major_fault", uint64_t{2}}},
       {.balloon_fields = 2, .unused_bytes = kKiB, .major_fault = 2}},
      {"KiB to bytes, each integer type",
       {{"balloon.current", int32_t{3}}, {"balloon.maximum", uint32_t{5}}, {"balloon.unused", int64_t{7}},
        {"balloon.rss", uint64_t{11}}},
       {.max_bytes = 5 * kKiB, .balloon_fields = 4, .actual_bytes = 3 * kKiB, .unused_bytes = 7 * kKiB,
        .rss_bytes = 11 * kKiB}},
      {"unknown fields are ignored, unknown balloon ones still count as the group",
       {{"balloon.hugetlb_pgalloc", uint64_t{9}}, {"balloon.future_stat", uint64_t{9}}, {"cpu.time", uint64_t{9}},
        {"vcpu.0.state", int32_t{1}}, {"net.0.rx.bytes", uint64_t{9}}, {"state", int32_t{1}},
        {"state.state.x", int32_t{1}}, {"balloon", uint64_t{9}}, {"xballoon.current", uint64_t{9}},
        {"balloon.current.x", uint64_t{9}}, {"BALLOON.current", uint64_t{9}}},
       {.balloon_fields = 3}},
      {"wrong types are ignored, but a balloon field of any type counts",
       {{"state.state", 1.0}, {"balloon.current", absl::string_view("1024")}, {"balloon.maximum", true},
        {"balloon.unused", 2.5}, {"balloon.rss", std::monostate()}, {"block.0.rd.bytes", absl::string_view("1")},
        {"block.0.rd.reqs", 3.0}},
       {.balloon_fields = 4}},
      {"a wrongly typed duplicate does not replace a good value",
       {{"balloon.current", uint64_t{1}}, {"balloon.current", 2.0}, {"state.state", int32_t{1}},
        {"state.state", absl::string_view("x")}},
       {.state = 1, .balloon_fields = 2, .actual_bytes = kKiB}},
      {"duplicated names: the last value wins, for disks per disk",
       {{"balloon.current", uint64_t{1}}, {"balloon.current", uint64_t{2}}, {"state.state", int32_t{1}},
        {"state.state", int32_t{5}}, {"block.0.rd.bytes", uint64_t{100}}, {"block.0.rd.bytes", uint64_t{10}},
        {"block.1.rd.bytes", uint64_t{1}}, {"block.1.rd.reqs", uint64_t{4}}, {"block.1.rd.reqs", uint64_t{3}}},
       {.state = 5, .balloon_fields = 2, .actual_bytes = 2 * kKiB, .disk_read_bytes = 11, .disk_read_requests = 3}},
      {"negative integers read as 0",
       {{"state.state", int32_t{-1}}, {"balloon.current", int32_t{-5}}, {"balloon.maximum", int64_t{-1}},
        {"balloon.swap_in", int64_t{std::numeric_limits<int64_t>::min()}}, {"balloon.last-update", int32_t{-7}},
        {"block.0.rd.bytes", int64_t{-100}}, {"block.1.rd.bytes", int32_t{5}}, {"block.0.rd.reqs", int32_t{-1}}},
       {.state = 0, .max_bytes = 0, .balloon_fields = 4, .actual_bytes = 0, .swap_in = 0, .last_update = 0,
        .disk_read_bytes = 5, .disk_read_requests = 0}},
      {"the largest KiB count that fits in bytes is kept, the next one is ignored",
       {{"balloon.current", uint64_t{kMaxKiB}}, {"balloon.maximum", uint64_t{kMaxKiB + 1}},
        {"balloon.unused", kU64Max}, {"balloon.rss", int64_t{kI64Max}}},
       {.balloon_fields = 4, .actual_bytes = static_cast<int64_t>(kMaxKiB) * kKiB}},
      {"an overflowing duplicate does not replace a good value",
       {{"balloon.current", uint64_t{1}}, {"balloon.current", kU64Max}},
       {.balloon_fields = 2, .actual_bytes = kKiB}},
      {"counts are not scaled and take the whole uint64 range",
       {{"balloon.swap_in", kU64Max}, {"balloon.major_fault", kU64Max}},
       {.balloon_fields = 2, .swap_in = kU64Max, .major_fault = kU64Max}},
      {"last-update past int64 is ignored, at int64's max kept",
       {{"balloon.last-update", uint64_t{static_cast<uint64_t>(kI64Max)}},
        {"balloon.last-update", uint64_t{static_cast<uint64_t>(kI64Max) + 1}}},
       {.balloon_fields = 2, .last_update = kI64Max}},
      {"state past int is passed on as it is (the caller maps it)",
       {{"state.state", uint64_t{(uint64_t{1} << 32) + 1}}},
       {.state = (uint64_t{1} << 32) + 1}},
      {"several disks summed; block.count neither needed nor limiting",
       {{"block.count", uint32_t{1}}, {"block.0.rd.bytes", uint64_t{1000}}, {"block.1.rd.bytes", uint64_t{24}},
        {"block.10.rd.bytes", uint64_t{1000}}, {"block.0.rd.reqs", uint32_t{3}}, {"block.1.rd.reqs", int32_t{4}}},
       {.disk_read_bytes = 2024, .disk_read_requests = 7}},
      {"disk reads without balloon fields (per-domain stats then come from elsewhere)",
       {{"state.state", int32_t{1}}, {"block.0.rd.bytes", uint64_t{8}}},
       {.state = 1, .disk_read_bytes = 8}},
      {"disk requests alone are no reads known",
       {{"block.0.rd.reqs", uint64_t{8}}},
       {}},
      {"disk sums saturate",
       {{"block.0.rd.bytes", kU64Max}, {"block.1.rd.bytes", kU64Max}, {"block.0.rd.reqs", kU64Max},
        {"block.1.rd.reqs", uint64_t{1}}},
       {.disk_read_bytes = kU64Max, .disk_read_requests = kU64Max}},
      {"names are compared whole (a NUL inside is not an end)",
       {{absl::string_view("balloon.current\0x", 17), uint64_t{1}}, {absl::string_view("state.state\0", 12), int32_t{1}}},
       {.balloon_fields = 1}},
  };
  for (const Case& c : cases) {
    const BulkRecord r = ParseBulkRecord(c.fields);
    const Expected& w = c.want;
    EXPECT_EQ(r.state, w.state) << c.name;
    EXPECT_EQ(r.max_bytes, w.max_bytes) << c.name;
    EXPECT_EQ(r.balloon_fields, w.balloon_fields) << c.name;
    EXPECT_EQ(r.stats.actual_bytes, w.actual_bytes) << c.name;
    EXPECT_EQ(r.stats.unused_bytes, w.unused_bytes) << c.name;
    EXPECT_EQ(r.stats.rss_bytes, w.rss_bytes) << c.name;
    EXPECT_EQ(r.stats.swap_in, w.swap_in) << c.name;
    EXPECT_EQ(r.stats.major_fault, w.major_fault) << c.name;
    EXPECT_EQ(r.stats.last_update, w.last_update) << c.name;
    EXPECT_EQ(r.stats.disk_read_bytes, w.disk_read_bytes) << c.name;
    EXPECT_EQ(r.stats.disk_read_requests, w.disk_read_requests) << c.name;
    // Fields no case sets stay absent.
    EXPECT_FALSE(r.stats.usable_bytes.has_value()) << c.name;
    EXPECT_FALSE(r.stats.available_bytes.has_value()) << c.name;
    EXPECT_FALSE(r.stats.disk_caches_bytes.has_value()) << c.name;
    EXPECT_FALSE(r.stats.swap_out.has_value()) << c.name;
    EXPECT_FALSE(r.stats.minor_fault.has_value()) << c.name;
  }
}

// The per-domain path (virDomainMemoryStats, by tag) stores through the same function.
TEST(BulkStatsTest, StoreBalloonStat) {
  BalloonStats s;
  EXPECT_TRUE(StoreBalloonStat("current", 2, &s));
  EXPECT_TRUE(StoreBalloonStat("usable", 3, &s));
  EXPECT_TRUE(StoreBalloonStat("available", 4, &s));
  EXPECT_TRUE(StoreBalloonStat("disk_caches", 5, &s));
  EXPECT_TRUE(StoreBalloonStat("swap_out", 6, &s));
  EXPECT_TRUE(StoreBalloonStat("minor_fault", 7, &s));
  EXPECT_FALSE(StoreBalloonStat("maximum", 1, &s));
  EXPECT_FALSE(StoreBalloonStat("hugetlb_pgalloc", 1, &s));
  EXPECT_FALSE(StoreBalloonStat("", 1, &s));
  EXPECT_FALSE(StoreBalloonStat("rss", kMaxKiB + 1, &s));
  EXPECT_EQ(s.actual_bytes, 2 * kKiB);
  EXPECT_EQ(s.usable_bytes, 3 * kKiB);
  EXPECT_EQ(s.available_bytes, 4 * kKiB);
  EXPECT_EQ(s.disk_caches_bytes, 5 * kKiB);
  EXPECT_EQ(s.swap_out, 6u);
  EXPECT_EQ(s.minor_fault, 7u);
  EXPECT_FALSE(s.rss_bytes.has_value());
}

TEST(BulkStatsTest, KiBToBytes) {
  EXPECT_EQ(KiBToBytes(0), 0);
  EXPECT_EQ(KiBToBytes(1), 1024);
  EXPECT_EQ(KiBToBytes(kMaxKiB), static_cast<int64_t>(kMaxKiB) * kKiB);
  EXPECT_EQ(KiBToBytes(kMaxKiB + 1), std::nullopt);
  EXPECT_EQ(KiBToBytes(kU64Max), std::nullopt);
}

}  // namespace
}  // namespace plimsoll::hypervisor
