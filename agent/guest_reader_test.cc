#include "agent/guest_reader.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "common/testing/fake_proc_tree.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1024;

using ::plimsoll::testing::ReadTestdata;

// A fake guest root: proc/ with the directory the boot id lives in.
class FakeProcTree : public ::plimsoll::testing::FakeProcTree {
 public:
  FakeProcTree() { MakeDir("sys/kernel/random"); }
  void WithPsi(const std::string& text) { Write("pressure/memory", text); }
};

// This machine (Linux 6.18) as captured in common/testdata.
TEST(GuestReaderTest, HostCaptureWithPsi) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  tree.WithPsi(ReadTestdata("common/testdata/pressure_memory_busy.txt"));
  GuestReader reader(tree.root() + "/");
  v1::AgentReport report;
  ASSERT_TRUE(reader.Read(&report).ok());

  const v1::GuestMeminfo& m = report.meminfo();
  EXPECT_EQ(m.mem_total_bytes(), 24684092 * kKiB);
  EXPECT_EQ(m.mem_free_bytes(), 23527832 * kKiB);
  EXPECT_EQ(m.mem_available_bytes(), 24107004 * kKiB);
  EXPECT_EQ(m.buffers_bytes(), 6288 * kKiB);
  EXPECT_EQ(m.cached_bytes(), 740468 * kKiB);
  EXPECT_EQ(m.active_file_bytes(), 112920 * kKiB);
  EXPECT_EQ(m.inactive_file_bytes(), 624976 * kKiB);
  EXPECT_EQ(m.anon_pages_bytes(), 215324 * kKiB);
  EXPECT_EQ(m.shmem_bytes(), 8856 * kKiB);
  EXPECT_EQ(m.sreclaimable_bytes(), 107184 * kKiB);
  EXPECT_EQ(m.sunreclaim_bytes(), 25512 * kKiB);
  ASSERT_TRUE(m.has_swap_total_bytes());  // present and zero is not absent
  EXPECT_EQ(m.swap_total_bytes(), 0u);

  const v1::GuestVmstat& v = report.vmstat();
  EXPECT_EQ(v.workingset_refault_file(), 73736u);
  ASSERT_TRUE(v.has_workingset_refault_anon());
  EXPECT_EQ(v.workingset_refault_anon(), 0u);
  EXPECT_EQ(v.pgmajfault(), 1153u);
  EXPECT_TRUE(v.has_pgscan_total());
  EXPECT_TRUE(v.has_oom_kill());
  EXPECT_TRUE(v.has_balloon_inflate());
  EXPECT_TRUE(v.has_allocstall());

  ASSERT_TRUE(report.has_memory_pressure());
  EXPECT_DOUBLE_EQ(report.memory_pressure().some().avg10(), 12.50);
  EXPECT_DOUBLE_EQ(report.memory_pressure().some().avg60(), 3.07);
  EXPECT_EQ(report.memory_pressure().some().total_us(), 48213377u);
  EXPECT_DOUBLE_EQ(report.memory_pressure().full().avg10(), 4.20);
  EXPECT_EQ(report.memory_pressure().full().total_us(), 16279004u);
}

// A lab guest: Debian 12's 6.1 kernel under QEMU with a virtio balloon, captured from inside
// the guest (agent/testdata/lab_guest_6.1, taken with a lab run= script printing the files).
TEST(GuestReaderTest, LabGuestKernel61Capture) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("agent/testdata/lab_guest_6.1/meminfo"));
  tree.Write("vmstat", ReadTestdata("agent/testdata/lab_guest_6.1/vmstat"));
  tree.WithPsi(ReadTestdata("agent/testdata/lab_guest_6.1/pressure_memory"));
  GuestReader reader(tree.root() + "/");
  v1::AgentReport report;
  ASSERT_TRUE(reader.Read(&report).ok());
  const v1::GuestMeminfo& m = report.meminfo();
  EXPECT_EQ(m.mem_total_bytes(), 983732 * kKiB);
  EXPECT_EQ(m.mem_available_bytes(), 820000 * kKiB);
  EXPECT_EQ(m.active_file_bytes(), 184 * kKiB);
  EXPECT_EQ(m.anon_pages_bytes(), 1540 * kKiB);
  EXPECT_EQ(m.shmem_bytes(), 5732 * kKiB);
  EXPECT_EQ(m.sunreclaim_bytes(), 7472 * kKiB);
  const v1::GuestVmstat& v = report.vmstat();
  // 6.1 has the balloon and OOM counters, and split file/anon refaults.
  ASSERT_TRUE(v.has_balloon_inflate());
  EXPECT_EQ(v.balloon_inflate(), 0u);
  ASSERT_TRUE(v.has_oom_kill());
  EXPECT_EQ(v.oom_kill(), 0u);
  ASSERT_TRUE(v.has_workingset_refault_file());
  EXPECT_EQ(v.pgmajfault(), 587u);
  ASSERT_TRUE(report.has_memory_pressure());
  EXPECT_TRUE(report.memory_pressure().has_full());
  EXPECT_DOUBLE_EQ(report.memory_pressure().some().avg10(), 0.0);
}

TEST(GuestReaderTest, KernelWithoutPsiLeavesPressureUnset) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  GuestReader reader(tree.root());
  v1::AgentReport report;
  ASSERT_TRUE(reader.Read(&report).ok());
  EXPECT_FALSE(report.has_memory_pressure());
  EXPECT_TRUE(report.meminfo().has_mem_total_bytes());
}

TEST(GuestReaderTest, SomeOnlyPsiLeavesFullUnset) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  tree.WithPsi(ReadTestdata("common/testdata/pressure_some_only.txt"));
  v1::AgentReport report;
  ASSERT_TRUE(GuestReader(tree.root()).Read(&report).ok());
  EXPECT_TRUE(report.memory_pressure().has_some());
  EXPECT_FALSE(report.memory_pressure().has_full());
}

