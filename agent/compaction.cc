#include "agent/compaction.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plimsoll::agent {

bool CompactionDue(uint64_t freed_since, absl::Duration since_step, absl::Duration since_compaction,
                   const CompactionOptions& o) {
  return freed_since >= o.min_freed_bytes && since_step >= o.settle && since_compaction >= o.min_interval;
}

absl::StatusOr<std::unique_ptr<ProcCompactor>> ProcCompactor::Open(std::string path) {
  // access(), not a probe write: a write compacts. W_OK also sees a read-only mount (a unit's
  // ProtectKernelTunables= without a ReadWritePaths= for the file: EROFS).
  if (access(path.c_str(), W_OK) != 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no ", path, ": kernel without CONFIG_COMPACTION"));
    return absl::ErrnoToStatus(err, absl::StrCat(path, " is not writable"));
  }
  return std::unique_ptr<ProcCompactor>(new ProcCompactor(std::move(path)));
}

absl::Status ProcCompactor::Compact() {
  const int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path_));
  const ssize_t n = write(fd, "1", 1);
  const int err = errno;
  close(fd);
  if (n != 1) return absl::ErrnoToStatus(n < 0 ? err : EIO, absl::StrCat("write ", path_));
  return absl::OkStatus();
}

}  // namespace plimsoll::agent
