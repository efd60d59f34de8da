#include "server/hypervisor/block_reads.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

struct Case {
  const char* name;
  std::vector<std::pair<std::string, uint64_t>> fields;
  std::optional<uint64_t> bytes;
  std::optional<uint64_t> requests;
};

TEST(BlockReadSumTest, SumsReadsOverDisksAndIgnoresEverythingElse) {
  const Case cases[] = {
      {"no block fields", {{"state.state", 1}, {"balloon.current", 1048576}}, std::nullopt, std::nullopt},
      {"one disk",
       {{"block.count", 1}, {"block.0.name", 0}, {"block.0.rd.reqs", 10}, {"block.0.rd.bytes", 4096},
        {"block.0.wr.bytes", 999}},
       4096, 10},
      {"two disks are summed",
       {{"block.count", 2}, {"block.0.rd.bytes", 1000}, {"block.1.rd.bytes", 24}, {"block.0.rd.reqs", 3},
        {"block.1.rd.reqs", 4}},
       1024, 7},
      {"a disk without reads counted (empty cdrom) adds nothing", {{"block.count", 2}, {"block.1.rd.bytes", 5}}, 5,
       std::nullopt},
      {"disks numbered past 9", {{"block.10.rd.bytes", 7}, {"block.2.rd.bytes", 1}}, 8, std::nullopt},
      {"requests alone are not a byte count", {{"block.0.rd.reqs", 3}}, std::nullopt, std::nullopt},
      {"look-alikes are ignored",
       {{"block.rd.bytes", 1}, {"block.x.rd.bytes", 1}, {"block.0rd.bytes", 1}, {"block.0.rd.bytes.extra", 1},
        {"blocks.0.rd.bytes", 1}, {"block.0.wr.bytes", 1}, {"block.0.", 1}, {"block.0.rd.bytes", 2}},
       2, std::nullopt},
      {"a sum that would wrap saturates",
       {{"block.0.rd.bytes", std::numeric_limits<uint64_t>::max() - 1}, {"block.1.rd.bytes", 5}},
       std::numeric_limits<uint64_t>::max(), std::nullopt},
      {"a disk's field twice counts once, its last value",
       {{"block.0.rd.bytes", 100}, {"block.1.rd.bytes", 1}, {"block.0.rd.bytes", 40}, {"block.0.rd.reqs", 9},
        {"block.0.rd.reqs", 2}},
       41, 2},
      {"block.count does not limit the disks summed",
       {{"block.count", 1}, {"block.0.rd.bytes", 1}, {"block.1.rd.bytes", 2}}, 3, std::nullopt},
  };
  for (const Case& c : cases) {
    BlockReadSum sum;
    for (const auto& [field, value] : c.fields) sum.Add(field, value);
    BalloonStats stats;
    sum.StoreInto(&stats);
    EXPECT_EQ(stats.disk_read_bytes, c.bytes) << c.name;
    EXPECT_EQ(stats.disk_read_requests, c.requests) << c.name;
  }
}

TEST(BlockReadSumTest, LeavesOtherStatsAlone) {
  BalloonStats stats;
  stats.major_fault = 5;
  stats.disk_read_bytes = 123;  // from an earlier record: nothing new here keeps it
  BlockReadSum().StoreInto(&stats);
  EXPECT_EQ(stats.major_fault, 5u);
  EXPECT_EQ(stats.disk_read_bytes, 123u);
}

}  // namespace
}  // namespace plimsoll::hypervisor
