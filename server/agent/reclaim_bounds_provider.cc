#include "server/agent/reclaim_bounds_provider.h"

#include <algorithm>
#include <cstdint>

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

}  // namespace plimsoll::server::agent
