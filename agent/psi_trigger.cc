#include "agent/psi_trigger.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::agent {
namespace {

constexpr int64_t kMinWindowUs = 500'000;
constexpr int64_t kMaxWindowUs = 10'000'000;
constexpr int64_t kUnprivilegedGranularityUs = 2'000'000;

std::string Spec(const std::string& kind, int64_t threshold_us, int64_t window_us) {
  return absl::StrCat(kind, " ", threshold_us, " ", window_us);
}

// Writes `spec` plus its NUL (see the header). Returns 0 or errno.
int WriteSpec(int fd, const std::string& spec) {
  const ssize_t n = write(fd, spec.c_str(), spec.size() + 1);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(spec.size() + 1) ? 0 : EIO;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsiTrigger>> PsiTrigger::Open(const std::string& proc_root,
                                                             const PsiTriggerOptions& options) {
  if (options.kind != "some" && options.kind != "full") {
    return absl::InvalidArgumentError(absl::StrCat("psi trigger kind must be some or full, not ", options.kind));
  }
  const int64_t window_us = absl::ToInt64Microseconds(options.window);
  const int64_t threshold_us = absl::ToInt64Microseconds(options.threshold);
  if (window_us < kMinWindowUs || window_us > kMaxWindowUs) {
    return absl::InvalidArgumentError(
        absl::StrCat("psi trigger window must be 500ms..10s, not ", absl::FormatDuration(options.window)));
  }
  if (threshold_us <= 0 || threshold_us > window_us) {
    return absl::InvalidArgumentError(absl::StrCat("psi trigger threshold must be in (0, window], not ",
                                                   absl::FormatDuration(options.threshold)));
  }
  std::string root = proc_root;
  while (!root.empty() && root.back() == '/') root.pop_back();
  const std::string path = root + "/proc/pressure/memory";

  const int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == EOPNOTSUPP) {
      return absl::UnavailableError(absl::StrCat(path, ": no PSI in this kernel (", strerror(error), ")"));
    }
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open for writing: ", strerror(error)));
  }
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": not on procfs; no trigger armed"));
  }

  std::string spec = Spec(options.kind, threshold_us, window_us);
  int error = WriteSpec(fd, spec);
  int64_t used_window_us = window_us;
  int64_t used_threshold_us = threshold_us;
  if (error == EINVAL && window_us % kUnprivilegedGranularityUs != 0) {
    // Without CAP_SYS_RESOURCE only 2 s multiples are allowed; keep the stall fraction.
    used_window_us = (window_us / kUnprivilegedGranularityUs + 1) * kUnprivilegedGranularityUs;
    used_threshold_us = threshold_us * used_window_us / window_us;
    const std::string retry = Spec(options.kind, used_threshold_us, used_window_us);
    if (WriteSpec(fd, retry) == 0) {
      spec = retry;
      error = 0;
    }
  }
  if (error != 0) {
    close(fd);
    if (error == EOPNOTSUPP) {
      return absl::UnavailableError(absl::StrCat(path, ": PSI is switched off (", strerror(error), ")"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": kernel refused trigger \"", spec, "\": ", strerror(error)));
  }
  return std::unique_ptr<PsiTrigger>(new PsiTrigger(fd, std::move(spec), absl::Microseconds(used_threshold_us),
                                                    absl::Microseconds(used_window_us)));
}

std::unique_ptr<PsiTrigger> PsiTrigger::Adopt(int fd, std::string spec) {
  return std::unique_ptr<PsiTrigger>(new PsiTrigger(fd, std::move(spec), absl::ZeroDuration(), absl::ZeroDuration()));
}

PsiTrigger::~PsiTrigger() { close(fd_); }

absl::StatusOr<bool> PsiTrigger::Wait(absl::Duration timeout) {
  pollfd p{};
  p.fd = fd_;
  p.events = POLLPRI;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(deadline - absl::Now(), absl::Milliseconds(1))));
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "poll on psi trigger");
    }
    if (n == 0) return false;
    if (p.revents & (POLLERR | POLLNVAL)) {
      return absl::FailedPreconditionError("psi trigger is gone (POLLERR)");
    }
    if (p.revents & POLLPRI) return true;
  }
}

}  // namespace plimsoll::agent
