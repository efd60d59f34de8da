#include "server/agent/agent_store.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plimsoll::server::agent {
namespace {

// How often Ingest sweeps forgotten entries (amortised; Expire() is also public).
constexpr absl::Duration kExpireEvery = absl::Seconds(10);

template <typename T>
std::optional<int64_t> Bytes(bool has, T value) {
  // The validator bounds every RAM field by the guest's int64 ceiling; swap by 2^50.
  if (!has) return std::nullopt;
  return static_cast<int64_t>(std::min<uint64_t>(value, static_cast<uint64_t>(INT64_MAX)));
}

// a + b, or UINT64_MAX where it would wrap: totals a hostile agent feeds never come back round.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// The most a report may add to a guest's reclaim totals, measured on the host's clock: the
// validator's plausibility rate over the host seconds since the guest's previous accepted report
// (0 without one) plus one second, plus one step (at most the guest's ceiling). The validator
// bounds claims by the guest's own clock, which the guest chooses: a new boot id or series
// restarts its count, and a boottime that leaps ahead widens it. The host's clock does neither.
uint64_t ReclaimAllowance(double max_rate, std::optional<absl::Time> previous, absl::Time now, int64_t max_bytes) {
  const double seconds = previous.has_value() ? std::max(0.0, absl::ToDoubleSeconds(now - *previous)) : 0.0;
  const double allowance = max_rate * (seconds + 1.0) + static_cast<double>(std::max<int64_t>(max_bytes, 0));
  // A double at or past 2^64 does not convert: capped at 2^63, centuries at any plausible rate.
  if (!(allowance < 9.2e18)) return uint64_t{1} << 63;
  return static_cast<uint64_t>(allowance);
}

// At most one compaction a host second since the previous accepted report, plus one.
uint64_t CompactionAllowance(std::optional<absl::Time> previous, absl::Time now) {
  const double seconds = previous.has_value() ? std::max(0.0, absl::ToDoubleSeconds(now - *previous)) : 0.0;
  return seconds < 9.2e18 ? static_cast<uint64_t>(seconds) + 1 : uint64_t{1} << 63;
}

std::optional<double> Rate(const std::optional<uint64_t>& before, const std::optional<uint64_t>& after,
                           double seconds) {
  if (!before.has_value() || !after.has_value() || *after < *before || seconds <= 0) return std::nullopt;
  return static_cast<double>(*after - *before) / seconds;
}

}  // namespace

uint64_t AgentCounters::rejected_total() const {
  uint64_t total = 0;
  for (uint64_t n : rejected) total += n;
  return total;
}

AgentStore::AgentStore(const ReportValidator* validator, Clock* clock, AgentStoreOptions options)
    : validator_(validator), clock_(clock), options_(options) {
  for (auto& r : rejected_) r.store(0, std::memory_order_relaxed);
}

void AgentStore::SetKnownGuests(absl::flat_hash_map<std::string, GuestLimits> guests) {
  absl::MutexLock l(&mu_);
  known_ = std::move(guests);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (known_.contains(it->first)) {
      ++it;
    } else {
      entries_.erase(it++);
    }
  }
}

IngestResult AgentStore::IdentifyByChannel(const v1::SignedAgentReport& frame, const std::string& channel_uuid,
                                           v1::AgentReport* report) {
  IngestResult result;
  Verdict verdict = validator_->Parse(frame, report);
  result.sequence = report->sequence();
  if (!verdict.ok()) {
    Count(*verdict.reject);
    result.reject = verdict.reject;
    result.detail = std::move(verdict.detail);
    return result;
  }
  if (report->guest_uuid() != channel_uuid) {
    // The hypervisor says which domain this channel belongs to; a report naming another guest is
    // a lie (or a misconfigured agent) and must not touch that guest.
    Count(RejectReason::kChannelIdentityMismatch);
    result.reject = RejectReason::kChannelIdentityMismatch;
    result.detail = absl::StrCat("channel of ", channel_uuid, " sent a report for ", report->guest_uuid());
    result.end_stream = true;
    const absl::Time now = clock_->Now();
    absl::MutexLock l(&mu_);
    // Recorded on the channel's own guest (a managed one only, so memory stays bounded), never
    // on the guest the report names.
    if (known_.contains(channel_uuid)) {
      Entry& entry = entries_[channel_uuid];
      entry.last_reject_reason = std::string(RejectReasonName(RejectReason::kChannelIdentityMismatch));
      entry.last_reject = now;
    }
    return result;
  }
  result.authenticated = true;
  result.uuid = channel_uuid;
  return result;
}

