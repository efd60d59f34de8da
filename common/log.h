// A thin logger: abseil 20220623 (Debian 12) has no absl/log yet.
// One line per event on stderr, "LEVEL YYYY-mm-ddTHH:MM:SS.uuuuuuZ file:line] message";
// under systemd the journal adds its own metadata. Thread-safe (one write per line).
#ifndef PLIMSOLL_COMMON_LOG_H_
#define PLIMSOLL_COMMON_LOG_H_

#include <sstream>

namespace plimsoll {

enum class LogLevel { kInfo = 0, kWarning = 1, kError = 2 };

// Messages below this level are dropped. Default kInfo.
void SetMinLogLevel(LogLevel level);

// Collects one message and writes it on destruction.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace plimsoll

#define PLOG_INFO ::plimsoll::LogMessage(::plimsoll::LogLevel::kInfo, __FILE__, __LINE__).stream()
#define PLOG_WARNING ::plimsoll::LogMessage(::plimsoll::LogLevel::kWarning, __FILE__, __LINE__).stream()
#define PLOG_ERROR ::plimsoll::LogMessage(::plimsoll::LogLevel::kError, __FILE__, __LINE__).stream()

#endif  // PLIMSOLL_COMMON_LOG_H_
