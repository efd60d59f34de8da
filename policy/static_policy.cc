#include "policy/static_policy.h"

#include "absl/strings/str_cat.h"
#include "policy/guest_safety.h"

namespace plimsoll::policy {

absl::string_view StaticPolicy::name() const { return "static"; }

Decisions StaticPolicy::Decide(const Snapshot& snapshot, PolicyState /*state*/) const {
  Decisions decisions;
  decisions.guests.reserve(snapshot.guests.size());
  for (const GuestView& guest : snapshot.guests) {
    decisions.guests.push_back(HoldDecision(guest, "static policy holds"));
  }
  decisions.summary = absl::StrCat("static: guests=", snapshot.guests.size(), " mode=hold");
  return decisions;
}

}  // namespace plimsoll::policy
