#include "server/api/control_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace plimsoll::server {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::plimsoll::v1::GuestOverride;
using ::plimsoll::v1::HostPolicy;

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

std::string F(absl::string_view prefix, absl::string_view name) {
  return prefix.empty() ? std::string(name) : absl::StrCat(prefix, ".", name);
}

// The fields of `d` that are settings (the optional ones), by name.
std::vector<std::string> OptionalFieldNames(const google::protobuf::Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->has_presence() && d->field(i)->type() != FieldDescriptor::TYPE_MESSAGE) {
      names.push_back(d->field(i)->name());
    }
  }
  return names;
}

absl::Status ValidateSize(int64_t v, absl::string_view field) {
  if (v < kMinGuestSizeBytes) {
    return Invalid(field, absl::StrCat(DescribeBytes(v), " is below the smallest allowed guest size ",
                                       DescribeBytes(kMinGuestSizeBytes)));
  }
  if (v > kMaxRequestBytes) {
    return Invalid(field, absl::StrCat(DescribeBytes(v), " is above ", DescribeBytes(kMaxRequestBytes)));
  }
  return absl::OkStatus();
}

// Validates a list of setting names against `allowed`.
absl::Status ValidateNames(const google::protobuf::RepeatedPtrField<std::string>& names,
                           absl::string_view field, const std::vector<std::string>& allowed,
                           absl::string_view message_name) {
  for (int i = 0; i < names.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), names[i]) == allowed.end()) {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat("\"", names[i], "\" is not a ", message_name,
                                  " setting; settings are: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DescribeBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double a = std::fabs(b);
  std::string human;
  if (a >= 1024.0 * 1024 * 1024 * 1024 * 1024) {
    human = absl::StrFormat("%.4g PiB", b / (1024.0 * 1024 * 1024 * 1024 * 1024));
  } else if (a >= 1024.0 * 1024 * 1024 * 1024) {
    human = absl::StrFormat("%.4g TiB", b / (1024.0 * 1024 * 1024 * 1024));
  } else if (a >= 1024.0 * 1024 * 1024) {
    human = absl::StrFormat("%.4g GiB", b / (1024.0 * 1024 * 1024));
  } else if (a >= 1024.0 * 1024) {
    human = absl::StrFormat("%.4g MiB", b / (1024.0 * 1024));
  } else if (a >= 1024.0) {
    human = absl::StrFormat("%.4g KiB", b / 1024.0);
  } else {
    return absl::StrCat(bytes, " bytes");
  }
  return absl::StrCat(human, " (", bytes, ")");
}

bool LooksLikeUuid(absl::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!absl::ascii_isxdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

const std::vector<std::string>& GuestOverrideSettingNames() {
  static const auto* names = new std::vector<std::string>(OptionalFieldNames(GuestOverride::descriptor()));
  return *names;
}

const std::vector<std::string>& HostPolicySettingNames() {
  static const auto* names = new std::vector<std::string>(OptionalFieldNames(HostPolicy::descriptor()));
  return *names;
}

bool OverrideIsEmpty(const GuestOverride& o) {
  return !o.has_min_bytes() && !o.has_max_bytes() && !o.has_shares() && !o.has_priority() &&
         !o.has_exclude() && !o.has_pin_bytes() && !o.has_note() && !o.has_force();
}

int64_t OverrideStepBytes(int64_t memory_bytes) { return std::max<int64_t>(256LL << 20, memory_bytes / 4); }

absl::Status ValidateOverride(const GuestOverride& o, absl::string_view field,
                              const plimsoll::v1::Guest* guest) {
  if (o.has_min_bytes()) {
    if (absl::Status s = ValidateSize(o.min_bytes(), F(field, "min_bytes")); !s.ok()) return s;
  }
  if (o.has_max_bytes()) {
    if (absl::Status s = ValidateSize(o.max_bytes(), F(field, "max_bytes")); !s.ok()) return s;
  }
  if (o.has_pin_bytes()) {
    if (absl::Status s = ValidateSize(o.pin_bytes(), F(field, "pin_bytes")); !s.ok()) return s;
  }
  if (o.has_shares() && (o.shares() < kMinShares || o.shares() > kMaxShares)) {
    return Invalid(F(field, "shares"),
                   absl::StrCat(o.shares(), " is outside [", kMinShares, ", ", kMaxShares, "]"));
  }
  if (o.has_priority() && (o.priority() < kMinPriority || o.priority() > kMaxPriority)) {
    return Invalid(F(field, "priority"),
                   absl::StrCat(o.priority(), " is outside [", kMinPriority, ", ", kMaxPriority, "]"));
  }
  if (o.has_note() && o.note().size() > kMaxNoteBytes) {
    return Invalid(F(field, "note"),
                   absl::StrCat(o.note().size(), " bytes is longer than ", kMaxNoteBytes));
  }
  if (o.force()) {
    if (!o.has_pin_bytes() && !o.has_min_bytes()) {
      return Invalid(F(field, "force"), "applies to pin_bytes and min_bytes; neither is set");
    }
    if (o.note().empty()) {
      return Invalid(F(field, "force"), absl::StrCat("needs a ", F(field, "note"),
                                                     " saying why: a forced override is audited"));
    }
  }
  if (o.has_min_bytes() && o.has_max_bytes() && o.min_bytes() > o.max_bytes()) {
    return Invalid(F(field, "min_bytes"), absl::StrCat(DescribeBytes(o.min_bytes()), " is above ",
                                                       F(field, "max_bytes"), " ",
                                                       DescribeBytes(o.max_bytes())));
  }
  if (o.has_pin_bytes()) {
    if (o.exclude()) {
      return Invalid(F(field, "pin_bytes"),
                     absl::StrCat("cannot be combined with ", F(field, "exclude"),
                                  "=true (a pinned guest is managed, an excluded one is not); "
                                  "clear one of them or use replace"));
    }
    if (o.has_min_bytes() && o.pin_bytes() < o.min_bytes()) {
      return Invalid(F(field, "pin_bytes"), absl::StrCat(DescribeBytes(o.pin_bytes()), " is below ",
                                                         F(field, "min_bytes"), " ",
                                                         DescribeBytes(o.min_bytes())));
    }
    if (o.has_max_bytes() && o.pin_bytes() > o.max_bytes()) {
      return Invalid(F(field, "pin_bytes"), absl::StrCat(DescribeBytes(o.pin_bytes()), " is above ",
                                                         F(field, "max_bytes"), " ",
                                                         DescribeBytes(o.max_bytes())));
    }
  }
  if (guest != nullptr && guest->max_bytes() > 0) {
    const int64_t memory = guest->max_bytes();
    const std::pair<bool, std::pair<const char*, int64_t>> sizes[] = {
        {o.has_min_bytes(), {"min_bytes", o.min_bytes()}},
        {o.has_max_bytes(), {"max_bytes", o.max_bytes()}},
        {o.has_pin_bytes(), {"pin_bytes", o.pin_bytes()}},
    };
    for (const auto& [has, named] : sizes) {
      if (has && named.second > memory) {
        return Invalid(F(field, named.first),
                       absl::StrCat(DescribeBytes(named.second), " is above guest \"", guest->name(),
                                    "\"'s <memory> of ", DescribeBytes(memory)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSetGuestPolicy(const plimsoll::v1::SetGuestPolicyRequest& r) {
  if (r.guest().empty()) return Invalid("guest", "give a domain name or UUID");
  if (OverrideIsEmpty(r.override())) {
    return Invalid("override", "no setting given (settings: " +
                                   absl::StrJoin(GuestOverrideSettingNames(), ", ") +
                                   "); to remove an override use ClearGuestPolicy");
  }
  return ValidateOverride(r.override(), "override");
}

absl::Status ValidateClearGuestPolicy(const plimsoll::v1::ClearGuestPolicyRequest& r) {
  if (r.guest().empty()) return Invalid("guest", "give a domain name or UUID");
  return ValidateNames(r.fields(), "fields", GuestOverrideSettingNames(), "GuestOverride");
}

absl::Status ValidateSetHostPolicy(const plimsoll::v1::SetHostPolicyRequest& r,
                                   absl::Span<const std::string> known_policies) {
  const HostPolicy& p = r.policy();
  if (p.has_host_reserve_bytes() && (p.host_reserve_bytes() < 0 || p.host_reserve_bytes() > kMaxRequestBytes)) {
    return Invalid("policy.host_reserve_bytes",
                   absl::StrCat(DescribeBytes(p.host_reserve_bytes()), " is outside [0, ",
                                DescribeBytes(kMaxRequestBytes), "]"));
  }
  if (p.has_guest_memory_budget_bytes()) {
    if (absl::Status s = ValidateSize(p.guest_memory_budget_bytes(), "policy.guest_memory_budget_bytes");
        !s.ok()) {
      return s;
    }
  }
  // A variant ("pagecache:probe_fraction=0.01") is known by its base name; its parameters are
  // the core's to check.
  const std::string base = p.policy().substr(0, p.policy().find(':'));
  if (p.has_policy() && !known_policies.empty() &&
      std::find(known_policies.begin(), known_policies.end(), base) == known_policies.end()) {
    return Invalid("policy.policy", absl::StrCat("unknown policy \"", p.policy(), "\"; known: ",
                                                 absl::StrJoin(known_policies, ", ")));
  }
  if (absl::Status s = ValidateNames(r.clear_fields(), "clear_fields", HostPolicySettingNames(), "HostPolicy");
      !s.ok()) {
    return s;
  }
  const auto* refl = p.GetReflection();
  for (int i = 0; i < r.clear_fields_size(); ++i) {
    const FieldDescriptor* f = HostPolicy::descriptor()->FindFieldByName(r.clear_fields(i));
    if (refl->HasField(p, f)) {
      return Invalid(absl::StrCat("clear_fields[", i, "]"),
                     absl::StrCat("\"", r.clear_fields(i), "\" is also set in policy; set it or clear it"));
    }
  }
  bool any_set = false;
  for (const std::string& name : HostPolicySettingNames()) {
    any_set |= refl->HasField(p, HostPolicy::descriptor()->FindFieldByName(name));
  }
  if (!any_set && r.clear_fields().empty()) {
    return Invalid("policy", absl::StrCat("nothing to change: set one of ",
                                          absl::StrJoin(HostPolicySettingNames(), ", "),
                                          " or name it in clear_fields"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReclaim(const plimsoll::v1::ReclaimRequest& r) {
  if (r.bytes() <= 0) return Invalid("bytes", absl::StrCat(r.bytes(), " must be positive"));
  if (r.bytes() > kMaxRequestBytes) {
    return Invalid("bytes", absl::StrCat(DescribeBytes(r.bytes()), " is above ", DescribeBytes(kMaxRequestBytes)));
  }
  if (r.has_hold_seconds() &&
      !(std::isfinite(r.hold_seconds()) && r.hold_seconds() > 0 && r.hold_seconds() <= kMaxReclaimHoldSeconds)) {
    return Invalid("hold_seconds",
                   absl::StrCat(r.hold_seconds(), " is outside (0, ", kMaxReclaimHoldSeconds, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateWatch(const plimsoll::v1::WatchRequest& r) {
  if (r.guests_size() > kMaxWatchGuests) {
    return Invalid("guests", absl::StrCat(r.guests_size(), " guests; at most ", kMaxWatchGuests));
  }
  for (int i = 0; i < r.guests_size(); ++i) {
    if (r.guests(i).empty()) return Invalid(absl::StrCat("guests[", i, "]"), "empty guest name");
  }
  for (int i = 0; i < r.kinds_size(); ++i) {
    const int k = r.kinds(i);
    if (k == plimsoll::v1::WATCH_EVENT_KIND_UNSPECIFIED || !plimsoll::v1::WatchEventKind_IsValid(k)) {
      return Invalid(absl::StrCat("kinds[", i, "]"), absl::StrCat(k, " is not a WatchEventKind"));
    }
  }
  return absl::OkStatus();
}

GuestOverride MergeOverride(const GuestOverride& stored, const GuestOverride& update, bool replace) {
  GuestOverride out = replace ? ClearOverrideSettings(stored, {}) : stored;
  GuestOverride settings = update;
  settings.clear_guest_uuid();
  settings.clear_guest_name();
  settings.clear_updated_unix_micros();
  settings.clear_updated_by();
  out.MergeFrom(settings);  // settings are proto3 optional: only set ones are merged
  return out;
}

GuestOverride ClearOverrideSettings(const GuestOverride& o, const std::vector<std::string>& fields) {
  GuestOverride out = o;
  const std::vector<std::string>& names = fields.empty() ? GuestOverrideSettingNames() : fields;
  for (const std::string& name : names) {
    const FieldDescriptor* f = GuestOverride::descriptor()->FindFieldByName(name);
    if (f != nullptr) out.GetReflection()->ClearField(&out, f);
  }
  return out;
}

HostPolicy MergeHostPolicy(const HostPolicy& stored, const plimsoll::v1::SetHostPolicyRequest& r) {
  HostPolicy out = stored;
  HostPolicy update = r.policy();
  update.clear_updated_unix_micros();
  update.clear_updated_by();
  out.MergeFrom(update);  // proto3 optional: only set fields are merged
  for (const std::string& name : r.clear_fields()) {
    const FieldDescriptor* f = HostPolicy::descriptor()->FindFieldByName(name);
    if (f != nullptr) out.GetReflection()->ClearField(&out, f);
  }
  return out;
}

double ReclaimHoldSeconds(const plimsoll::v1::ReclaimRequest& r) {
  return r.has_hold_seconds() ? r.hold_seconds() : kDefaultReclaimHoldSeconds;
}

absl::Status CheckReclaimAllowed(const plimsoll::v1::ReclaimRequest& r, bool paused, bool daemon_dry_run) {
  if (r.dry_run()) return absl::OkStatus();
  if (paused) {
    return absl::FailedPreconditionError(
        "management is paused (SetHostPolicy paused=true): Reclaim would move no balloon; resume "
        "management or ask with dry_run for the plan");
  }
  if (daemon_dry_run) {
    return absl::FailedPreconditionError(
        "plimsolld runs with dry_run and never moves a balloon; ask with dry_run for the plan");
  }
  return absl::OkStatus();
}

absl::Status CheckReclaimPlanSufficient(const plimsoll::v1::ReclaimRequest& r,
                                        const plimsoll::v1::ReclaimPlan& plan) {
  if (!r.require_full() || plan.planned_bytes() >= r.bytes()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("require_full: only ", DescribeBytes(plan.planned_bytes()), " of the requested ",
                   DescribeBytes(r.bytes()), " can be reclaimed now; nothing was changed (",
                   plan.summary(), ")"));
}

}  // namespace plimsoll::server
