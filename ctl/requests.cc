#include "ctl/requests.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace plimsoll::ctl {
namespace {

absl::Status FlagError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

// The single value of `name`, or nullptr when absent; an error when repeated.
absl::StatusOr<const std::string*> One(const Flags& flags, const std::string& name) {
  auto [begin, end] = flags.equal_range(name);
  if (begin == end) return nullptr;
  if (std::next(begin) != end) return FlagError("--" + name, "given more than once");
  return &begin->second;
}

absl::StatusOr<bool> ParseBool(const std::string& flag, const std::string& v) {
  const std::string l = absl::AsciiStrToLower(v);
  if (l.empty() || l == "true" || l == "yes" || l == "1") return true;
  if (l == "false" || l == "no" || l == "0") return false;
  return FlagError(flag, absl::StrCat("\"", v, "\" is not true or false"));
}

absl::StatusOr<int64_t> SizeFlag(const std::string& name, const std::string& v) {
  auto b = ParseByteSize(v);
  if (!b.ok()) return FlagError("--" + name, b.status().message());
  return *b;
}

std::vector<std::string> List(const std::string& v) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(p));
  }
  return out;
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  size_t i = 0;
  while (i < t.size() && (absl::ascii_isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  const std::string number = t.substr(0, i);
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(i)));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a size (examples: 1073741824, 512M, 2G, 1.5GiB)"));
  }
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  if (!unit.empty() && unit.back() == 'i') unit.pop_back();
  double mult = 0;
  if (unit.empty()) {
    mult = 1;
  } else if (unit == "k") {
    mult = 1024.0;
  } else if (unit == "m") {
    mult = 1024.0 * 1024;
  } else if (unit == "g") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "t") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": unknown unit; use K, M, G or T (binary: 1K = 1024), e.g. 512M, 1.5GiB"));
  }
  const double bytes = std::floor(value * mult);
  if (!(bytes >= 0) || bytes > 9.2e18) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<double> ParseSeconds(absl::string_view text) {
  double plain = 0;
  if (absl::SimpleAtod(text, &plain)) return plain;
  absl::Duration d;
  if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a duration (e.g. 300, 300s, 5m, 1h)"));
  }
  return absl::ToDoubleSeconds(d);
}