IngestResult AgentStore::Ingest(const v1::SignedAgentReport& frame, const StreamBinding& stream) {
  IngestResult result;
  v1::AgentReport report;
  if (!stream.channel_uuid.empty()) {
    result = IdentifyByChannel(frame, stream.channel_uuid, &report);
    if (!result.authenticated) return result;
  } else {
    // The costly part (parse, two HMACs) runs without the lock.
    Verdict verdict = validator_->Authenticate(frame, &report, stream.proof_cache);
    result.sequence = report.sequence();
    if (!verdict.ok()) {
      Count(*verdict.reject);
      result.reject = verdict.reject;
      result.detail = std::move(verdict.detail);
      result.end_stream = *verdict.reject == RejectReason::kBadProof;
      return result;
    }
    result.authenticated = true;
    result.uuid = report.guest_uuid();
  }
  if (!stream.uuid.empty() && stream.uuid != result.uuid) {
    Count(RejectReason::kStreamIdentityChanged);
    result.reject = RejectReason::kStreamIdentityChanged;
    result.detail = absl::StrCat("stream of ", stream.uuid, " sent a report of ", result.uuid);
    result.end_stream = true;
    return result;
  }
  if (!stream.nonce.empty() && report.stream_nonce() != stream.nonce) {
    // Proven, but made for another stream: a recorded report played back.
    Count(RejectReason::kReplay);
    result.reject = RejectReason::kReplay;
    result.detail = "report carries another stream's nonce";
    result.end_stream = true;
    return result;
  }

  const absl::Time now = clock_->Now();
  const bool spike = report.spike();
  result = IngestAuthenticated(report, now, std::move(result));
  if (result.ok() && spike) {
    std::function<void(const std::string&)> listener;
    {
      absl::MutexLock l(&listener_mu_);
      listener = spike_listener_;
    }
    if (listener) listener(result.uuid);
  }
  return result;
}

