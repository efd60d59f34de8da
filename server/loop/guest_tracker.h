// Per-guest bookkeeping that outlives a tick: which guests exist, the target we
// last set, when their stats last advanced, and the last decision. The control
// loop owns one instance and is its only caller (not thread-safe by design).
#ifndef PLIMSOLL_SERVER_LOOP_GUEST_TRACKER_H_
#define PLIMSOLL_SERVER_LOOP_GUEST_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "plimsoll/v1/types.pb.h"
#include "policy/history_deriver.h"
#include "policy/policy.h"
#include "server/hypervisor/hypervisor.h"
#include "server/loop/envelope.h"
#include "server/loop/reclaim_claim_check.h"

namespace plimsoll::server {

// How guests' floors and freshness are judged; from Options.
struct GuestRules {
  int64_t min_bytes = 256LL << 20;
  double min_fraction = 0.25;
  absl::Duration stale_after = absl::Seconds(30);
  // A guest that has not produced balloon stats this long after we first saw it
  // is reported as having no balloon driver.
  absl::Duration no_balloon_after = absl::Seconds(20);
  // A guest missing from this many successful listings in a row is forgotten (its policy
  // state with it); one stopped by a lifecycle event at once. One listing is not enough: a
  // transient per-domain libvirt error leaves a running guest out of it, and forgetting it
  // erased the retry and cooldown that keep a backed-off guest from being taken from again.
  int absent_listings = 3;
};

struct TrackedGuest {
  hypervisor::DomainInfo info;
  int64_t min_bytes = 0;
  int64_t target_bytes = 0;  // last target applied; adopted from the live size at first sight
  int64_t actual_bytes = 0;
  hypervisor::BalloonStats stats;
  // When stats.disk_read_* were read (the tick's time of the survey that read them), and how
  // long before the last UpdateStats: surveys read the disks only every block_stats_interval,
  // and in between the last reads stand, with their own time.
  std::optional<absl::Time> disk_read_at;
  double disk_read_age_seconds = 0;
  bool has_stats = false;
  bool stats_fresh = false;
  double stats_age_seconds = 0;
  double stats_still_seconds = 0;  // policy::GuestView::stats_still_seconds
  absl::Time first_seen;
  // Since when this guest's stats have had to prove themselves fresh: first seen, or the last
  // time libvirt's answers were lost (MarkAllStale). Stats not yet proven are as old as this,
  // not as old as first_seen: a reconnect must not make every guest look long unseen (the
  // pagecache policy gives a guest unseen for blind_after_s its ceiling back).
  absl::Time watched_since;
  // Staleness: the guest's last_update value and when we saw it change.
  std::optional<int64_t> last_update_value;
  std::optional<absl::Time> last_update_changed_at;
  bool stats_enabled = false;
  // Switching stats on failed (e.g. the guest has no balloon device): retried with a
  // doubling backoff, not every tick, so such a guest does not flood errors and logs.
  absl::Time enable_stats_retry_at = absl::InfinitePast();
  absl::Duration enable_stats_backoff = absl::ZeroDuration();
  plimsoll::v1::ManagementState management = plimsoll::v1::MANAGEMENT_STATE_UNSPECIFIED;
  std::string detail;
  plimsoll::v1::Decision last_decision;
  std::string balloon_state;  // from the policy's last decision ("" when not tracked)
  uint64_t listed_in = 0;     // the last Reconcile that listed the guest
  int missed_listings = 0;    // successful listings in a row without it (kept, not managed)
  // Two balloon calls to the domain overlapped (one had timed out, balloon_calls.h): libvirt
  // holds the target of whichever it ran last, which is not known, so target_bytes is the last
  // one reported. The loop sets the target again, alone, before it believes it.
  bool target_unsure = false;
  // When the call that set target_bytes was submitted (InfinitePast: adopted).
  absl::Time target_call_at = absl::InfinitePast();
  // The lowest an override takes the guest without force (Guest.envelope_floor_bytes), from the
  // last decision; 0 before it.
  int64_t envelope_floor = 0;
  // What DerivedViews keeps from one tick to the next (policy/history_deriver.h).
  policy::HistoryMemory history;
  // The check of its agent's claimed reclaim against its QEMU's RSS (reclaim_claim_check.h),
  // stepped by the control loop once a tick; shown, never decided on.
  ReclaimClaimState reclaim_claims;
  // The operator's controls over the guest this tick, set by the control loop before anything
  // reads them (ControlLoop::ComputeControls). Kept with the guest rather than in a map by uuid:
  // the tick reads them four times per guest, and each lookup hashed a uuid.
  GuestControl control;
  // What the control loop last logged of the guest, kept with it (and forgotten with it) rather
  // than in maps by uuid that each tick looked every guest up in. The last decision logged and
  // when, so unchanged holds are not logged every tick:
  plimsoll::v1::Direction logged_direction = plimsoll::v1::DIRECTION_UNSPECIFIED;
  absl::Time logged_at = absl::InfinitePast();
  // and the last "busy" line and the skips since, so a long migration logs once a minute.
  absl::Time busy_logged_at = absl::InfinitePast();
  int64_t busy_unlogged = 0;
};

class GuestTracker {
 public:
  explicit GuestTracker(GuestRules rules) : rules_(rules) {}

