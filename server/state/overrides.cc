#include "server/state/overrides.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/api/control_validation.h"

namespace plimsoll::server {

OverrideStore::OverrideStore(Clock* clock) : clock_(clock), current_(std::make_shared<const Snapshot>()) {}

absl::StatusOr<std::unique_ptr<OverrideStore>> OverrideStore::Open(std::unique_ptr<StateStore> state_store,
                                                                   Clock* clock) {
  std::unique_ptr<OverrideStore> s(new OverrideStore(clock));
  if (state_store == nullptr) return s;
  auto load = state_store->Load();
  if (!load.ok()) return load.status();
  auto snap = std::make_shared<Snapshot>();
  for (const auto& o : load->state.guest_overrides()) {
    snap->guests[absl::AsciiStrToLower(o.guest_uuid())] = o;
  }
  snap->host = load->state.host_policy();
  snap->generation = load->state.generation();
  s->load_problem_ = load->problem;
  s->state_store_ = std::move(state_store);
  absl::MutexLock l(&s->mu_);
  s->current_ = std::move(snap);
  return s;
}

std::shared_ptr<const OverrideStore::Snapshot> OverrideStore::snapshot() const {
  absl::MutexLock l(&mu_);
  return current_;
}

std::string OverrideStore::state_file() const { return state_store_ ? state_store_->path() : ""; }

absl::Status OverrideStore::Commit(Snapshot next) {
  if (state_store_ != nullptr) {
    std::vector<const plimsoll::v1::GuestOverride*> sorted;
    for (const auto& [uuid, o] : next.guests) sorted.push_back(&o);
    std::sort(sorted.begin(), sorted.end(),
              [](const auto* a, const auto* b) { return a->guest_uuid() < b->guest_uuid(); });
    plimsoll::v1::ControlState state;
    for (const auto* o : sorted) *state.add_guest_overrides() = *o;
    *state.mutable_host_policy() = next.host;
    auto written = state_store_->Save(std::move(state));
    if (!written.ok()) {
      return absl::Status(written.status().code(),
                          absl::StrCat("the change was not made: cannot persist it (", written.status().message(), ")"));
    }
    next.generation = written->generation();
  }
  auto published = std::make_shared<const Snapshot>(std::move(next));
  absl::MutexLock l(&mu_);
  current_ = std::move(published);
  return absl::OkStatus();
}

absl::StatusOr<plimsoll::v1::GuestOverride> OverrideStore::Set(const GuestKey& key,
                                                               const plimsoll::v1::GuestOverride& update,
                                                               bool replace, absl::string_view caller,
                                                               const plimsoll::v1::Guest* guest) {
  absl::MutexLock w(&write_mu_);
  Snapshot next = *snapshot();
  const std::string uuid = absl::AsciiStrToLower(key.uuid);
  plimsoll::v1::GuestOverride stored;
  if (auto it = next.guests.find(uuid); it != next.guests.end()) stored = it->second;
  plimsoll::v1::GuestOverride merged = MergeOverride(stored, update, replace);
  if (absl::Status s = ValidateOverride(merged, "override", guest); !s.ok()) {
    if (!OverrideIsEmpty(stored) && !replace) {
      return absl::InvalidArgumentError(absl::StrCat(s.message(), " (together with the stored override)"));
    }
    return s;
  }
  merged.set_guest_uuid(uuid);
  if (!key.name.empty()) merged.set_guest_name(key.name);
  merged.set_updated_unix_micros(absl::ToUnixMicros(clock_->Now()));
  merged.set_updated_by(std::string(caller));
  next.guests[uuid] = merged;
  if (absl::Status s = Commit(std::move(next)); !s.ok()) return s;
  return merged;
}

absl::StatusOr<OverrideStore::Cleared> OverrideStore::Clear(const GuestKey& key,
                                                            const std::vector<std::string>& fields,
                                                            absl::string_view caller) {
  absl::MutexLock w(&write_mu_);
  Snapshot next = *snapshot();
  const std::string uuid = absl::AsciiStrToLower(key.uuid);
  Cleared out;
  auto it = next.guests.find(uuid);
  if (it == next.guests.end()) return out;
  plimsoll::v1::GuestOverride remaining = ClearOverrideSettings(it->second, fields);
  if (fields.empty()) {
    out.existed = true;
  } else {
    const auto* refl = it->second.GetReflection();
    for (const std::string& f : fields) {
      const auto* fd = plimsoll::v1::GuestOverride::descriptor()->FindFieldByName(f);
      out.existed |= fd != nullptr && refl->HasField(it->second, fd);
    }
  }
  if (!out.existed) return out;
  if (OverrideIsEmpty(remaining)) {
    next.guests.erase(it);
  } else {
    remaining.set_updated_unix_micros(absl::ToUnixMicros(clock_->Now()));
    remaining.set_updated_by(std::string(caller));
    if (!key.name.empty()) remaining.set_guest_name(key.name);
    it->second = remaining;
    out.remaining = remaining;
  }
  if (absl::Status s = Commit(std::move(next)); !s.ok()) return s;
  return out;
}

std::optional<plimsoll::v1::GuestOverride> OverrideStore::Find(absl::string_view name_or_uuid) const {
  auto snap = snapshot();
  const std::string lower = absl::AsciiStrToLower(name_or_uuid);
  if (auto it = snap->guests.find(lower); it != snap->guests.end()) return it->second;
  std::optional<plimsoll::v1::GuestOverride> found;
  for (const auto& [uuid, o] : snap->guests) {
    if (o.guest_name() == name_or_uuid) {
      if (found.has_value()) return std::nullopt;  // ambiguous: two stopped guests shared a name
      found = o;
    }
  }
  return found;
}

std::vector<plimsoll::v1::GuestOverride> OverrideStore::List() const {
  auto snap = snapshot();
  std::vector<plimsoll::v1::GuestOverride> out;
  for (const auto& [uuid, o] : snap->guests) out.push_back(o);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.guest_name(), a.guest_uuid()) < std::tie(b.guest_name(), b.guest_uuid());
  });
  return out;
}

absl::StatusOr<plimsoll::v1::HostPolicy> OverrideStore::SetHostPolicy(
    const plimsoll::v1::SetHostPolicyRequest& request, absl::string_view caller) {
  absl::MutexLock w(&write_mu_);
  Snapshot next = *snapshot();
  next.host = MergeHostPolicy(next.host, request);
  next.host.set_updated_unix_micros(absl::ToUnixMicros(clock_->Now()));
  next.host.set_updated_by(std::string(caller));
  plimsoll::v1::HostPolicy result = next.host;
  if (absl::Status s = Commit(std::move(next)); !s.ok()) return s;
  return result;
}

}  // namespace plimsoll::server
