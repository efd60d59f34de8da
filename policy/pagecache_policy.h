// The page-cache-aware policy, "pagecache" (plimsolld's default): each guest's proposal from the
// per-guest law (pagecache_law.h), the host's say from the one share-out (share_out.h), and the
// safety rules every policy applies (guest_safety.h). docs/policy.md writes it as equations.
//
// Per-guest memory: LawMemory (pagecache_law.h) in each guest's slot. Immutable after
// construction: thread-safe.
#ifndef PLIMSOLL_POLICY_PAGECACHE_POLICY_H_
#define PLIMSOLL_POLICY_PAGECACHE_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/pagecache_law.h"
#include "policy/policy.h"
#include "policy/share_out.h"

namespace plimsoll::policy {

struct PagecacheParams {
  LawParams law;
  ShareOutParams share;
  // Changes smaller than this are not worth a balloon operation.
  double min_change_bytes = 1.0 * (1 << 20);
};

// Sets the parameter `name` (docs/policy.md's table: "probe_fraction", "cooldown_min_s",
// "profile_ratio", ...) to `value`. INVALID_ARGUMENT names an unknown parameter or a value out
// of its range.
absl::Status SetPagecacheParam(absl::string_view name, double value, PagecacheParams* params);

// The parameter names SetPagecacheParam knows, in the table's order.
std::vector<std::string> PagecacheParamNames();

// "k=v:k=v" (the part after "pagecache:" in a policy name, so the simulator can run
// variants side by side: --policies=pagecache,pagecache:profile_ratio=0) applied to the
// defaults. INVALID_ARGUMENT names the bad item.
absl::StatusOr<PagecacheParams> ParsePagecacheParams(absl::string_view spec);

class PagecachePolicy : public Policy {
 public:
  explicit PagecachePolicy(PagecacheParams params = PagecacheParams()) : params_(params) {}

  // "pagecache".
  absl::string_view name() const override;

  // One decision per guest in snapshot order; a snapshot with guest_budget_bytes <= 0 holds
  // every guest.
  Decisions Decide(const Snapshot& snapshot, PolicyState state) const override;

 private:
  const PagecacheParams params_;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PAGECACHE_POLICY_H_
