// The generated test-driver host loads in libvirt's real test driver as the
// benchmarks assume: N running guests with the sizes TestGuestAt gives, each
// with balloon stats; and the generated /proc reads as the host it describes.
#include "bench/test_node.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/host/proc_host_reader.h"
#include "server/hypervisor/libvirt_hypervisor.h"

namespace plimsoll::bench {
namespace {

std::string TempDirectory() {
  std::string pattern = (std::filesystem::temp_directory_path() / "test_node_test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

TEST(TestNodeTest, GuestsAreDistinctAndSizedOneToEightGiB) {
  EXPECT_EQ(TestGuestAt(0).name, "guest-00000");
  EXPECT_NE(TestGuestAt(1).uuid, TestGuestAt(2).uuid);
  EXPECT_EQ(TestGuestAt(0).max_bytes, 1LL << 30);
  EXPECT_EQ(TestGuestAt(7).max_bytes, 8LL << 30);
  EXPECT_EQ(TestGuestAt(3).current_bytes, TestGuestAt(3).max_bytes / 4 * 3);
  EXPECT_EQ(TestFleetMaxBytes(8), 36LL << 30);
}

TEST(TestNodeTest, TheTestDriverRunsEveryGuestWithItsSizesAndStats) {
  const std::string dir = TempDirectory();
  ASSERT_FALSE(dir.empty());
  constexpr int kGuests = 50;
  ASSERT_TRUE(WriteTestNode(dir + "/node.xml", kGuests).ok());
  hypervisor::LibvirtHypervisor hv("test://" + dir + "/node.xml");
  ASSERT_TRUE(hv.Connect().ok());
  auto domains = hv.ListActiveDomains();
  ASSERT_TRUE(domains.ok()) << domains.status();
  ASSERT_EQ(domains->size(), static_cast<size_t>(kGuests));
  std::vector<std::string> uuids;
  for (const hypervisor::DomainInfo& d : *domains) {
    const int i = std::stoi(d.name.substr(6));
    const TestGuest want = TestGuestAt(i);
    EXPECT_EQ(d.uuid, want.uuid);
    EXPECT_EQ(d.state, hypervisor::DomainRunState::kRunning) << d.name;
    EXPECT_EQ(d.max_bytes, want.max_bytes) << d.name;
    EXPECT_EQ(d.current_bytes, want.current_bytes) << d.name;
    uuids.push_back(d.uuid);
  }
  auto stats = hv.GetBalloonStats(uuids);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->size(), static_cast<size_t>(kGuests));
  std::filesystem::remove_all(dir);
}

TEST(TestNodeTest, HostProcReadsAsTheHostItDescribes) {
  const std::string dir = TempDirectory();
  ASSERT_FALSE(dir.empty());
  ASSERT_TRUE(WriteHostProc(dir, 64LL << 30).ok());
  host::ProcHostReader reader(dir);
  auto mem = reader.Read();
  ASSERT_TRUE(mem.ok()) << mem.status();
  EXPECT_EQ(mem->mem_total_bytes, 64LL << 30);
  EXPECT_EQ(mem->mem_available_bytes, 32LL << 30);
  ASSERT_TRUE(mem->psi_some_avg10.has_value());
  EXPECT_EQ(*mem->psi_some_avg10, 0.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plimsoll::bench
