// Test helpers shared by the agent channel tests: a guest's /proc tree built from this
// machine's captures, a file read whole, and a bounded wait.
#ifndef PLIMSOLL_SERVER_AGENT_TESTING_GUEST_PROC_TREE_H_
#define PLIMSOLL_SERVER_AGENT_TESTING_GUEST_PROC_TREE_H_

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace plimsoll::server::agent::testing {

// Polls `done` every 5 ms; false when `timeout` passed first.
inline bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(15)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A fresh directory under the test's temp dir named after `prefix`, holding proc/meminfo,
// proc/vmstat and proc/pressure/memory (with PSI) from common/testdata.
inline std::string MakeProcTree(const std::string& prefix) {
  std::string root = ::testing::TempDir() + "/" + prefix + "_XXXXXX";
  EXPECT_NE(mkdtemp(root.data()), nullptr);
  mkdir((root + "/proc").c_str(), 0755);
  mkdir((root + "/proc/pressure").c_str(), 0755);
  std::ofstream(root + "/proc/meminfo") << ReadFile("common/testdata/meminfo_host.txt");
  std::ofstream(root + "/proc/vmstat") << ReadFile("common/testdata/vmstat_host.txt");
  std::ofstream(root + "/proc/pressure/memory") << ReadFile("common/testdata/pressure_memory_busy.txt");
  return root;
}

}  // namespace plimsoll::server::agent::testing

#endif  // PLIMSOLL_SERVER_AGENT_TESTING_GUEST_PROC_TREE_H_