  // New rules (config reload): floors follow at the next Reconcile, freshness
  // at the next UpdateStats.
  void set_rules(GuestRules rules) { rules_ = rules; }

  struct ReconcileResult {
    std::vector<std::string> added;    // uuids seen for the first time: target adopted
    std::vector<std::string> removed;  // uuids no longer active: forgotten
    bool max_changed = false;          // a known guest's <memory> changed
  };

  // Makes the tracked set follow `domains`. A new guest adopts its current
  // balloon size as its target, so a daemon (re)start never moves a balloon by
  // itself. Identity and limits of known guests are refreshed. A guest missing
  // from `domains` is removed when it is in `stopped` (a lifecycle event said
  // so) or has been missing from rules.absent_listings listings in a row;
  // until then it stays, with missed_listings counting.
  ReconcileResult Reconcile(const std::vector<hypervisor::DomainInfo>& domains, absl::Time now,
                            const absl::flat_hash_set<std::string>& stopped = {});

  // Records this tick's stats. A guest missing from `stats` keeps its old
  // stats, which then age into staleness. A partial record (no last_update: the
  // NOWAIT fallback of a busy domain) updates what it carries and keeps the rest
  // of the last full record, so it ages the same way instead of looking stat-less.
  // `disk_reads_read`: the records carry this call's disk reads (DomainSurvey::
  // block_stats_read), read at `now`; when false every guest keeps its last ones.
  void UpdateStats(const absl::flat_hash_map<std::string, hypervisor::BalloonStats>& stats,
                   absl::Time now, bool disk_reads_read = true);

  // Marks every guest's stats as not fresh (e.g. the libvirt connection is lost): each must be
  // seen to change again, and until then its stats age counts from `now`.
  void MarkAllStale(absl::Time now);

  // The policy's view of every guest, in a stable order (ByName()).
  std::vector<policy::GuestView> Views() const;

  // Views() with each guest's history (policy/history_deriver.h), `add_reports` adding what else
  // the guest reported (the agent's signals) to its view before its history is derived, its
  // ceiling still <memory>. In one pass: each guest is read once, while it is in cache, and no
  // view is matched to its guest by uuid. What the control loop's snapshot is made of, once per
  // tick before the policy decides: a history's "new report" and rates are relative to the
  // previous call.
  std::vector<policy::GuestView> DerivedViews(absl::Time now,
                                              absl::FunctionRef<void(policy::GuestView&)> add_reports);

  // Every guest by name, then uuid. Kept from one Reconcile to the next (sorting
  // thousands of names twice a tick was a visible share of it); valid until the
  // next Reconcile.
  const std::vector<const TrackedGuest*>& ByName() const { return by_name_; }

  TrackedGuest* Find(const std::string& uuid);
  // The guest at position `i` (< ByName().size()) of ByName(), to update: the policy's views and
  // decisions come in that order, and a guest is found by its place without a lookup.
  TrackedGuest* AtByName(size_t i);
  // Calls `f` on every guest, in uuid order.
  void ForEachGuest(absl::FunctionRef<void(TrackedGuest&)> f);
  const absl::btree_map<std::string, TrackedGuest>& guests() const { return by_uuid_; }

  // Floor for a guest of this size: max(min_bytes, min_fraction * max), capped at max.
  int64_t FloorFor(int64_t max_bytes) const;

 private:
  void RefreshFreshness(TrackedGuest& g, absl::Time now) const;
  // The policy's view of one guest (Views()), without a history.
  static policy::GuestView ViewOf(const TrackedGuest& g);

  GuestRules rules_;
  absl::btree_map<std::string, TrackedGuest> by_uuid_;
  // Rebuilt by Reconcile whenever a guest came, went or was renamed: a btree_map
  // insert or erase may move its values.
  std::vector<const TrackedGuest*> by_name_;
  // The guest of each domain of the last Reconcile, in its order (Reconcile checks a domain's
  // position here before searching by_uuid_). Rebuilt when a guest came or went, like by_name_.
  std::vector<TrackedGuest*> listing_;
  uint64_t reconciles_ = 0;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_GUEST_TRACKER_H_
