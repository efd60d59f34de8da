// The time at the start of a log line (log.h), formatted without absl::FormatTime's time-zone
// work for every line.
#ifndef PLIMSOLL_COMMON_LOG_TIME_H_
#define PLIMSOLL_COMMON_LOG_TIME_H_

#include <string>

#include "absl/time/time.h"

namespace plimsoll {

// Appends "YYYY-mm-ddTHH:MM:SS.uuuuuuZ": what
// absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()) prints. Thread-safe.
void AppendLogTime(absl::Time t, std::string* out);

}  // namespace plimsoll

#endif  // PLIMSOLL_COMMON_LOG_TIME_H_
