// The production HostReader: reads the host's /proc/meminfo and /proc/pressure/memory under a
// configurable root, so tests point it at a fake tree and the daemon at "" (the real /proc).
// It only opens and reads files; all parsing is done by common/proc_parsers.
#ifndef PLIMSOLL_SERVER_HOST_PROC_HOST_READER_H_
#define PLIMSOLL_SERVER_HOST_PROC_HOST_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/host/host_reader.h"

namespace plimsoll::host {

// Thread-safe: Read() keeps no state between calls, so one instance may serve several threads.
class ProcHostReader : public HostReader {
 public:
  // `proc_root` is the directory that holds "proc/": "" (or "/") for the real host, a temporary
  // directory in tests. A trailing '/' is ignored.
  explicit ProcHostReader(std::string proc_root);

  // Reads both files afresh on every call (no caching). Errors name the file:
  // - meminfo unreadable: the errno's code (NOT_FOUND, PERMISSION_DENIED, ...);
  // - meminfo malformed, or without MemTotal, MemFree, MemAvailable, Buffers or Cached:
  //   INVALID_ARGUMENT;
  // - pressure/memory absent (no such file or directory, or EOPNOTSUPP from a kernel with PSI
  //   switched off): not an error, the psi_* fields are left absent;
  // - pressure/memory present but unreadable or malformed: an error, so a broken PSI file is
  //   noticed rather than silently read as "no pressure". A file without a "full" line leaves
  //   psi_full_avg10 absent.
  // Each file is read up to kMaxProcTextBytes; a larger file is INVALID_ARGUMENT.
  absl::StatusOr<HostMemory> Read() override;

  // The two paths Read() opens, for logs and --help texts.
  const std::string& meminfo_path() const { return meminfo_path_; }
  const std::string& psi_path() const { return psi_path_; }

 private:
  const std::string meminfo_path_;
  const std::string psi_path_;
};

}  // namespace plimsoll::host

#endif  // PLIMSOLL_SERVER_HOST_PROC_HOST_READER_H_
