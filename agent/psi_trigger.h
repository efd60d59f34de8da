// A PSI trigger on the guest's /proc/pressure/memory: the kernel wakes a poll()er with POLLPRI
// when memory stall time crosses `threshold` within a sliding `window`, so the agent reports a
// pressure spike within one window instead of waiting for its next interval, without busy
// polling (Documentation/accounting/psi.rst).
//
// Kernel rules this class lives with:
// - The trigger text must be written with its terminating NUL: the kernel overwrites the last
//   byte written with one, so "some 150000 1000000" without it would arm a 100 ms window.
// - Windows are 500 ms..10 s and threshold <= window.
// - A writer without CAP_SYS_RESOURCE (an unprivileged agent, or root in a container that lacks
//   it) may only use windows that are multiples of 2 s (Linux 6.5+). Open() then retries with
//   the window rounded up to the next 2 s multiple and the threshold scaled by the same factor,
//   so the stall *fraction* that fires is unchanged; effective_spec() says what was armed.
// - The trigger lives as long as the file descriptor; at most one event per window.
#ifndef PLIMSOLL_AGENT_PSI_TRIGGER_H_
#define PLIMSOLL_AGENT_PSI_TRIGGER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace plimsoll::agent {

struct PsiTriggerOptions {
  // "some" (at least one task stalled) or "full" (all non-idle tasks stalled).
  std::string kind = "some";
  absl::Duration threshold = absl::Milliseconds(150);
  absl::Duration window = absl::Seconds(1);
};

// Owns the trigger's file descriptor. Thread-compatible: one thread waits on it.
class PsiTrigger {
 public:
  // Opens <proc_root>/proc/pressure/memory and arms the trigger.
  // - UNAVAILABLE: the kernel has no PSI (no such file, or "psi=0").
  // - FAILED_PRECONDITION: the file is not on procfs (a fake tree in tests: writing a trigger
  //   there would overwrite test data), or cannot be opened for writing.
  // - INVALID_ARGUMENT: bad options, or the kernel refused the trigger (also after the 2 s
  //   retry); the message gives the text written and the errno.
  static absl::StatusOr<std::unique_ptr<PsiTrigger>> Open(const std::string& proc_root,
                                                          const PsiTriggerOptions& options);
  // Adopts a descriptor that is already armed and signals POLLPRI: a trigger opened by someone
  // else (a supervisor passing it down), or any POLLPRI source (a TCP socket with urgent data
  // drives the reporter's spike path without real memory pressure). `spec` is what it reports
  // as its trigger. Takes ownership of `fd`.
  static std::unique_ptr<PsiTrigger> Adopt(int fd, std::string spec);

  ~PsiTrigger();
  PsiTrigger(const PsiTrigger&) = delete;
  PsiTrigger& operator=(const PsiTrigger&) = delete;

  // The descriptor to poll() for POLLPRI (an event) and POLLERR (the trigger is gone).
  int fd() const { return fd_; }

  // Waits up to `timeout` for an event. True: the trigger fired; false: timeout.
  // FAILED_PRECONDITION on POLLERR/POLLNVAL. Convenience for tests and simple callers; the
  // reporter polls fd() together with its own wake-up descriptor.
  absl::StatusOr<bool> Wait(absl::Duration timeout);

  // What the kernel accepted, e.g. "some 300000 2000000" (microseconds).
  const std::string& effective_spec() const { return spec_; }
  absl::Duration effective_window() const { return window_; }
  absl::Duration effective_threshold() const { return threshold_; }

 private:
  PsiTrigger(int fd, std::string spec, absl::Duration threshold, absl::Duration window)
      : fd_(fd), spec_(std::move(spec)), threshold_(threshold), window_(window) {}

  int fd_;
  std::string spec_;
  absl::Duration threshold_;
  absl::Duration window_;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_PSI_TRIGGER_H_
