#include "server/hypervisor/qemu_guest_stats.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace plimsoll::hypervisor {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// JSON numbers arrive as doubles: exact up to 2^53, which no guest counter reaches. 2^64-1 (a stat
// the guest never sent) reads as 2^64, so anything from 2^63 up is treated as not sent.
std::optional<uint64_t> Count(const Struct& stats, const char* name) {
  auto it = stats.fields().find(name);
  if (it == stats.fields().end() || it->second.kind_case() != Value::kNumberValue) return std::nullopt;
  const double v = it->second.number_value();
  if (!std::isfinite(v) || v < 0 || v >= 9223372036854775808.0 || v != std::floor(v)) return std::nullopt;
  return static_cast<uint64_t>(v);
}

}  // namespace

absl::StatusOr<BalloonPressure> ParseQemuGuestStats(absl::string_view reply) {
  Struct root;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(std::string(reply), &root, options).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("QEMU's guest-stats reply is not JSON: ",
                                                   reply.substr(0, 120)));
  }
  if (auto err = root.fields().find("error"); err != root.fields().end()) {
    std::string desc = "no description";
    if (err->second.kind_case() == Value::kStructValue) {
      auto d = err->second.struct_value().fields().find("desc");
      if (d != err->second.struct_value().fields().end() && d->second.kind_case() == Value::kStringValue) {
        desc = d->second.string_value();
      }
    }
    return absl::NotFoundError(absl::StrCat("QEMU has no balloon guest-stats: ", desc));
  }
  auto ret = root.fields().find("return");
  if (ret == root.fields().end() || ret->second.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError(absl::StrCat("QEMU's guest-stats reply has no \"return\" object: ",
                                                   reply.substr(0, 120)));
  }
  const Struct& r = ret->second.struct_value();
  BalloonPressure out;
  if (auto lu = Count(r, "last-update"); lu.has_value()) out.last_update = static_cast<int64_t>(*lu);
  auto stats = r.fields().find("stats");
  if (stats == r.fields().end() || stats->second.kind_case() != Value::kStructValue) return out;
  const Struct& s = stats->second.struct_value();
  out.oom_kills = Count(s, "stat-oom-kills");
  out.alloc_stalls = Count(s, "stat-alloc-stalls");
  out.direct_scans = Count(s, "stat-direct-scans");
  out.direct_reclaims = Count(s, "stat-direct-reclaims");
  out.async_scans = Count(s, "stat-async-scans");
  out.async_reclaims = Count(s, "stat-async-reclaims");
  return out;
}

}  // namespace plimsoll::hypervisor