TEST(GuestReaderTest, EmptyPsiFileIsNoPsi) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  tree.WithPsi("");
  v1::AgentReport report;
  ASSERT_TRUE(GuestReader(tree.root()).Read(&report).ok());
  EXPECT_FALSE(report.has_memory_pressure());
}

TEST(GuestReaderTest, BrokenPsiIsAnErrorNamingTheFile) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  tree.WithPsi(ReadTestdata("common/testdata/pressure_truncated.txt"));
  v1::AgentReport report;
  absl::Status s = GuestReader(tree.root()).Read(&report);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("pressure/memory"));
  EXPECT_FALSE(report.has_meminfo());  // nothing half filled
}

TEST(GuestReaderTest, MissingOrBrokenMeminfoIsAnError) {
  FakeProcTree tree;
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_host.txt"));
  v1::AgentReport report;
  EXPECT_EQ(GuestReader(tree.root()).Read(&report).code(), absl::StatusCode::kNotFound);
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_truncated.txt"));
  absl::Status s = GuestReader(tree.root()).Read(&report);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("meminfo"));
}

TEST(GuestReaderTest, BrokenVmstatIsAnError) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("common/testdata/meminfo_host.txt"));
  tree.Write("vmstat", ReadTestdata("common/testdata/vmstat_overflow.txt"));
  v1::AgentReport report;
  absl::Status s = GuestReader(tree.root()).Read(&report);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("vmstat"));
}

// An old kernel: fields it lacks stay absent (never zero), old names are mapped, per-zone
// counters are summed, and pgscan_direct_throttle (an event count) is not.
TEST(GuestReaderTest, LegacyKernelFieldsAbsentAndMapped) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("agent/testdata/meminfo_legacy_3_10.txt"));
  tree.Write("vmstat", ReadTestdata("agent/testdata/vmstat_legacy_4_4.txt"));
  v1::AgentReport report;
  ASSERT_TRUE(GuestReader(tree.root()).Read(&report).ok());

  const v1::GuestMeminfo& m = report.meminfo();
  EXPECT_FALSE(m.has_mem_available_bytes());
  EXPECT_EQ(m.mem_total_bytes(), 1016292 * kKiB);
  EXPECT_EQ(m.swap_total_bytes(), 524284 * kKiB);

  const v1::GuestVmstat& v = report.vmstat();
  EXPECT_EQ(v.workingset_refault_file(), 52114u);
  EXPECT_FALSE(v.has_workingset_refault_anon());
  EXPECT_FALSE(v.has_oom_kill());
  EXPECT_EQ(v.allocstall(), 19u);
  EXPECT_EQ(v.pgscan_kswapd(), 201876u);
  EXPECT_EQ(v.pgscan_direct(), 4102u);  // not + 7 throttle events
  EXPECT_EQ(v.pgsteal_kswapd(), 180442u);
  EXPECT_EQ(v.pgsteal_direct(), 3310u);
  EXPECT_EQ(v.pgscan_total(), 201876u + 4102u);
  EXPECT_EQ(v.pgsteal_total(), 180442u + 3310u);
  EXPECT_EQ(v.balloon_inflate(), 65536u);
  EXPECT_EQ(v.balloon_deflate(), 1024u);
  EXPECT_EQ(v.pgmajfault(), 7712u);
  EXPECT_FALSE(report.has_memory_pressure());
}

TEST(FillVmstatTest, SumsEveryReclaimerButNotPerLruDuplicates) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(
      "pgscan_kswapd 100\npgscan_direct 20\npgscan_khugepaged 3\npgscan_proactive 4\n"
      "pgscan_direct_throttle 9\npgscan_anon 50\npgscan_file 77\n"
      "pgsteal_kswapd 90\npgsteal_direct 10\npgsteal_khugepaged 1\npgsteal_anon 40\npgsteal_file 61\n"
      "allocstall_dma32 2\nallocstall_normal 5\nallocstall_movable 1\n");
  ASSERT_TRUE(vmstat.ok()) << vmstat.status();
  v1::GuestVmstat out;
  FillVmstat(*vmstat, &out);
  EXPECT_EQ(out.pgscan_kswapd(), 100u);
  EXPECT_EQ(out.pgscan_direct(), 20u);
  EXPECT_EQ(out.pgscan_total(), 127u);
  EXPECT_EQ(out.pgsteal_total(), 101u);
  EXPECT_EQ(out.allocstall(), 8u);
  EXPECT_FALSE(out.has_workingset_refault_file());
  EXPECT_FALSE(out.has_balloon_inflate());
}

TEST(FillVmstatTest, SumsSaturateInsteadOfWrapping) {
  absl::StatusOr<Vmstat> vmstat =
      ParseVmstat("pgscan_kswapd 18446744073709551615\npgscan_direct 18446744073709551615\n");
  ASSERT_TRUE(vmstat.ok());
  v1::GuestVmstat out;
  FillVmstat(*vmstat, &out);
  EXPECT_EQ(out.pgscan_total(), UINT64_MAX);
}

TEST(GuestReaderTest, BootId) {
  FakeProcTree tree;
  tree.Write("sys/kernel/random/boot_id", "D3E65F4E-7CD1-460D-A8A4-88DBE69FC919\n");
  absl::StatusOr<std::string> id = GuestReader(tree.root()).ReadBootId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "d3e65f4e-7cd1-460d-a8a4-88dbe69fc919");
  tree.Write("sys/kernel/random/boot_id", "garbage\n");
  EXPECT_EQ(GuestReader(tree.root()).ReadBootId().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace plimsoll::agent
