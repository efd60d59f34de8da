#include "server/state/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace plimsoll::server {
namespace {

using ::plimsoll::v1::ControlState;

constexpr char kHeader[] =
    "# plimsoll control state (plimsoll.v1.ControlState), written by plimsolld.\n"
    "# Change it with plimsollctl, not by hand: the last line checks every byte above it.\n";
constexpr char kChecksumPrefix[] = "# plimsoll-checksum crc32c=";

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (error.empty()) error = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  std::string error;
};

std::string ErrnoMessage(int err) { return strerror(err); }

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": ", ErrnoMessage(err));
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOENT:
      return absl::NotFoundError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

// Writes all of `data` to `fd`.
bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  const auto& t = CrcTable();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = t[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string SerializeControlState(const ControlState& state) {
  std::string body = kHeader;
  std::string text;
  google::protobuf::TextFormat::PrintToString(state, &text);
  body += text;
  return absl::StrCat(body, kChecksumPrefix, absl::StrFormat("%08x", Crc32c(body)), " length=", body.size(),
                      "\n");
}

absl::StatusOr<ControlState> ParseControlState(absl::string_view text) {
  // The checksum line is the last line.
  absl::string_view trimmed = text;
  if (!absl::ConsumeSuffix(&trimmed, "\n")) {
    return absl::DataLossError("the file does not end with a newline (truncated?)");
  }
  const size_t nl = trimmed.rfind('\n');
  const absl::string_view last = nl == absl::string_view::npos ? trimmed : trimmed.substr(nl + 1);
  const absl::string_view body = nl == absl::string_view::npos ? absl::string_view() : text.substr(0, nl + 1);
  absl::string_view rest = last;
  if (!absl::ConsumePrefix(&rest, kChecksumPrefix)) {
    return absl::DataLossError("the last line is not the checksum line (truncated?)");
  }
  uint32_t want = 0;
  size_t length = 0;
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, ' ');
  if (parts.size() != 2 || parts[0].size() != 8 || !absl::SimpleHexAtoi(parts[0], &want) ||
      !absl::StartsWith(parts[1], "length=") || !absl::SimpleAtoi(parts[1].substr(7), &length)) {
    return absl::DataLossError(absl::StrCat("malformed checksum line \"", last, "\""));
  }
  if (length != body.size()) {
    return absl::DataLossError(
        absl::StrCat("the checksum line covers ", length, " bytes but ", body.size(), " precede it"));
  }
  const uint32_t got = Crc32c(body);
  if (got != want) {
    return absl::DataLossError(absl::StrFormat("checksum mismatch: the file says crc32c=%08x, its bytes give %08x",
                                               want, got));
  }
  // The version first, leniently, so a newer file is reported as such rather
  // than as unparseable.
  {
    ControlState lenient;
    google::protobuf::TextFormat::Parser parser;
    parser.AllowUnknownField(true);
    parser.AllowUnknownExtension(true);
    FirstError errors;
    parser.RecordErrorsTo(&errors);
    if (parser.ParseFromString(std::string(body), &lenient) && lenient.version() != kControlStateVersion) {
      return absl::FailedPreconditionError(absl::StrCat("version ", lenient.version(),
                                                        " is not one this plimsolld reads (it reads ",
                                                        kControlStateVersion, ")"));
    }
  }
  ControlState state;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(body), &state)) {
    return absl::DataLossError(absl::StrCat("does not parse: ", errors.error));
  }
  if (state.version() != kControlStateVersion) {
    return absl::FailedPreconditionError(absl::StrCat("version ", state.version(),
                                                      " is not one this plimsolld reads (it reads ",
                                                      kControlStateVersion, ")"));
  }
  return state;
}

StateStore::StateStore(std::string path, Clock* clock) : path_(std::move(path)), clock_(clock) {}

absl::StatusOr<StateLoad> StateStore::Load() {
  StateLoad out;
  out.state.set_version(kControlStateVersion);
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return out;
    return ErrnoStatus(err, absl::StrCat("cannot read state file ", path_));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read state file ", path_));
  out.existed = true;
  auto parsed = ParseControlState(buffer.str());
  if (parsed.ok()) {
    out.state = *parsed;
    absl::MutexLock l(&mu_);
    generation_ = out.state.generation();
    return out;
  }
  // Unusable: keep it for the operator under a name that says why.
  const std::string stamp = absl::FormatTime("%Y%m%dT%H%M%SZ", clock_->Now(), absl::UTCTimeZone());
  const bool version = parsed.status().code() == absl::StatusCode::kFailedPrecondition;
  std::string aside = version ? absl::StrCat(path_, ".unsupported-version-", stamp) : absl::StrCat(path_, ".corrupt-", stamp);
  for (int n = 1; std::filesystem::exists(aside); ++n) {
    aside = absl::StrCat(version ? absl::StrCat(path_, ".unsupported-version-", stamp)
                                 : absl::StrCat(path_, ".corrupt-", stamp),
                         "-", n);
  }
  if (rename(path_.c_str(), aside.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("state file ", path_, " is unusable (", parsed.status().message(),
                                           ") and cannot be set aside as ", aside));
  }
  out.set_aside_path = aside;
  out.problem = absl::Status(
      parsed.status().code(),
      absl::StrCat("state file ", path_, " is unusable (", parsed.status().message(), "); kept as ", aside,
                   "; starting without overrides or runtime host policy"));
  return out;
}

absl::StatusOr<ControlState> StateStore::Save(ControlState state) {
  absl::MutexLock l(&mu_);
  state.set_version(kControlStateVersion);
  state.set_generation(generation_ + 1);
  state.set_written_unix_micros(absl::ToUnixMicros(clock_->Now()));
  const std::string data = SerializeControlState(state);

  const std::filesystem::path path(path_);
  const std::string dir = path.has_parent_path() ? path.parent_path().string() : ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = path_ + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot write state file ", tmp));
  if (!WriteAll(fd, data) || fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot write state file ", tmp));
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot write state file ", tmp));
  }
  if (rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot rename ", tmp, " to ", path_));
  }
  // The rename itself must reach the disk before we say the state is saved.
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    const int err = errno;
    if (dfd >= 0) close(dfd);
    return ErrnoStatus(err, absl::StrCat("cannot sync directory ", dir));
  }
  close(dfd);
  generation_ = state.generation();
  return state;
}

}  // namespace plimsoll::server
