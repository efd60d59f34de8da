#include "common/small_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace plimsoll {

int ReadBoundedFile(const std::string& path, size_t limit, std::string* text) {
  text->clear();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int error = 0;
  while (text->size() <= limit) {
    const size_t old_size = text->size();
    const size_t want = std::min<size_t>(16384, limit + 1 - old_size);
    text->resize(old_size + want);
    const ssize_t n = read(fd, text->data() + old_size, want);
    if (n < 0) {
      text->resize(old_size);
      if (errno == EINTR) continue;
      error = errno;
      break;
    }
    text->resize(old_size + static_cast<size_t>(n));
    if (n == 0) break;
  }
  close(fd);
  return error;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit) {
  std::string text;
  if (int error = ReadBoundedFile(path, limit, &text); error != 0) {
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": read failed"));
  }
  if (text.size() > limit) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", limit, " bytes"));
  }
  return text;
}

}  // namespace plimsoll
