// The page-cache-aware policy, "pagecache" (plimsolld's default): each guest's proposal from the
// per-guest law (pagecache_law.h), the host's say from the one share-out (share_out.h), and the
// safety rules every policy applies (guest_safety.h). docs/policy.md writes it as equations.
//
// Per-guest memory: LawMemory (pagecache_law.h) in each guest's slot. Immutable after
// construction: thread-safe.
#ifndef PLIMSOLL_POLICY_PAGECACHE_POLICY_H_
#define PLIMSOLL_POLICY_PAGECACHE_POLICY_H_

#include <string>
#include <utility>
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
  // A guest whose stats have not been fresh for this long is given its ceiling back, out of free
  // memory only: the host cannot see what it needs, so it is kept as a guest never seen is. Held
  // where the law last took it instead, a blind guest that allocates is OOM-killed
  // (sim/scenarios/bad_stats.scenario). 0: off.
  double blind_after_seconds = 60;
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
  // `name` is the spec it was made from ("pagecache", "pagecache:probe_fraction=0.01"): a host
  // policy naming a variant must read as another policy than the default, and every decision
  // says which variant decided.
  explicit PagecachePolicy(PagecacheParams params = PagecacheParams(), std::string name = "pagecache")
      : params_(params), name_(std::move(name)) {}

  absl::string_view name() const override;

  // One decision per guest in snapshot order; a snapshot with guest_budget_bytes <= 0 holds
  // every guest.
  Decisions Decide(const Snapshot& snapshot, PolicyState state) const override;

 private:
  const PagecacheParams params_;
  const std::string name_;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PAGECACHE_POLICY_H_
