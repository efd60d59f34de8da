// Compaction after reclaim: what the reclaimer frees goes back to the host only through free
// page reporting, and the balloon driver reports free memory in blocks of pageblock order
// (2 MiB on x86, order 9; Linux's page_reporting_order), never single pages. Page cache that was
// read in pieces frees in pieces: on the lab's guests a 400 MiB reclaim of cold cache left most
// of the freed memory in orders below 9, where the host never sees it (docs/benchmarks.md
// "In-guest reclaim"). Writing 1 to /proc/sys/vm/compact_memory makes the kernel migrate movable
// pages so that free memory merges into whole blocks, which reporting then hands back.
//
// When: once a reclaim round is over (no step for `settle`), if it freed at least
// `min_freed_bytes` since the last compaction, and at most once per `min_interval`: compaction
// migrates pages (a few tens of ms of the guest's CPU for a gigabyte), so it is paid once per
// round, not per step. The rule is CompactionDue, a pure function; Compactor is the one side
// effect.
//
// Thread-compatible: the reclaimer's thread calls it.
#ifndef PLIMSOLL_AGENT_COMPACTION_H_
#define PLIMSOLL_AGENT_COMPACTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace plimsoll::agent {

struct CompactionOptions {
  uint64_t min_freed_bytes = uint64_t{32} << 20;
  // Longer than the gap between two steps of one round (a 128 MiB step at 64 MiB/s: 2 s).
  absl::Duration settle = absl::Seconds(5);
  absl::Duration min_interval = absl::Seconds(30);
};

// Whether to compact now: `freed_since` bytes reclaimed since the last compaction, the last
// step `since_step` ago, the last compaction `since_compaction` ago (infinite when none).
bool CompactionDue(uint64_t freed_since, absl::Duration since_step, absl::Duration since_compaction,
                   const CompactionOptions& options);

class Compactor {
 public:
  virtual ~Compactor() = default;
  // Compacts all of the guest's memory; returns when the kernel is done.
  virtual absl::Status Compact() = 0;
};

// Writes "1" to `path` (/proc/sys/vm/compact_memory).
class ProcCompactor : public Compactor {
 public:
  // Checks that `path` is there and writable. NOT_FOUND: "no <path>: kernel without
  // CONFIG_COMPACTION"; otherwise the errno's code ("<path> is not writable: ...").
  static absl::StatusOr<std::unique_ptr<ProcCompactor>> Open(std::string path = "/proc/sys/vm/compact_memory");
  absl::Status Compact() override;

 private:
  explicit ProcCompactor(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_COMPACTION_H_