IngestResult AgentStore::IngestAuthenticated(v1::AgentReport& report, absl::Time now, IngestResult result) {
  absl::MutexLock l(&mu_);
  if (now - last_expire_ >= kExpireEvery) ExpireLocked(now);
  auto known = known_.find(report.guest_uuid());
  if (known == known_.end()) {
    Count(RejectReason::kUnknownGuest);
    result.reject = RejectReason::kUnknownGuest;
    result.detail = "not a managed guest";
    return result;
  }
  Entry& entry = entries_[report.guest_uuid()];
  const bool reboot = ReportValidator::IsReboot(report, entry.history);
  Verdict verdict = validator_->CheckInPlace(report, &known->second, &entry.history, now);
  if (!verdict.ok()) {
    Count(*verdict.reject);
    entry.last_reject_reason = std::string(RejectReasonName(*verdict.reject));
    entry.last_reject = now;
    result.reject = verdict.reject;
    result.detail = std::move(verdict.detail);
    return result;
  }
  accepted_.fetch_add(1, std::memory_order_relaxed);
  ++entry.accepted;
  const std::optional<absl::Time> previous_received = entry.received;
  entry.received = now;
  if (report.spike()) entry.last_spike = now;
  if (reboot) {
    reboots_.fetch_add(1, std::memory_order_relaxed);
    entry.samples.clear();
  }
  const v1::GuestVmstat& vm = report.vmstat();
  RateSample sample;
  sample.boottime_ns = report.boottime_ns();
  if (vm.has_workingset_refault_file()) sample.refault_file = vm.workingset_refault_file();
  if (vm.has_workingset_refault_anon()) sample.refault_anon = vm.workingset_refault_anon();
  if (vm.has_pgmajfault()) sample.pgmajfault = vm.pgmajfault();
  if (vm.has_pgscan_total()) sample.pgscan = vm.pgscan_total();
  if (vm.has_pgsteal_total()) sample.pgsteal = vm.pgsteal_total();
  entry.samples.push_back(sample);
  // Keep the newest sample that is at least min_rate_span older than this one (the rate base)
  // and everything after it; drop the rest.
  const int64_t min_span_ns = absl::ToInt64Nanoseconds(options_.min_rate_span);
  while (entry.samples.size() > 2 && sample.boottime_ns - entry.samples[1].boottime_ns >= min_span_ns) {
    entry.samples.pop_front();
  }
  while (entry.samples.size() > std::max<size_t>(options_.max_rate_samples, 2)) entry.samples.pop_front();
  if (report.has_reclaim()) {
    // What this report adds: the growth within its series, or all of a new series' counters,
    // each at most what the host's clock allows since the last report.
    const v1::ReclaimReport& r = report.reclaim();
    const bool same = entry.history.last.has_value() && ReportValidator::SameReclaimSeries(report, *entry.history.last);
    const uint64_t allowance = ReclaimAllowance(validator_->options().max_reclaim_bytes_per_second,
                                                previous_received, now, known->second.max_bytes);
    // The validator has checked that a series' counters do not go backwards.
    const uint64_t requested = r.requested_bytes() - (same ? entry.history.last->reclaim().requested_bytes() : 0);
    const uint64_t achieved = r.achieved_bytes() - (same ? entry.history.last->reclaim().achieved_bytes() : 0);
    entry.reclaim_requested_total = SaturatingAdd(entry.reclaim_requested_total, std::min(requested, allowance));
    entry.reclaim_achieved_total = SaturatingAdd(entry.reclaim_achieved_total, std::min(achieved, allowance));
    const uint64_t compactions = r.compactions() - (same ? entry.history.last->reclaim().compactions() : 0);
    const uint64_t failed = r.failed_compactions() - (same ? entry.history.last->reclaim().failed_compactions() : 0);
    const uint64_t most = CompactionAllowance(previous_received, now);
    entry.compactions_total = SaturatingAdd(entry.compactions_total, std::min(compactions, most));
    entry.failed_compactions_total = SaturatingAdd(entry.failed_compactions_total, std::min(failed, most));
  }
  // A move, not a copy: the previous latest comes back in `report` and dies outside the lock.
  if (entry.history.last.has_value()) {
    entry.history.last->Swap(&report);
  } else {
    entry.history.last = std::move(report);
  }
  return result;
}

void AgentStore::CountRejected(RejectReason reason) { Count(reason); }

void AgentStore::NoteBoundsSent(const std::string& uuid, const std::optional<v1::ReclaimBounds>& bounds) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(uuid);
  if (it == entries_.end()) return;
  if (!bounds.has_value() && !it->second.bounds_sent.has_value()) return;  // the usual: none, as before
  it->second.bounds_sent = bounds;
}

void AgentStore::SetSpikeListener(std::function<void(const std::string& uuid)> listener) {
  absl::MutexLock l(&listener_mu_);
  spike_listener_ = std::move(listener);
}

void AgentStore::StreamOpened(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  ++open_streams_[uuid];
}

void AgentStore::StreamClosed(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  auto it = open_streams_.find(uuid);
  if (it == open_streams_.end()) return;
  if (--it->second <= 0) open_streams_.erase(it);
}

