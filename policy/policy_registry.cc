// MakePolicy and PolicyNames from policy.h: the one place that knows every policy by name.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "policy/mom_policy.h"
#include "policy/pagecache_policy.h"
#include "policy/policy.h"
#include "policy/proxmox_policy.h"
#include "policy/static_policy.h"

namespace plimsoll::policy {

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(absl::string_view name) {
  if (name == "mom") return std::make_unique<MomPolicy>();
  if (name == "static") return std::make_unique<StaticPolicy>();
  if (name == "pagecache") return std::make_unique<PagecachePolicy>();
  if (name == "proxmox") return std::make_unique<ProxmoxPolicy>();
  // A variant with some parameters changed ("pagecache:probe_fraction=0.01:profile_ratio=0"),
  // for comparing components side by side in the simulator and on real guests.
  if (absl::string_view spec = name; absl::ConsumePrefix(&spec, "pagecache:")) {
    absl::StatusOr<PagecacheParams> params = ParsePagecacheParams(spec);
    if (!params.ok()) return params.status();
    return std::make_unique<PagecachePolicy>(*params, std::string(name));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown policy \"", absl::CHexEscape(name),
                                                 "\"; known policies: ",
                                                 absl::StrJoin(PolicyNames(), ", ")));
}

std::vector<std::string> PolicyNames() { return {"mom", "static", "pagecache", "proxmox"}; }

std::optional<std::string> RenamedPolicy(absl::string_view name) {
  if (name == "pagecache_law") return std::string("pagecache");
  if (absl::ConsumePrefix(&name, "pagecache_law:")) return absl::StrCat("pagecache:", name);
  return std::nullopt;
}

}  // namespace plimsoll::policy
