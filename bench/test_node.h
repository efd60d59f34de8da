// A libvirt test-driver host of N running guests with virtio balloons, for the
// scale benchmarks: the XML that `test:///ABS/PATH/node.xml` loads (a <node>
// holding one <domain type='test'> per guest). Deterministic: guest i always
// has the same name, uuid and sizes, so runs at different N share their prefix.
#ifndef PLIMSOLL_BENCH_TEST_NODE_H_
#define PLIMSOLL_BENCH_TEST_NODE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace plimsoll::bench {

// Guest i (0-based) of any fleet: its name, uuid and balloon sizes.
struct TestGuest {
  std::string name;  // "guest-00042"
  std::string uuid;  // lowercase, canonical
  int64_t max_bytes = 0;      // <memory>: 1-8 GiB, cycling
  int64_t current_bytes = 0;  // <currentMemory>: the max, or 3/4 of it for every fourth guest
};
TestGuest TestGuestAt(int i);

// Sum of <memory> over guests 0..n-1 (the benchmarks size the host from it).
int64_t TestFleetMaxBytes(int n);

// The <node> document for guests 0..n-1.
std::string TestNodeXml(int n);

// Writes TestNodeXml(n) to `path` (replacing it). The URI is "test://" + absolute path.
absl::Status WriteTestNode(const std::string& path, int n);

// A /proc/meminfo (and /proc/pressure/memory) under `root` for a host whose
// MemTotal is `mem_total_bytes`, half of it available, no pressure: what
// ProcHostReader(root) reads, so a benchmark host can be sized to its fleet.
absl::Status WriteHostProc(const std::string& root, int64_t mem_total_bytes);

}  // namespace plimsoll::bench

#endif  // PLIMSOLL_BENCH_TEST_NODE_H_
