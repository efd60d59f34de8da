// Bounded reads of small files (/proc, /sys, key and token files), for the agent and the daemon
// alike. /proc and /sys files report size 0, so these read until EOF, never trusting st_size.
#ifndef PLIMSOLL_COMMON_SMALL_FILE_H_
#define PLIMSOLL_COMMON_SMALL_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace plimsoll {

// Reads at most `limit` + 1 bytes of `path` into `text` (one byte past the limit, so an
// oversized file is reported rather than silently cut). Returns 0 or the errno of the failed
// open() or read(), for callers that treat ENOENT as "not there" rather than as an error.
int ReadBoundedFile(const std::string& path, size_t limit, std::string* text);

// Reads a whole small file (at most `limit` bytes; more is INVALID_ARGUMENT). Errors carry the
// errno's code and the path.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit);

}  // namespace plimsoll

#endif  // PLIMSOLL_COMMON_SMALL_FILE_H_
