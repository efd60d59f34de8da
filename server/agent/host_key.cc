#include "server/agent/host_key.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/small_file.h"
#include "protocol/report_proof.h"

namespace plimsoll::server::agent {

absl::StatusOr<std::string> LoadHostKey(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": stat failed"));
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: mode %03o lets group or others access the key; chmod 600", path, st.st_mode & 0777));
  }
  absl::StatusOr<std::string> text = plimsoll::ReadSmallFile(path, 4096);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> key = plimsoll::protocol::ParseHexSecret(*text, plimsoll::protocol::kMinHostKeyBytes);
  if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", key.status().message()));
  return key;
}

absl::Status GenerateHostKey(const std::string& path) {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return absl::InternalError("RAND_bytes failed");
  const std::string hex =
      plimsoll::protocol::ToHex(absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw))) + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot create"));
  const ssize_t n = write(fd, hex.data(), hex.size());
  const int write_errno = errno;
  close(fd);
  if (n != static_cast<ssize_t>(hex.size())) {
    unlink(path.c_str());
    return absl::ErrnoToStatus(n < 0 ? write_errno : EIO, absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LoadOrCreateHostKey(const std::string& path) {
  absl::StatusOr<std::string> key = LoadHostKey(path);
  if (!absl::IsNotFound(key.status())) return key;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (absl::Status s = GenerateHostKey(path); !s.ok()) return s;
  PLOG_INFO << "created agent host key " << path;
  return LoadHostKey(path);
}

}  // namespace plimsoll::server::agent
