#include "server/api/line_freshness.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace plimsoll::server {

absl::Duration LineMaxAge(double tick_seconds) {
  return std::max(absl::Seconds(15), absl::Seconds(3 * std::max(0.0, tick_seconds)));
}

plimsoll::v1::HostLine LineAsOf(const plimsoll::v1::ListGuestsResponse& view, absl::Time now) {
  plimsoll::v1::HostLine line = view.host_line();
  if (line.tick() == 0) return line;
  const absl::Duration age = now - absl::FromUnixMicros(line.computed_unix_micros());
  if (age <= LineMaxAge(view.host().tick_seconds())) return line;
  const std::string why = absl::StrFormat("the control loop has published nothing for %.1fs", absl::ToDoubleSeconds(age));
  line.set_stale(true);
  line.set_stale_reason(line.stale_reason().empty() ? why : absl::StrCat(why, "; ", line.stale_reason()));
  line.set_offered_bytes(0);
  line.set_explanation(absl::StrCat("stale: ", why, "; ", line.explanation()));
  return line;
}

}  // namespace plimsoll::server
