#include "agent/reclaim_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace plimsoll::agent {
namespace {

// Opens `path` for writing (never creating it) and writes `text` in one call. Returns 0 or the
// errno of the failed open() or write().
int WriteOnce(const std::string& path, const std::string& text, int extra_flags) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | extra_flags);
  if (fd < 0) return errno;
  int err = 0;
  const ssize_t n = write(fd, text.data(), text.size());
  if (n < 0) {
    err = errno;
  } else if (static_cast<size_t>(n) != text.size()) {
    // kernfs takes a write whole or refuses it; a short write means this is not such a file.
    err = EIO;
  }
  close(fd);
  return err;
}

}  // namespace

std::string ReclaimRequestText(uint64_t bytes, bool file_only) {
  return file_only ? absl::StrCat(bytes, " swappiness=0") : absl::StrCat(bytes);
}

absl::StatusOr<ReclaimOutcome> ClassifyReclaimWrite(int err, const std::string& path) {
  switch (err) {
    case 0: return ReclaimOutcome::kFull;
    case EAGAIN: return ReclaimOutcome::kPartial;  // reclaimed less than asked, after retrying
    case EINTR: return ReclaimOutcome::kPartial;   // a signal ended the kernel's loop early
    default: return absl::ErrnoToStatus(err, absl::StrCat("write ", path));
  }
}

absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> CgroupReclaimExecutor::Open(CgroupReclaimOptions options) {
  std::string root = options.root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  const std::string path = root + "/memory.reclaim";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("no ", path, ": kernel < 5.19, cgroup v1, or cgroup2 not mounted at ", root));
    }
    return absl::ErrnoToStatus(err, absl::StrCat("stat ", path));
  }
  // A request for nothing: accepted as-is by kernels that know the swappiness key, refused with
  // EINVAL by those that do not. It also proves the file can be opened for writing.
  const int probe = WriteOnce(path, ReclaimRequestText(0, /*file_only=*/true), options.extra_open_flags);
  if (probe != 0 && probe != EINVAL) {
    return absl::ErrnoToStatus(probe, absl::StrCat(path, " is not writable"));
  }
  return std::unique_ptr<CgroupReclaimExecutor>(
      new CgroupReclaimExecutor(path, options.extra_open_flags, /*file_only=*/probe == 0));
}

absl::StatusOr<ReclaimOutcome> CgroupReclaimExecutor::Reclaim(uint64_t bytes) {
  return ClassifyReclaimWrite(WriteOnce(path_, ReclaimRequestText(bytes, file_only_), extra_open_flags_), path_);
}

absl::StatusOr<ReclaimOutcome> DryRunReclaimExecutor::Reclaim(uint64_t bytes) {
  PLOG_INFO << "reclaim dry_run: would write \"" << ReclaimRequestText(bytes, file_only_) << "\" to memory.reclaim";
  return ReclaimOutcome::kFull;
}

}  // namespace plimsoll::agent
