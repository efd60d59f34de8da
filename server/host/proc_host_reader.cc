#include "server/host/proc_host_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/proc_parsers.h"

namespace plimsoll::host {
namespace {

std::string RootWithoutTrailingSlash(std::string root) {
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root;
}

// Closes a file descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { close(fd_); }

 private:
  int fd_;
};

struct ReadResult {
  int error = 0;  // errno of the failed open() or read(); 0 on success
  std::string text;
};

// Reads the whole file at `path`, at most kMaxProcTextBytes + 1 bytes (one more than the parsers
// accept, so an oversized file is reported by them rather than silently cut). /proc files report
// size 0, so this reads until EOF instead of trusting stat().
ReadResult ReadBounded(const std::string& path) {
  ReadResult result;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    result.error = errno;
    return result;
  }
  FdCloser closer(fd);
  constexpr size_t kLimit = kMaxProcTextBytes + 1;
  constexpr size_t kChunk = 16384;
  while (result.text.size() < kLimit) {
    const size_t old_size = result.text.size();
    const size_t want = std::min(kChunk, kLimit - old_size);
    result.text.resize(old_size + want);
    const ssize_t n = read(fd, result.text.data() + old_size, want);
    if (n < 0) {
      result.text.resize(old_size);
      if (errno == EINTR) continue;
      result.error = errno;
      return result;
    }
    result.text.resize(old_size + static_cast<size_t>(n));
    if (n == 0) break;
  }
  return result;
}

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

absl::StatusOr<int64_t> RequireBytes(const Meminfo& info, absl::string_view field,
                                     const std::string& path) {
  std::optional<int64_t> value = info.Bytes(field);
  if (!value.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no ", field, " line in kB"));
  }
  return *value;
}

}  // namespace

ProcHostReader::ProcHostReader(std::string proc_root)
    : meminfo_path_(RootWithoutTrailingSlash(proc_root) + "/proc/meminfo"),
      psi_path_(RootWithoutTrailingSlash(std::move(proc_root)) + "/proc/pressure/memory") {}

absl::StatusOr<HostMemory> ProcHostReader::Read() {
  ReadResult meminfo_file = ReadBounded(meminfo_path_);
  if (meminfo_file.error != 0) {
    return absl::ErrnoToStatus(meminfo_file.error, absl::StrCat(meminfo_path_, ": read failed"));
  }
  absl::StatusOr<Meminfo> info = ParseMeminfo(meminfo_file.text);
  if (!info.ok()) return WithPath(meminfo_path_, info.status());

  HostMemory memory;
  struct Field {
    absl::string_view name;
    int64_t* out;
  };
  for (const Field& field : {Field{"MemTotal", &memory.mem_total_bytes},
                             Field{"MemFree", &memory.mem_free_bytes},
                             Field{"MemAvailable", &memory.mem_available_bytes},
                             Field{"Buffers", &memory.buffers_bytes},
                             Field{"Cached", &memory.cached_bytes}}) {
    absl::StatusOr<int64_t> value = RequireBytes(*info, field.name, meminfo_path_);
    if (!value.ok()) return value.status();
    *field.out = *value;
  }

  ReadResult psi_file = ReadBounded(psi_path_);
  if (psi_file.error == ENOENT || psi_file.error == ENOTDIR || psi_file.error == EOPNOTSUPP) {
    return memory;  // No PSI on this kernel: the psi_* fields stay absent.
  }
  if (psi_file.error != 0) {
    return absl::ErrnoToStatus(psi_file.error, absl::StrCat(psi_path_, ": read failed"));
  }
  absl::StatusOr<Psi> psi = ParsePsi(psi_file.text);
  if (!psi.ok()) return WithPath(psi_path_, psi.status());
  if (psi->some.has_value()) {
    memory.psi_some_avg10 = psi->some->avg10;
    memory.psi_some_total_us = psi->some->total_us;
  }
  if (psi->full.has_value()) memory.psi_full_avg10 = psi->full->avg10;
  return memory;
}

}  // namespace plimsoll::host
