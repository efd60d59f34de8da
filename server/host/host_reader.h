// server/host/: the host /proc seam (this interface, ProcHostReader, and in testing/ the one
// fake). It knows nothing of guests, policies or the loop.
//
// The host-side /proc seam: the only place the daemon reads the host's /proc.
#ifndef PLIMSOLL_SERVER_HOST_HOST_READER_H_
#define PLIMSOLL_SERVER_HOST_HOST_READER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace plimsoll::host {

struct HostMemory {
  int64_t mem_total_bytes = 0;
  int64_t mem_free_bytes = 0;
  int64_t mem_available_bytes = 0;
  int64_t buffers_bytes = 0;
  int64_t cached_bytes = 0;
  // Absent on kernels without PSI (or with psi=0).
  std::optional<double> psi_some_avg10;
  std::optional<double> psi_full_avg10;
  std::optional<uint64_t> psi_some_total_us;
};

// Thread-compatible.
class HostReader {
 public:
  virtual ~HostReader() = default;
  // Reads <proc_root>/proc/meminfo and <proc_root>/proc/pressure/memory.
  virtual absl::StatusOr<HostMemory> Read() = 0;
};

}  // namespace plimsoll::host

#endif  // PLIMSOLL_SERVER_HOST_HOST_READER_H_
