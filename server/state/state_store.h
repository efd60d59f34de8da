// Persistence of the control plane's state (guest overrides, runtime host
// policy) in one file, plimsoll.v1.ControlState in protobuf text format:
//
//   # plimsoll control state: written by plimsolld; change it with plimsollctl
//   version: 1
//   generation: 42
//   ...
//   # plimsoll-checksum crc32c=1a2b3c4d length=812
//
// The last line checks every byte before it, so a truncated or damaged file is
// detected rather than half-read (a text proto cut at a line boundary would
// otherwise parse as a valid, shorter state).
//
// Writes are atomic: the new state goes to "<path>.tmp" in the same directory,
// which is fsync'ed, renamed over <path>, and the directory fsync'ed. A crash
// at any point leaves either the old or the new file.
//
// A file that cannot be used (damaged, or a version this daemon does not
// read) is never silently dropped: Load() renames it aside to
// "<path>.corrupt-<UTC time>" or "<path>.version-<N>-<UTC time>", reports
// that in StateLoad::problem, and starts from an empty state.
//
// Thread-safety: Load and Save may be called from any thread; Saves are
// serialised internally. One process per file.
#ifndef PLIMSOLL_SERVER_STATE_STATE_STORE_H_
#define PLIMSOLL_SERVER_STATE_STATE_STORE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "plimsoll/v1/types.pb.h"

namespace plimsoll::server {

inline constexpr uint32_t kControlStateVersion = 1;

// The text of a state file for `state` (header, text proto, checksum line).
std::string SerializeControlState(const plimsoll::v1::ControlState& state);

// Parses a state file's text. DATA_LOSS when the checksum line is missing or
// wrong or the text does not parse; FAILED_PRECONDITION when the version is
// not kControlStateVersion. Messages say which and where.
absl::StatusOr<plimsoll::v1::ControlState> ParseControlState(absl::string_view text);

// CRC-32C (Castagnoli) of `data`.
uint32_t Crc32c(absl::string_view data);

// What Load found.
struct StateLoad {
  // The state to run with: the file's, or empty (version 1, generation 0)
  // when there was no usable file.
  plimsoll::v1::ControlState state;
  // True when a file existed (usable or not).
  bool existed = false;
  // Not OK when the file existed but was unusable; it was then renamed to
  // `set_aside_path`. The message names both paths and the defect.
  absl::Status problem;
  std::string set_aside_path;
};

class StateStore {
 public:
  // `clock` stamps writes and set-aside names; borrowed.
  StateStore(std::string path, Clock* clock);

  // Reads the file. A missing file is an empty state. An unusable file is set
  // aside (see above). Errors only when the file cannot be read at all or
  // cannot be set aside (PERMISSION_DENIED, ...): the caller should refuse
  // to start rather than run without the operator's overrides.
  absl::StatusOr<StateLoad> Load();

  // Writes `state` atomically with version = kControlStateVersion, the next
  // generation (one above the last loaded or saved) and the current time.
  // Returns what was written. On error the previous file is untouched.
  absl::StatusOr<plimsoll::v1::ControlState> Save(plimsoll::v1::ControlState state);

  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  Clock* clock_;
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_STATE_STATE_STORE_H_
