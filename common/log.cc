#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log_time.h"

namespace plimsoll {
namespace {
std::atomic<int> min_level{0};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
  }
  return "?";
}
}  // namespace

void SetMinLogLevel(LogLevel level) { min_level.store(static_cast<int>(level)); }

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level), file_(file), line_(line) {}

LogMessage::~LogMessage() {
  if (static_cast<int>(level_) < min_level.load()) return;
  const char* base = strrchr(file_, '/');
  const std::string message = stream_.str();
  std::string line;
  line.reserve(message.size() + 64);
  line.append(LevelName(level_));
  line.push_back(' ');
  AppendLogTime(absl::Now(), &line);
  line.push_back(' ');
  line.append(base ? base + 1 : file_);
  line.push_back(':');
  line.append(std::to_string(line_));
  line.append("] ");
  line.append(message);
  line.push_back('\n');
  // One write() per line keeps lines from different threads whole.
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace plimsoll