absl::Status CheckFlags(const Flags& flags, const std::vector<std::string>& allowed, absl::string_view command) {
  for (const auto& [name, value] : flags) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name, ": not a flag of \"", command, "\"",
          allowed.empty() ? std::string(" (it takes none)") : absl::StrCat("; its flags are --", absl::StrJoin(allowed, ", --"))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<plimsoll::v1::SetGuestPolicyRequest> BuildSetRequest(const std::string& guest, const Flags& flags) {
  if (absl::Status s = CheckFlags(flags, {"min", "max", "shares", "priority", "exclude", "pin", "note", "force", "replace"}, "set");
      !s.ok()) {
    return s;
  }
  plimsoll::v1::SetGuestPolicyRequest r;
  r.set_guest(guest);
  auto* o = r.mutable_override();
  for (const auto& [flag, setter] : std::vector<std::pair<std::string, void (*)(plimsoll::v1::GuestOverride*, int64_t)>>{
           {"min", [](plimsoll::v1::GuestOverride* o, int64_t v) { o->set_min_bytes(v); }},
           {"max", [](plimsoll::v1::GuestOverride* o, int64_t v) { o->set_max_bytes(v); }},
           {"pin", [](plimsoll::v1::GuestOverride* o, int64_t v) { o->set_pin_bytes(v); }}}) {
    auto v = One(flags, flag);
    if (!v.ok()) return v.status();
    if (*v == nullptr) continue;
    auto bytes = SizeFlag(flag, **v);
    if (!bytes.ok()) return bytes.status();
    setter(o, *bytes);
  }
  if (auto v = One(flags, "shares"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    uint32_t shares = 0;
    if (!absl::SimpleAtoi(**v, &shares)) return FlagError("--shares", absl::StrCat("\"", **v, "\" is not a number"));
    o->set_shares(shares);
  }
  if (auto v = One(flags, "priority"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    int32_t p = 0;
    if (!absl::SimpleAtoi(**v, &p)) return FlagError("--priority", absl::StrCat("\"", **v, "\" is not a number"));
    o->set_priority(p);
  }
  if (auto v = One(flags, "exclude"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto b = ParseBool("--exclude", **v);
    if (!b.ok()) return b.status();
    o->set_exclude(*b);
  }
  if (auto v = One(flags, "note"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    o->set_note(**v);
  }
  if (auto v = One(flags, "force"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto b = ParseBool("--force", **v);
    if (!b.ok()) return b.status();
    o->set_force(*b);
  }
  if (auto v = One(flags, "replace"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto b = ParseBool("--replace", **v);
    if (!b.ok()) return b.status();
    r.set_replace(*b);
  }
  return r;
}

absl::StatusOr<plimsoll::v1::ClearGuestPolicyRequest> BuildClearRequest(const std::string& guest,
                                                                        const Flags& flags) {
  if (absl::Status s = CheckFlags(flags, {"fields"}, "clear"); !s.ok()) return s;
  plimsoll::v1::ClearGuestPolicyRequest r;
  r.set_guest(guest);
  auto v = One(flags, "fields");
  if (!v.ok()) return v.status();
  if (*v != nullptr) {
    for (const std::string& f : List(**v)) {
      r.add_fields(f == "min" ? "min_bytes" : f == "max" ? "max_bytes" : f == "pin" ? "pin_bytes" : f);
    }
  }
  return r;
}

absl::StatusOr<plimsoll::v1::SetHostPolicyRequest> BuildHostSetRequest(const Flags& flags) {
  if (absl::Status s = CheckFlags(flags, {"budget", "reserve", "policy", "pause", "resume", "clear"}, "host set");
      !s.ok()) {
    return s;
  }
  plimsoll::v1::SetHostPolicyRequest r;
  auto* p = r.mutable_policy();
  if (auto v = One(flags, "budget"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto b = SizeFlag("budget", **v);
    if (!b.ok()) return b.status();
    p->set_guest_memory_budget_bytes(*b);
  }
  if (auto v = One(flags, "reserve"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto b = SizeFlag("reserve", **v);
    if (!b.ok()) return b.status();
    p->set_host_reserve_bytes(*b);
  }
  if (auto v = One(flags, "policy"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    if ((*v)->empty()) return FlagError("--policy", "give a policy name, e.g. --policy=mom");
    p->set_policy(**v);
  }
  const bool pause = flags.count("pause") > 0;
  const bool resume = flags.count("resume") > 0;
  if (pause && resume) return FlagError("--pause", "and --resume together: choose one");
  if (pause || resume) p->set_paused(pause);
  if (auto v = One(flags, "clear"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    for (const std::string& f : List(**v)) {
      r.add_clear_fields(f == "budget" ? "guest_memory_budget_bytes" : f == "reserve" ? "host_reserve_bytes" : f);
    }
  }
  return r;
}

absl::StatusOr<plimsoll::v1::ReclaimRequest> BuildReclaimRequest(const std::string& bytes, const Flags& flags) {
  if (absl::Status s = CheckFlags(flags, {"dry-run", "dry_run", "hold", "require-full"}, "reclaim"); !s.ok()) return s;
  plimsoll::v1::ReclaimRequest r;
  auto b = ParseByteSize(bytes);
  if (!b.ok()) return FlagError("BYTES", b.status().message());
  r.set_bytes(*b);
  r.set_dry_run(flags.count("dry-run") > 0 || flags.count("dry_run") > 0);
  r.set_require_full(flags.count("require-full") > 0);
  if (auto v = One(flags, "hold"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    auto s = ParseSeconds(**v);
    if (!s.ok()) return FlagError("--hold", s.status().message());
    r.set_hold_seconds(*s);
  }
  return r;
}

absl::StatusOr<plimsoll::v1::WatchRequest> BuildWatchRequest(const Flags& flags) {
  if (absl::Status s = CheckFlags(flags, {"guest", "kinds", "holds", "snapshot"}, "watch"); !s.ok()) return s;
  plimsoll::v1::WatchRequest r;
  auto [begin, end] = flags.equal_range("guest");
  for (auto it = begin; it != end; ++it) {
    if (it->second.empty()) return FlagError("--guest", "give a guest name or UUID");
    r.add_guests(it->second);
  }
  r.set_include_holds(flags.count("holds") > 0);
  r.set_initial_snapshot(flags.count("snapshot") > 0);
  if (auto v = One(flags, "kinds"); !v.ok()) {
    return v.status();
  } else if (*v != nullptr) {
    for (const std::string& k : List(**v)) {
      plimsoll::v1::WatchEventKind kind;
      const std::string upper = absl::AsciiStrToUpper(k == "host"     ? "host_policy"
                                                      : k == "override" ? "guest_override"
                                                      : k == "line"     ? "host_line"
                                                                        : k);
      if (!plimsoll::v1::WatchEventKind_Parse("WATCH_EVENT_KIND_" + upper, &kind) ||
          kind == plimsoll::v1::WATCH_EVENT_KIND_UNSPECIFIED) {
        return FlagError("--kinds", absl::StrCat("\"", k, "\" is not one of decision, guest, host, override, reclaim, line"));
      }
      r.add_kinds(kind);
    }
  }
  return r;
}

}  // namespace plimsoll::ctl
