// What a policy remembers between ticks, carried by the daemon's loop and the simulator without
// either knowing what is in it.
//
// Each policy owns a typed struct per guest (named fields, units in their comments) and, if it
// needs one, a struct for the host; a StateSlot holds one such value of any copyable type. A
// policy reads its slot back with Get<T>(): a slot that is empty or holds another type reads as
// null, so a policy starts afresh on a guest it has not seen and never misreads another policy's
// memory (a string-keyed map let a mistyped key read a silent default). Nothing here is
// persisted: a restarted daemon starts every policy afresh, as it always did.
//
// Value type: copyable and movable (Decide takes it and returns the next one by value); thread-compatible.
#ifndef PLIMSOLL_POLICY_POLICY_STATE_H_
#define PLIMSOLL_POLICY_POLICY_STATE_H_

#include <any>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace plimsoll::policy {

class StateSlot {
 public:
  StateSlot() = default;

  // The value when the slot holds a T; null when it is empty or holds another type.
  template <typename T>
  const T* Get() const {
    return std::any_cast<T>(&value_);
  }
  template <typename T>
  T* GetMutable() {
    return std::any_cast<T>(&value_);
  }

  // Replaces whatever the slot held; returns the stored value.
  template <typename T>
  T& Set(T value) {
    return value_.emplace<T>(std::move(value));
  }

  bool empty() const { return !value_.has_value(); }

 private:
  std::any value_;
};

struct PolicyState {
  absl::flat_hash_map<std::string, StateSlot> guests;  // by uuid
  StateSlot host;                                      // host-level memory (a policy's own type)
};

// The policy's value of type T for the guest `uuid`, or null (no slot, or a slot of another type).
template <typename T>
const T* FindGuestState(const PolicyState& state, absl::string_view uuid) {
  auto it = state.guests.find(uuid);
  return it == state.guests.end() ? nullptr : it->second.Get<T>();
}

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_POLICY_STATE_H_
