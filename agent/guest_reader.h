// Reads what only the guest knows: /proc/meminfo, /proc/vmstat and /proc/pressure/memory under a
// configurable root, turned into the report's sample messages by pure functions (FillSample and
// friends) over the common parsers. Tests and fuzzers feed the pure functions literal texts; the
// reader itself only opens and reads files.
//
// Absent is not zero: a field the guest kernel does not print stays unset in the message, a
// kernel without PSI leaves memory_pressure unset.
#ifndef PLIMSOLL_AGENT_GUEST_READER_H_
#define PLIMSOLL_AGENT_GUEST_READER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/proc_parsers.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

// The three files as read. `psi_memory` is nullopt when the kernel has no PSI.
struct ProcTexts {
  std::string meminfo;
  std::string vmstat;
  std::optional<std::string> psi_memory;
};

// Copies the meminfo fields the report carries, in bytes; lines the kernel lacks stay unset.
void FillMeminfo(const Meminfo& meminfo, v1::GuestMeminfo* out);

// Copies the vmstat counters the report carries. Sums (pgscan_total, allocstall, ...) are set
// when at least one of their parts is present. Older kernels' names are mapped as documented
// in agent.proto.
void FillVmstat(const Vmstat& vmstat, v1::GuestVmstat* out);

// Copies the PSI lines; `out->full` stays unset when the kernel printed no "full" line.
void FillPsi(const Psi& psi, v1::GuestPsi* out);

// Parses the three texts and sets report->meminfo, vmstat and memory_pressure (cleared first,
// so nothing from an earlier sample survives). INVALID_ARGUMENT, naming the file, when any
// present text does not parse; `report` is then left with the three fields cleared.
absl::Status FillSample(const ProcTexts& texts, v1::AgentReport* report);

// Where the report's samples come from; the reporter depends on this, tests substitute it.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Sets report->meminfo, vmstat and memory_pressure to a fresh sample.
  virtual absl::Status Read(v1::AgentReport* report) = 0;
};

// The /proc implementation. Thread-compatible; it keeps no state between calls.
class GuestReader : public SampleSource {
 public:
  // `proc_root` is the directory that holds "proc/": "" (or "/") for the real guest, a
  // temporary tree in tests. A trailing '/' is ignored.
  explicit GuestReader(std::string proc_root);

  // Reads the three files afresh. Errors name the file: meminfo or vmstat unreadable (errno's
  // code) or malformed (INVALID_ARGUMENT); pressure/memory absent (ENOENT) or switched off
  // (EOPNOTSUPP, "psi=0") is not an error and leaves memory_pressure unset, but present and
  // unreadable or malformed is, so a broken PSI file is noticed rather than read as "no
  // pressure". Each file is read up to kMaxProcTextBytes.
  absl::Status Read(v1::AgentReport* report) override;

  // The kernel's boot id (<root>/proc/sys/kernel/random/boot_id), normalised to the canonical
  // lower-case UUID form; INVALID_ARGUMENT if it is not a UUID.
  absl::StatusOr<std::string> ReadBootId() const;

  const std::string& root() const { return root_; }

 private:
  const std::string root_;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_GUEST_READER_H_
