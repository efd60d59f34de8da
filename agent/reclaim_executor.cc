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

// <root>/memory.reclaim when it is there, else why reclaim is unsupported.
absl::StatusOr<std::string> ReclaimPath(const std::string& root_in) {
  std::string root = root_in;
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
  return path;
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
  absl::StatusOr<std::string> found = ReclaimPath(options.root);
  if (!found.ok()) return found.status();
  const std::string& path = *found;
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

absl::StatusOr<std::unique_ptr<DryRunReclaimExecutor>> DryRunReclaimExecutor::Open(CgroupReclaimOptions options) {
  absl::StatusOr<std::string> found = ReclaimPath(options.root);
  if (!found.ok()) return found.status();
  // Opened for writing and closed: nothing is written (no O_TRUNC either).
  const int fd = open(found->c_str(), O_WRONLY | O_CLOEXEC | options.extra_open_flags);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(*found, " is not writable"));
  close(fd);
  return std::unique_ptr<DryRunReclaimExecutor>(new DryRunReclaimExecutor(/*file_only=*/false, /*probed=*/false));
}

absl::StatusOr<std::unique_ptr<ReclaimExecutor>> OpenReclaimExecutor(bool dry_run, CgroupReclaimOptions options) {
  if (dry_run) {
    absl::StatusOr<std::unique_ptr<DryRunReclaimExecutor>> e = DryRunReclaimExecutor::Open(std::move(options));
    if (!e.ok()) return e.status();
    return std::unique_ptr<ReclaimExecutor>(*std::move(e));
  }
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open(std::move(options));
  if (!e.ok()) return e.status();
  return std::unique_ptr<ReclaimExecutor>(*std::move(e));
}

absl::StatusOr<ReclaimOutcome> DryRunReclaimExecutor::Reclaim(uint64_t bytes) {
  if (probed_) {
    PLOG_INFO << "reclaim dry_run: would write \"" << ReclaimRequestText(bytes, file_only_) << "\" to memory.reclaim";
  } else {
    PLOG_INFO << "reclaim dry_run: would write \"" << ReclaimRequestText(bytes, true) << "\" to memory.reclaim, or \""
              << ReclaimRequestText(bytes, false) << "\" where the kernel refuses the swappiness key (not probed: a "
              << "dry run writes nothing)";
  }
  return ReclaimOutcome::kFull;
}

}  // namespace plimsoll::agent
