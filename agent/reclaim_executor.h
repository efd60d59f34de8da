// The reclaimer's one side effect: asking the guest kernel to reclaim N bytes by writing "N" to
// the root cgroup's memory.reclaim (cgroup v2, Linux 5.19+; Documentation/admin-guide/
// cgroup-v2.rst). The write returns when the kernel has reclaimed at least N bytes, or fails with
// EAGAIN when it could not (the cache is as small as it can make it now), or EINTR when a signal
// came first; both mean "partial, stop this round". Reclaim at the root acts on the whole guest.
//
// Page cache only where the kernel lets us say so: "N swappiness=0" (Linux 6.9+) keeps the
// kernel from swapping anonymous memory out for this request. Older kernels refuse the key with
// EINVAL, so Open() probes it with "0 swappiness=0", a request for nothing that changes nothing
// where it is accepted, and falls back to plain "N". A plain request reclaims anonymous memory
// too where the guest has swap; without swap (the lab's guests) it can only take file pages and
// reclaimable slab.
//
// Thread-compatible: one reclaimer thread calls it.
#ifndef PLIMSOLL_AGENT_RECLAIM_EXECUTOR_H_
#define PLIMSOLL_AGENT_RECLAIM_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace plimsoll::agent {

enum class ReclaimOutcome {
  kFull,     // the kernel reclaimed (at least) the bytes asked
  kPartial,  // EAGAIN or EINTR: less; stop this round
};

class ReclaimExecutor {
 public:
  virtual ~ReclaimExecutor() = default;
  // Asks for `bytes`. An error (the file went away, EACCES, EINVAL, ...) carries the errno's code
  // and the path.
  virtual absl::StatusOr<ReclaimOutcome> Reclaim(uint64_t bytes) = 0;
  // The requests say "page cache only" (swappiness=0).
  virtual bool file_only() const = 0;
  // Nothing is written: requests are logged and answered kFull (--reclaim=dry_run).
  virtual bool dry_run() const { return false; }
  // Whether file_only() comes from the "0 swappiness=0" probe. False for a dry run opened by
  // DryRunReclaimExecutor::Open, which writes nothing, not even the probe: file_only() is then
  // false and means "not known".
  virtual bool swappiness_probed() const { return true; }
};

// How the real executor opens memory.reclaim.
struct CgroupReclaimOptions {
  // The cgroup v2 mount holding memory.reclaim (--reclaim_root).
  std::string root = "/sys/fs/cgroup";
  // Added to O_WRONLY | O_TRUNC | O_CLOEXEC. Tests only: O_NONBLOCK lets a full FIFO stand for a
  // kernel answering EAGAIN. The real file ignores it today, but a future kernel may give it a
  // meaning (memory.high and memory.max already have one), so production passes 0.
  int extra_open_flags = 0;
};

// Writes to <root>/memory.reclaim.
class CgroupReclaimExecutor : public ReclaimExecutor {
 public:
  // Checks the file is there and writable and probes the swappiness key. Errors say why reclaim
  // is off, for the log and the report:
  // - NOT_FOUND: "no <root>/memory.reclaim: kernel < 5.19, cgroup v1, or cgroup2 not mounted
  //   there";
  // - the errno's code (PERMISSION_DENIED, ...): "<path> is not writable: ...";
  // - the probe's errno's code when it failed with anything but EINVAL.
  static absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> Open(CgroupReclaimOptions options);

  absl::StatusOr<ReclaimOutcome> Reclaim(uint64_t bytes) override;
  bool file_only() const override { return file_only_; }
  const std::string& path() const { return path_; }

 private:
  CgroupReclaimExecutor(std::string path, int extra_open_flags, bool file_only)
      : path_(std::move(path)), extra_open_flags_(extra_open_flags), file_only_(file_only) {}

  const std::string path_;
  const int extra_open_flags_;
  const bool file_only_;
};

// The dry-run twin: logs "reclaim dry_run: would write ..." and answers kFull. Writes nothing.
class DryRunReclaimExecutor : public ReclaimExecutor {
 public:
  // A dry run whose kernel is known to take (or refuse) the swappiness key.
  explicit DryRunReclaimExecutor(bool file_only) : file_only_(file_only), probed_(true) {}

  // --reclaim=dry_run: checks <root>/memory.reclaim is there and can be opened for writing, as
  // CgroupReclaimExecutor::Open does (the same errors), but writes nothing to it: the swappiness
  // probe is skipped, so whether the kernel takes the key is not known (swappiness_probed()
  // false) and each request is logged in both forms.
  static absl::StatusOr<std::unique_ptr<DryRunReclaimExecutor>> Open(CgroupReclaimOptions options);

  absl::StatusOr<ReclaimOutcome> Reclaim(uint64_t bytes) override;
  bool file_only() const override { return file_only_; }
  bool dry_run() const override { return true; }
  bool swappiness_probed() const override { return probed_; }

 private:
  DryRunReclaimExecutor(bool file_only, bool probed) : file_only_(file_only), probed_(probed) {}

  const bool file_only_;
  const bool probed_;
};

// The executor for --reclaim=on (`dry_run` false: CgroupReclaimExecutor::Open, which probes) or
// --reclaim=dry_run (DryRunReclaimExecutor::Open, which writes nothing), with their errors.
absl::StatusOr<std::unique_ptr<ReclaimExecutor>> OpenReclaimExecutor(bool dry_run, CgroupReclaimOptions options);

// What one write to memory.reclaim says: 0 (done), EAGAIN/EINTR (partial) or another errno.
// Exposed for its table test.
absl::StatusOr<ReclaimOutcome> ClassifyReclaimWrite(int err, const std::string& path);

// The text written for a request of `bytes`: "<bytes>" or "<bytes> swappiness=0".
std::string ReclaimRequestText(uint64_t bytes, bool file_only);

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_EXECUTOR_H_
