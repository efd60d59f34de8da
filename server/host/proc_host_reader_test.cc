#include "server/host/proc_host_reader.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "common/proc_parsers.h"
#include "common/testing/fake_proc_tree.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::host {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr int64_t kKiB = 1024;

std::string ReadTestdata(const std::string& name) {
  return ::plimsoll::testing::ReadTestdata("common/testdata/" + name);
}

class FakeProcTree : public ::plimsoll::testing::FakeProcTree {
 public:
  void MakePressureDir() { MakeDir("pressure"); }
};

constexpr char kSmallMeminfo[] =
    "MemTotal:       16000 kB\n"
    "MemFree:         1000 kB\n"
    "MemAvailable:    9000 kB\n"
    "Buffers:          200 kB\n"
    "Cached:          7000 kB\n"
    "HugePages_Total:    0\n";

TEST(ProcHostReaderTest, CapturedHostWithBusyPsi) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("meminfo_host.txt"));
  tree.MakePressureDir();
  tree.Write("pressure/memory", ReadTestdata("pressure_memory_busy.txt"));
  ProcHostReader reader(tree.root());
  absl::StatusOr<HostMemory> memory = reader.Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->mem_total_bytes, 24684092 * kKiB);
  EXPECT_EQ(memory->mem_free_bytes, 23527832 * kKiB);
  EXPECT_EQ(memory->mem_available_bytes, 24107004 * kKiB);
  EXPECT_EQ(memory->buffers_bytes, 6288 * kKiB);
  EXPECT_EQ(memory->cached_bytes, 740468 * kKiB);
  EXPECT_THAT(memory->psi_some_avg10, Optional(12.5));
  EXPECT_THAT(memory->psi_full_avg10, Optional(4.2));
  EXPECT_THAT(memory->psi_some_total_us, Optional(uint64_t{48213377}));
}

TEST(ProcHostReaderTest, KernelWithoutPsiDirectory) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->mem_total_bytes, 16000 * kKiB);
  EXPECT_EQ(memory->mem_available_bytes, 9000 * kKiB);
  EXPECT_EQ(memory->psi_some_avg10, std::nullopt);
  EXPECT_EQ(memory->psi_full_avg10, std::nullopt);
  EXPECT_EQ(memory->psi_some_total_us, std::nullopt);
}

TEST(ProcHostReaderTest, PressureDirectoryWithoutMemoryFile) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  tree.MakePressureDir();
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->psi_some_avg10, std::nullopt);
}

TEST(ProcHostReaderTest, PsiWithoutFullLine) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  tree.MakePressureDir();
  tree.Write("pressure/memory", ReadTestdata("pressure_some_only.txt"));
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_THAT(memory->psi_some_avg10, Optional(0.0));
  EXPECT_THAT(memory->psi_some_total_us, Optional(uint64_t{0}));
  EXPECT_EQ(memory->psi_full_avg10, std::nullopt);
}

TEST(ProcHostReaderTest, EmptyPsiFileLeavesPsiAbsent) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  tree.MakePressureDir();
  tree.Write("pressure/memory", "");
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->psi_some_avg10, std::nullopt);
}

TEST(ProcHostReaderTest, TrailingSlashInRootIsIgnored) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  ProcHostReader reader(tree.root() + "//");
  EXPECT_EQ(reader.meminfo_path(), tree.root() + "/proc/meminfo");
  EXPECT_EQ(reader.psi_path(), tree.root() + "/proc/pressure/memory");
  EXPECT_TRUE(reader.Read().ok());
  EXPECT_EQ(ProcHostReader("").meminfo_path(), "/proc/meminfo");
  EXPECT_EQ(ProcHostReader("/").psi_path(), "/proc/pressure/memory");
}

TEST(ProcHostReaderTest, ReadsAfreshEachCall) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  ProcHostReader reader(tree.root());
  ASSERT_TRUE(reader.Read().ok());
  tree.Write("meminfo",
             "MemTotal: 16000 kB\nMemFree: 10 kB\nMemAvailable: 20 kB\nBuffers: 0 kB\n"
             "Cached: 0 kB\n");
  absl::StatusOr<HostMemory> memory = reader.Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->mem_available_bytes, 20 * kKiB);
}

TEST(ProcHostReaderTest, MissingMeminfoIsNotFound) {
  FakeProcTree tree;
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(memory.status().message(), HasSubstr(tree.root() + "/proc/meminfo"));
}

TEST(ProcHostReaderTest, MeminfoWithoutMemAvailable) {
  FakeProcTree tree;
  tree.Write("meminfo", "MemTotal: 16000 kB\nMemFree: 10 kB\nBuffers: 0 kB\nCached: 0 kB\n");
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(memory.status().message(), HasSubstr("no MemAvailable line"));
}

TEST(ProcHostReaderTest, MalformedMeminfoNamesFileAndLine) {
  FakeProcTree tree;
  tree.Write("meminfo", ReadTestdata("meminfo_truncated.txt"));
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(memory.status().message(), HasSubstr("/proc/meminfo: meminfo line 5: truncated"));
}

TEST(ProcHostReaderTest, MalformedPsiIsAnError) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  tree.MakePressureDir();
  tree.Write("pressure/memory", ReadTestdata("pressure_truncated.txt"));
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(memory.status().message(), HasSubstr("/proc/pressure/memory: psi line 2"));
}

TEST(ProcHostReaderTest, PsiPathThatIsADirectoryIsAnError) {
  FakeProcTree tree;
  tree.Write("meminfo", kSmallMeminfo);
  tree.MakePressureDir();
  ASSERT_EQ(mkdir((tree.root() + "/proc/pressure/memory").c_str(), 0755), 0);
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_THAT(memory.status().message(), HasSubstr("/proc/pressure/memory: read failed"));
}

TEST(ProcHostReaderTest, OversizedMeminfoIsRefused) {
  FakeProcTree tree;
  std::string big(kSmallMeminfo);
  big.append(kMaxProcTextBytes, '\n');
  tree.Write("meminfo", big);
  absl::StatusOr<HostMemory> memory = ProcHostReader(tree.root()).Read();
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(memory.status().message(), HasSubstr("exceeds the limit"));
}

// The real /proc of the machine running the test: a smoke test that the format we parse is the
// format this kernel writes.
TEST(ProcHostReaderTest, RealProc) {
  absl::StatusOr<HostMemory> memory = ProcHostReader("").Read();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_GT(memory->mem_total_bytes, 0);
  EXPECT_LE(memory->mem_free_bytes, memory->mem_total_bytes);
  EXPECT_LE(memory->mem_available_bytes, memory->mem_total_bytes);
}

}  // namespace
}  // namespace plimsoll::host
