// Finding a guest the way the control API names them: by domain name, or by UUID in any
// case. Shared by the control service and both ControlCore implementations.
#ifndef PLIMSOLL_SERVER_API_GUEST_LOOKUP_H_
#define PLIMSOLL_SERVER_API_GUEST_LOOKUP_H_

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "plimsoll/v1/control.pb.h"
#include "server/state/overrides.h"

namespace plimsoll::server {

// The running guest of `view` named `name_or_uuid`, or null.
inline const plimsoll::v1::Guest* FindGuest(const plimsoll::v1::ListGuestsResponse& view,
                                            absl::string_view name_or_uuid) {
  const std::string lower = absl::AsciiStrToLower(name_or_uuid);
  for (const auto& g : view.guests()) {
    if (g.name() == name_or_uuid || g.uuid() == lower) return &g;
  }
  return nullptr;
}

// The key of the guest an override request names: a running guest first, else one that only
// has a stored override (it may be stopped). nullopt when neither knows it.
inline std::optional<GuestKey> FindOverrideKey(const plimsoll::v1::ListGuestsResponse& view,
                                               const OverrideStore& store, absl::string_view guest) {
  if (const plimsoll::v1::Guest* g = FindGuest(view, guest)) return GuestKey{g->uuid(), g->name()};
  if (auto stored = store.Find(guest)) return GuestKey{stored->guest_uuid(), stored->guest_name()};
  return std::nullopt;
}

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_GUEST_LOOKUP_H_
