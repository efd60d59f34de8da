#include "server/agent/reclaim_bounds_provider.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace plimsoll::server::agent {

std::optional<v1::ReclaimBounds> BoundsForAck(ReclaimBoundsProvider* provider, const std::string& uuid,
                                              double max_bytes_per_second) {
  if (provider == nullptr) return std::nullopt;
  std::optional<v1::ReclaimBounds> bounds = provider->BoundsFor(uuid);
  if (!bounds.has_value()) return std::nullopt;
  // (2^63 keeps the conversion defined for a huge or infinite option.)
  const double capped = std::clamp(max_bytes_per_second, 0.0, 9.2e18);
  const uint64_t cap = capped > 0 ? static_cast<uint64_t>(capped) : 0;
  bounds->set_max_bytes_per_second(std::min<uint64_t>(bounds->max_bytes_per_second(), cap));
  return bounds;
}

absl::StatusOr<v1::ReclaimBounds> ParseReclaimBoundsSpec(absl::string_view spec) {
  v1::ReclaimBounds b;
  spec = absl::StripAsciiWhitespace(spec);
  if (spec == "off") return b;
  b.set_enabled(true);
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    double v = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(absl::StripAsciiWhitespace(kv[1]), &v) || !std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("reclaim bounds: \"", part, "\" is not key=number >= 0"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    const uint64_t mib = static_cast<uint64_t>(std::min(v, 1e12) * (1 << 20));
    if (key == "keep_mib") {
      b.set_keep_bytes(mib);
    } else if (key == "keep_file_mib") {
      b.set_keep_file_bytes(mib);
    } else if (key == "step_mib") {
      b.set_step_bytes(mib);
    } else if (key == "rate_mib") {
      b.set_max_bytes_per_second(mib);
    } else if (key == "psi_stop") {
      b.set_psi_some_avg10_stop_pct(v);
    } else if (key == "refault_stop") {
      b.set_refaults_per_second_stop(v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("reclaim bounds: unknown key \"", key, "\""));
    }
  }
  return b;
}

}  // namespace plimsoll::server::agent
