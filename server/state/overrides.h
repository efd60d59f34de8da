// server/state/: what the operator set and plimsolld must not forget (overrides, state_store).
// No RPC and no libvirt: the API writes it, the loop reads its snapshot each tick.
//
// The operator's runtime settings: one GuestOverride per guest (by UUID) and
// the runtime HostPolicy, persisted through a StateStore on every change.
//
// The control core calls the mutators (after validating the request with
// control_validation.h and resolving the guest); the control loop reads
// snapshot() once per tick and applies what it finds. A change is written to
// disk before it becomes visible to snapshot() or is acknowledged: if the
// write fails, the change is refused and nothing changes.
//
// Thread-safety: every method is thread-safe. Mutators are serialised (and
// wait for the disk); snapshot() never waits for the disk, so the loop is
// never held up by an fsync.
#ifndef PLIMSOLL_SERVER_STATE_OVERRIDES_H_
#define PLIMSOLL_SERVER_STATE_OVERRIDES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "plimsoll/v1/control.pb.h"
#include "server/state/state_store.h"

namespace plimsoll::server {

// The guest a change is about, as the caller resolved it.
struct GuestKey {
  std::string uuid;  // lower case
  std::string name;
};

class OverrideStore {
 public:
  // An immutable view for the control loop.
  struct Snapshot {
    absl::flat_hash_map<std::string, plimsoll::v1::GuestOverride> guests;  // by UUID
    plimsoll::v1::HostPolicy host;
    uint64_t generation = 0;  // of the state file; 0 when memory-only
  };

  struct Cleared {
    plimsoll::v1::GuestOverride remaining;  // empty when nothing remains
    bool existed = false;
  };

  // A store that keeps everything in memory only (no state_file).
  explicit OverrideStore(Clock* clock);

  // Loads the state file. An unusable file has been set aside by the
  // StateStore; its report is kept in load_problem(). Errors only when the
  // file cannot be read or set aside.
  static absl::StatusOr<std::unique_ptr<OverrideStore>> Open(std::unique_ptr<StateStore> state_store,
                                                             Clock* clock);

  // Sets a guest's override: the stored one merged with `update` (or
  // replaced, see MergeOverride), validated as a whole and, when `guest` is
  // given, against its <memory>. INVALID_ARGUMENT names the field; a failed
  // write is returned as is (UNAVAILABLE, RESOURCE_EXHAUSTED, ...).
  absl::StatusOr<plimsoll::v1::GuestOverride> Set(const GuestKey& key, const plimsoll::v1::GuestOverride& update,
                                                  bool replace, absl::string_view caller,
                                                  const plimsoll::v1::Guest* guest = nullptr);

  // Clears the named settings (all when `fields` is empty). Clearing what is
  // not there succeeds with existed=false.
  absl::StatusOr<Cleared> Clear(const GuestKey& key, const std::vector<std::string>& fields,
                                absl::string_view caller);

  // A stored override by UUID (any case) or by the guest's last known name.
  std::optional<plimsoll::v1::GuestOverride> Find(absl::string_view name_or_uuid) const;

  // Every stored override, sorted by guest name then UUID.
  std::vector<plimsoll::v1::GuestOverride> List() const;

  // Applies SetHostPolicy (validated by ValidateSetHostPolicy).
  absl::StatusOr<plimsoll::v1::HostPolicy> SetHostPolicy(const plimsoll::v1::SetHostPolicyRequest& request,
                                                         absl::string_view caller);

  std::shared_ptr<const Snapshot> snapshot() const;
  plimsoll::v1::HostPolicy host_policy() const { return snapshot()->host; }

  // Where the state lives ("" when memory-only) and what was wrong with it at
  // start (OK when nothing was).
  std::string state_file() const;
  absl::Status load_problem() const { return load_problem_; }

 private:
  // Persists `next` and publishes it. Called with write_mu_ held.
  absl::Status Commit(Snapshot next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  Clock* clock_;
  std::unique_ptr<StateStore> state_store_;  // null: memory-only
  absl::Status load_problem_;
  absl::Mutex write_mu_;  // serialises mutators, held across the disk write
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_STATE_OVERRIDES_H_
