#include "bench/test_node.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll::bench {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

TestGuest TestGuestAt(int i) {
  TestGuest g;
  g.name = absl::StrFormat("guest-%05d", i);
  // Version-4-shaped and unique per index; the prefix tells benchmark guests apart.
  g.uuid = absl::StrFormat("b1e55ed0-0000-4000-8000-%012d", i);
  g.max_bytes = (1 + i % 8) * kGiB;
  g.current_bytes = i % 4 == 3 ? g.max_bytes / 4 * 3 : g.max_bytes;
  return g;
}

int64_t TestFleetMaxBytes(int n) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i) total += TestGuestAt(i).max_bytes;
  return total;
}

std::string TestNodeXml(int n) {
  std::string xml = absl::StrCat("<!-- libvirt test-driver host: ", n,
                                 " running guests with virtio balloons (bench/test_node.cc) -->\n<node>\n");
  for (int i = 0; i < n; ++i) {
    const TestGuest g = TestGuestAt(i);
    absl::StrAppend(&xml, "  <domain type='test'>\n", "    <name>", g.name, "</name>\n", "    <uuid>", g.uuid,
                    "</uuid>\n", "    <memory unit='KiB'>", g.max_bytes / kKiB, "</memory>\n",
                    "    <currentMemory unit='KiB'>", g.current_bytes / kKiB, "</currentMemory>\n",
                    "    <vcpu>1</vcpu>\n", "    <os><type>hvm</type></os>\n",
                    "    <devices><memballoon model='virtio'/></devices>\n", "  </domain>\n");
  }
  absl::StrAppend(&xml, "</node>\n");
  return xml;
}

absl::Status WriteTestNode(const std::string& path, int n) { return WriteFile(path, TestNodeXml(n)); }

absl::Status WriteHostProc(const std::string& root, int64_t mem_total_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(root) / "proc" / "pressure", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", root, "/proc/pressure: ", ec.message()));
  const int64_t total_kib = mem_total_bytes / kKiB;
  const std::string meminfo = absl::StrFormat(
      "MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:        %d kB\n"
      "Cached:         %d kB\n",
      total_kib, total_kib / 4, total_kib / 2, total_kib / 64, total_kib / 8);
  if (absl::Status s = WriteFile(root + "/proc/meminfo", meminfo); !s.ok()) return s;
  return WriteFile(root + "/proc/pressure/memory",
                   "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
}

}  // namespace plimsoll::bench
