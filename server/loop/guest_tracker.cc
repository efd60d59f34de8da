#include "server/loop/guest_tracker.h"

#include <algorithm>

#include "policy/guest_safety.h"

namespace plimsoll::server {
namespace {

// A record without last_update carries no guest statistics: the bulk call's NOWAIT fallback
// for a domain busy with another job reports only what QEMU knows without asking the guest
// (current and maximum). Such a record updates the fields it has and keeps the rest of the
// last full record, last_update included, so freshness is still judged by last_update and a
// briefly busy domain does not look stat-less. A full record replaces the old one outright: a
// field the guest stopped reporting must not live on.
void MergeStats(const hypervisor::BalloonStats& in, hypervisor::BalloonStats* out) {
  if (in.last_update.has_value()) {
    *out = in;
    return;
  }
  auto take = [](const auto& from, auto& to) {
    if (from.has_value()) to = from;
  };
  take(in.actual_bytes, out->actual_bytes);
  take(in.unused_bytes, out->unused_bytes);
  take(in.usable_bytes, out->usable_bytes);
  take(in.available_bytes, out->available_bytes);
  take(in.disk_caches_bytes, out->disk_caches_bytes);
  take(in.rss_bytes, out->rss_bytes);
  take(in.swap_in, out->swap_in);
  take(in.swap_out, out->swap_out);
  take(in.major_fault, out->major_fault);
  take(in.minor_fault, out->minor_fault);
  out->disk_read_bytes = in.disk_read_bytes;
  out->disk_read_requests = in.disk_read_requests;
}

// Disk reads are the host's count, read at one call: a call that read them replaces them
// (absent from a full record: the guest has no disk now), one that did not keeps them with the
// time they were read, so a rate is taken over the reads' own times (policy/history_deriver.h):
// a kept count stamped with the tick's time would make one interval read 0 and the next twice
// the rate. A partial record (a domain busy with a job, answered without
// asking it) that lacks them keeps the last ones too: the domain's disks did not go away.
void MergeDiskReads(const hypervisor::BalloonStats& in, bool read, absl::Time now, TrackedGuest* g) {
  const std::optional<uint64_t> bytes = g->stats.disk_read_bytes;
  const std::optional<uint64_t> requests = g->stats.disk_read_requests;
  MergeStats(in, &g->stats);
  const bool busy_without_them = !in.last_update.has_value() && !in.disk_read_bytes.has_value();
  if (read && !busy_without_them) {
    g->disk_read_at = now;
  } else {
    g->stats.disk_read_bytes = bytes;
    g->stats.disk_read_requests = requests;
  }
}

}  // namespace

int64_t GuestTracker::FloorFor(int64_t max_bytes) const {
  const int64_t by_fraction = static_cast<int64_t>(rules_.min_fraction * static_cast<double>(max_bytes));
  return std::min(max_bytes, std::max(rules_.min_bytes, by_fraction));
}

GuestTracker::ReconcileResult GuestTracker::Reconcile(
    const std::vector<hypervisor::DomainInfo>& domains, absl::Time now,
    const absl::flat_hash_set<std::string>& stopped) {
  ReconcileResult result;
  // Marks each listed guest with this reconcile's number: what is left unmarked
  // is gone, found without a set of the listed uuids (10,000 strings a tick).
  const uint64_t pass = ++reconciles_;
  size_t listed = 0;  // distinct tracked guests in `domains`
  bool renamed = false;
  // libvirt lists the same domains in the same order tick after tick: the guest at a domain's
  // position in the last listing is checked first (one comparison), the map searched only on a
  // miss. An insertion may move the map's values, so the last listing is not trusted after one.
  bool listing_valid = true;
  bool same_listing = listing_.size() == domains.size();  // every domain where it was last time
  for (size_t i = 0; i < domains.size(); ++i) {
    const hypervisor::DomainInfo& d = domains[i];
    TrackedGuest* known = nullptr;
    if (listing_valid && i < listing_.size() && listing_[i]->info.uuid == d.uuid) {
      known = listing_[i];
    } else {
      same_listing = false;
      if (auto it = by_uuid_.find(d.uuid); it != by_uuid_.end()) known = &it->second;
    }
    if (known == nullptr) {
      listing_valid = false;
      TrackedGuest g;
      g.info = d;
      g.first_seen = now;
      g.watched_since = now;
      g.actual_bytes = d.current_bytes;
      g.target_bytes = d.current_bytes;
      g.min_bytes = FloorFor(d.max_bytes);
      g.listed_in = pass;
      by_uuid_.emplace(d.uuid, std::move(g));
      result.added.push_back(d.uuid);
      ++listed;
    } else {
      if (known->listed_in != pass) ++listed;
      known->listed_in = pass;
      known->missed_listings = 0;
      renamed = renamed || known->info.name != d.name;
      result.max_changed = result.max_changed || known->info.max_bytes != d.max_bytes;
      known->info = d;
      known->min_bytes = FloorFor(d.max_bytes);
    }
  }
  if (listed != by_uuid_.size()) {  // the usual tick has nobody leaving
    for (auto it = by_uuid_.begin(); it != by_uuid_.end();) {
      if (it->second.listed_in != pass &&
          (++it->second.missed_listings >= rules_.absent_listings || stopped.contains(it->first))) {
        result.removed.push_back(it->first);
        it = by_uuid_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Rebuilt when the listing changed, or a guest came or went (the map's values may have moved).
  if (!same_listing || !result.added.empty() || !result.removed.empty()) {
    listing_.clear();
    listing_.reserve(domains.size());
    for (const hypervisor::DomainInfo& d : domains) listing_.push_back(&by_uuid_.find(d.uuid)->second);
  }
  if (renamed || !result.added.empty() || !result.removed.empty()) {
    by_name_.clear();
    by_name_.reserve(by_uuid_.size());
    for (const auto& [uuid, g] : by_uuid_) by_name_.push_back(&g);
    std::sort(by_name_.begin(), by_name_.end(), [](const TrackedGuest* a, const TrackedGuest* b) {
      return a->info.name != b->info.name ? a->info.name < b->info.name : a->info.uuid < b->info.uuid;
    });
  }
  return result;
}

void GuestTracker::RefreshFreshness(TrackedGuest& g, absl::Time now) const {
  const bool reporting = g.stats.last_update.has_value() && *g.stats.last_update > 0 &&
                         (g.stats.unused_bytes.has_value() || g.stats.usable_bytes.has_value());
  g.has_stats = reporting;
  if (!reporting) {
    g.stats_fresh = false;
    g.stats_age_seconds = absl::ToDoubleSeconds(now - g.watched_since);
    return;
  }
  if (!g.last_update_value.has_value() || *g.last_update_value != *g.stats.last_update) {
    // The first value we ever see proves nothing about freshness (it may be
    // hours old after a daemon restart): only a change does.
    if (g.last_update_value.has_value()) g.last_update_changed_at = now;
    g.last_update_value = *g.stats.last_update;
  }
  if (!g.last_update_changed_at.has_value()) {
    g.stats_fresh = false;
    g.stats_age_seconds = absl::ToDoubleSeconds(now - g.watched_since);
    return;
  }
  const absl::Duration age = now - *g.last_update_changed_at;
  g.stats_age_seconds = absl::ToDoubleSeconds(age);
  g.stats_fresh = policy::StatsFresh(absl::ToDoubleSeconds(age), absl::ToDoubleSeconds(rules_.stale_after));
}

void GuestTracker::UpdateStats(
    const absl::flat_hash_map<std::string, hypervisor::BalloonStats>& stats, absl::Time now,
    bool disk_reads_read) {
  for (auto& [uuid, g] : by_uuid_) {
    auto it = stats.find(uuid);
    // Stats that stand still because the host could not ask the guest (no record: the call
    // failed; a partial record: the domain is busy with a job; a paused domain) say nothing of
    // the guest: it is watched again from now.
    if (it == stats.end() || !it->second.last_update.has_value() ||
        g.info.state != hypervisor::DomainRunState::kRunning) {
      g.watched_since = now;
    }
    if (it != stats.end()) {
      MergeDiskReads(it->second, disk_reads_read, now, &g);
      if (it->second.actual_bytes.has_value()) g.actual_bytes = *it->second.actual_bytes;
    }
    g.disk_read_age_seconds = g.disk_read_at.has_value() ? absl::ToDoubleSeconds(now - *g.disk_read_at) : 0;
    RefreshFreshness(g, now);
    const absl::Time still_since = g.last_update_changed_at.has_value()
                                       ? std::max(*g.last_update_changed_at, g.watched_since)
                                       : g.watched_since;
    g.stats_still_seconds = absl::ToDoubleSeconds(now - still_since);
    if (g.has_stats && g.stats_fresh) {
      g.management = plimsoll::v1::MANAGEMENT_STATE_MANAGED;
    } else if (!g.has_stats && now - g.first_seen >= rules_.no_balloon_after) {
      g.management = plimsoll::v1::MANAGEMENT_STATE_NO_BALLOON;
    } else {
      g.management = plimsoll::v1::MANAGEMENT_STATE_STALE_STATS;
    }
  }
}

void GuestTracker::MarkAllStale(absl::Time now) {
  for (auto& [uuid, g] : by_uuid_) {
    g.stats_fresh = false;
    // Forget the last change: after reconnecting, freshness must be proven anew.
    g.last_update_changed_at.reset();
    g.last_update_value.reset();
    g.watched_since = now;
    g.stats_still_seconds = 0;
    g.management = plimsoll::v1::MANAGEMENT_STATE_STALE_STATS;
  }
}

policy::GuestView GuestTracker::ViewOf(const TrackedGuest& g) {
  policy::GuestView v;
  v.name = g.info.name;
  v.uuid = g.info.uuid;
  v.max_bytes = g.info.max_bytes;
  v.min_bytes = g.min_bytes;
  v.actual_bytes = g.actual_bytes;
  v.target_bytes = g.target_bytes;
  v.has_stats = g.has_stats;
  v.stats_fresh = g.stats_fresh;
  v.stats_age_seconds = g.stats_age_seconds;
  v.stats_still_seconds = g.stats_still_seconds;
  v.unused_bytes = g.stats.unused_bytes;
  v.usable_bytes = g.stats.usable_bytes;
  v.total_bytes = g.stats.available_bytes;
  v.disk_caches_bytes = g.stats.disk_caches_bytes;
  v.major_fault = g.stats.major_fault;
  v.swap_in = g.stats.swap_in;
  v.swap_out = g.stats.swap_out;
  v.host_rss_bytes = g.stats.rss_bytes;
  v.free_page_reporting = g.info.free_page_reporting;
  v.balloon_oom_kills = g.stats.pressure.oom_kills;
  v.balloon_alloc_stalls = g.stats.pressure.alloc_stalls;
  v.balloon_direct_scan_bytes = g.stats.pressure.direct_scans;
  // QEMU stamps both with its own clock when the guest's report arrives: the counters are as
  // much older than the stats as their stamp is older.
  if (g.stats.pressure.last_update.has_value() && g.stats.last_update.has_value()) {
    v.balloon_pressure_age_seconds =
        g.stats_age_seconds +
        static_cast<double>(std::max<int64_t>(0, *g.stats.last_update - *g.stats.pressure.last_update));
  }
  v.disk_read_bytes = g.stats.disk_read_bytes;
  v.disk_read_requests = g.stats.disk_read_requests;
  if (v.disk_read_bytes.has_value()) v.disk_read_age_seconds = g.disk_read_age_seconds;
  return v;
}

std::vector<policy::GuestView> GuestTracker::Views() const {
  std::vector<policy::GuestView> views;
  views.reserve(by_name_.size());
  for (const TrackedGuest* g : by_name_) views.push_back(ViewOf(*g));
  return views;
}

std::vector<policy::GuestView> GuestTracker::DerivedViews(absl::Time now,
                                                          absl::FunctionRef<void(policy::GuestView&)> add_reports) {
  const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
  std::vector<policy::GuestView> views;
  views.reserve(by_name_.size());
  for (const TrackedGuest* g : by_name_) {
    policy::GuestView& v = views.emplace_back(ViewOf(*g));
    add_reports(v);
    // by_name_ points into by_uuid_, which this object owns: the const is only for ByName().
    v.history = policy::DeriveHistory(v, now_s, &const_cast<TrackedGuest*>(g)->history);
  }
  return views;
}

TrackedGuest* GuestTracker::Find(const std::string& uuid) {
  auto it = by_uuid_.find(uuid);
  return it == by_uuid_.end() ? nullptr : &it->second;
}

TrackedGuest* GuestTracker::AtByName(size_t i) {
  // by_name_ points into by_uuid_, which this object owns: the const is only for ByName().
  return const_cast<TrackedGuest*>(by_name_[i]);
}

void GuestTracker::ForEachGuest(absl::FunctionRef<void(TrackedGuest&)> f) {
  for (auto& [uuid, g] : by_uuid_) f(g);
}

}  // namespace plimsoll::server