AgentSignals AgentStore::SignalsLocked(const std::string& uuid, const Entry& e, absl::Time now) const {
  AgentSignals s;
  s.uuid = uuid;
  s.connected = open_streams_.contains(uuid);
  s.reports_accepted = e.accepted;
  s.reclaim_requested_total_bytes = e.reclaim_requested_total;
  s.reclaim_achieved_total_bytes = e.reclaim_achieved_total;
  s.reclaim_compactions_total = e.compactions_total;
  s.reclaim_failed_compactions_total = e.failed_compactions_total;
  s.reclaim_bounds_sent = e.bounds_sent;
  s.last_reject_reason = e.last_reject_reason;
  s.last_reject = e.last_reject;
  s.last_spike = e.last_spike;
  if (!e.received.has_value() || !e.history.last.has_value()) return s;
  s.received = e.received;
  s.age_seconds = std::max(0.0, absl::ToDoubleSeconds(now - *e.received));
  s.fresh = now - *e.received <= options_.stale_after;

  const v1::AgentReport& r = *e.history.last;
  s.boot_id = r.boot_id();
  s.sequence = r.sequence();
  s.spike = r.spike();
  const v1::GuestMeminfo& m = r.meminfo();
  s.mem_total_bytes = Bytes(m.has_mem_total_bytes(), m.mem_total_bytes());
  s.mem_free_bytes = Bytes(m.has_mem_free_bytes(), m.mem_free_bytes());
  s.mem_available_bytes = Bytes(m.has_mem_available_bytes(), m.mem_available_bytes());
  s.buffers_bytes = Bytes(m.has_buffers_bytes(), m.buffers_bytes());
  s.cached_bytes = Bytes(m.has_cached_bytes(), m.cached_bytes());
  s.active_file_bytes = Bytes(m.has_active_file_bytes(), m.active_file_bytes());
  s.inactive_file_bytes = Bytes(m.has_inactive_file_bytes(), m.inactive_file_bytes());
  s.anon_bytes = Bytes(m.has_anon_pages_bytes(), m.anon_pages_bytes());
  s.shmem_bytes = Bytes(m.has_shmem_bytes(), m.shmem_bytes());
  s.sreclaimable_bytes = Bytes(m.has_sreclaimable_bytes(), m.sreclaimable_bytes());
  s.sunreclaim_bytes = Bytes(m.has_sunreclaim_bytes(), m.sunreclaim_bytes());
  s.swap_total_bytes = Bytes(m.has_swap_total_bytes(), m.swap_total_bytes());
  s.swap_free_bytes = Bytes(m.has_swap_free_bytes(), m.swap_free_bytes());
  if (r.has_memory_pressure()) {
    const v1::GuestPsi& p = r.memory_pressure();
    if (p.has_some()) {
      s.psi_some_avg10 = p.some().avg10();
      s.psi_some_avg60 = p.some().avg60();
      s.psi_some_total_us = p.some().total_us();
    }
    if (p.has_full()) {
      s.psi_full_avg10 = p.full().avg10();
      s.psi_full_avg60 = p.full().avg60();
    }
  }
  const v1::GuestVmstat& vm = r.vmstat();
  if (vm.has_oom_kill()) s.oom_kill = vm.oom_kill();
  if (vm.has_balloon_inflate()) s.balloon_inflate = vm.balloon_inflate();
  if (vm.has_balloon_deflate()) s.balloon_deflate = vm.balloon_deflate();
  if (vm.has_allocstall()) s.allocstall = vm.allocstall();
  if (r.has_reclaim()) {
    const v1::ReclaimReport& rc = r.reclaim();
    s.reclaim_state = rc.state();
    s.reclaim_reason = rc.reason();
    s.reclaim_file_only = rc.file_only();
    s.reclaim_dry_run = rc.dry_run();
    s.reclaim_keep_bytes = rc.keep_bytes();
    s.reclaim_keep_file_bytes = rc.keep_file_bytes();
  }

  // Rate base: the newest earlier sample at least min_rate_span of guest time older.
  if (e.samples.size() >= 2) {
    const RateSample& latest = e.samples.back();
    const int64_t min_span_ns = absl::ToInt64Nanoseconds(options_.min_rate_span);
    for (auto it = std::next(e.samples.rbegin()); it != e.samples.rend(); ++it) {
      if (latest.boottime_ns - it->boottime_ns < min_span_ns) continue;
      const double seconds = static_cast<double>(latest.boottime_ns - it->boottime_ns) / 1e9;
      s.rate_span_seconds = seconds;
      s.file_refaults_per_second = Rate(it->refault_file, latest.refault_file, seconds);
      std::optional<double> anon = Rate(it->refault_anon, latest.refault_anon, seconds);
      if (s.file_refaults_per_second.has_value() || anon.has_value()) {
        s.refaults_per_second = s.file_refaults_per_second.value_or(0) + anon.value_or(0);
      }
      s.major_faults_per_second = Rate(it->pgmajfault, latest.pgmajfault, seconds);
      s.pgscan_per_second = Rate(it->pgscan, latest.pgscan, seconds);
      s.pgsteal_per_second = Rate(it->pgsteal, latest.pgsteal, seconds);
      break;
    }
  }
  return s;
}

void AgentStore::SetChannelProblem(const std::string& uuid, std::string problem) {
  absl::MutexLock l(&mu_);
  if (problem.empty()) {
    channel_problems_.erase(uuid);
  } else {
    channel_problems_[uuid] = std::move(problem);
  }
}

std::string AgentStore::ChannelProblem(absl::string_view uuid) const {
  absl::MutexLock l(&mu_);
  // Asked for every guest each tick (the published view): no hash when no channel has a problem.
  if (channel_problems_.empty()) return std::string();
  auto it = channel_problems_.find(uuid);
  return it == channel_problems_.end() ? std::string() : it->second;
}

std::optional<AgentSignals> AgentStore::Signals(absl::string_view uuid) const {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  // Asked for every guest twice a tick (snapshot, view): no hash on a host without agents.
  if (entries_.empty()) return std::nullopt;
  auto it = entries_.find(uuid);
  if (it == entries_.end()) return std::nullopt;
  return SignalsLocked(it->first, it->second, now);
}

std::optional<AgentSignals> AgentStore::FreshSignals(absl::string_view uuid) const {
  std::optional<AgentSignals> s = Signals(uuid);
  if (!s.has_value() || !s->fresh) return std::nullopt;
  return s;
}

std::optional<uint64_t> AgentStore::ReclaimAchievedTotal(absl::string_view uuid) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(uuid);
  if (it == entries_.end()) return std::nullopt;
  return it->second.reclaim_achieved_total;
}

std::vector<AgentSignals> AgentStore::AllSignals() const {
  const absl::Time now = clock_->Now();
  std::vector<AgentSignals> out;
  {
    absl::MutexLock l(&mu_);
    out.reserve(entries_.size());
    for (const auto& [uuid, entry] : entries_) out.push_back(SignalsLocked(uuid, entry, now));
  }
  std::sort(out.begin(), out.end(), [](const AgentSignals& a, const AgentSignals& b) { return a.uuid < b.uuid; });
  return out;
}

bool AgentStore::IsConnected(absl::string_view uuid) const {
  absl::MutexLock l(&mu_);
  return open_streams_.contains(uuid);
}

AgentCounters AgentStore::counters() const {
  AgentCounters c;
  c.accepted = accepted_.load(std::memory_order_relaxed);
  for (int i = 0; i < kNumRejectReasons; ++i) c.rejected[i] = rejected_[i].load(std::memory_order_relaxed);
  c.reboots = reboots_.load(std::memory_order_relaxed);
  return c;
}

void AgentStore::Expire() {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  ExpireLocked(now);
}

void AgentStore::ExpireLocked(absl::Time now) {
  last_expire_ = now;
  for (auto it = entries_.begin(); it != entries_.end();) {
    // An entry that never had an accepted report ages from its last rejection (or its bucket).
    absl::Time touched = it->second.received.value_or(absl::InfinitePast());
    if (it->second.last_reject.has_value()) touched = std::max(touched, *it->second.last_reject);
    touched = std::max(touched, it->second.history.refilled);
    if (now - touched > options_.forget_after) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace plimsoll::server::agent
