#include "sim/guest_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "policy/guest_safety.h"
#include "sim/guest_reclaim.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

constexpr double kPage = 4096;
constexpr double kOomGraceSeconds = 3;     // thrashing this long ends in an OOM kill
// An allocation getting less than this is not progressing (balloon_progress.h's "stuck" rate).
constexpr double kProgressRate = 1024 * 1024;  // bytes/s
constexpr double kRestartSeconds = 30;     // a killed workload comes back after this
constexpr double kReclaimRate = 2 * kGib;  // bytes/s direct reclaim frees clean cache
constexpr double kSpikeStall = 0.15;       // PSI trigger: 150 ms stalled in a 1 s window
constexpr double kSpikeGapSeconds = 1;     // at most one early report per second
constexpr double kChurnGiveBack = 0.97;    // share of an inflation the shrinker hands back
constexpr double kRandomRequestBytes = 4096;        // one hot-set miss, one page
constexpr double kStreamRequestBytes = 128 * 1024;  // Linux's default read_ahead_kb
// read_drift's walk (scenario.h): a 2.5 s correlation time gives 5 s readings a lag-one
// correlation of 0.31 and 0.76 of the walk's standard deviation; a start at -0.75, a first 5 s
// reading at about 0.68 of the steady pace, as the lab's streaming guests read.
constexpr double kReadDriftSeconds = 2.5;
constexpr double kReadDriftStart = -0.75;
// An alloc stall per this much allocation that waited on reclaim: SWAP_CLUSTER_MAX (32) pages,
// what one direct-reclaim pass aims to free.
constexpr double kStallBytes = 32 * kPage;

}  // namespace

namespace {

// FNV-1a: a guest's noise stream depends on its name only.
uint64_t NameSeed(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

GuestModel::GuestModel(const GuestSpec& spec)
    : spec_(spec), pace_rng_(NameSeed(spec.name)), drift_rng_(NameSeed(spec.name) ^ 0xD1F7D1F7D1F7ULL) {
  if (spec.read_drift > 0) drift_ = kReadDriftStart;
  kernel_ = spec.kernel.value_or(48 * kMib + 0.02 * spec.max);
  actual_ = spec.start.value_or(spec.max);
  target_ = actual_;
  const Phase& phase = spec.phases.front();
  const double usable = std::max(0.0, actual_ - kernel_ - spec.unreclaimable - MinFree());
  anon_ = std::min(phase.anon, usable);
  // A long-running guest: its page cache fills what anon leaves, hot set first; a scenario's
  // cache= (a freshly booted guest) caps it, and the rest is free.
  const double cache = std::min(usable - anon_, spec.cache.value_or(usable));
  hot_ = std::min(phase.hot, cache);
  hot_loaded_ = hot_;
  cold_ = std::max(0.0, cache - hot_);
}

double GuestModel::MinFree() const {
  return spec_.min_free.value_or(std::max(16 * kMib, 0.005 * actual_));
}

double GuestModel::Free() const {
  return actual_ - kernel_ - spec_.unreclaimable - anon_ - hot_ - cold_;
}

double GuestModel::HostRss() const {
  // Free page reporting hands every free page back (the 2 MiB blocks it reports, and the delay
  // before it does, are not modelled); without it the guest holds all it was given.
  return in_guest_reclaim_ ? actual_ - std::max(0.0, Free()) : actual_;
}

const Phase& GuestModel::PhaseAt(double now) const {
  const Phase* current = &spec_.phases.front();
  for (const Phase& p : spec_.phases) {
    if (p.at <= now) current = &p;
  }
  return *current;
}

double GuestModel::Reclaim(double bytes) {
  if (bytes <= 0) return 0;
  const double from_cold = std::min(bytes, cold_);
  cold_ -= from_cold;
  const double from_hot = std::min(bytes - from_cold, hot_);
  hot_ -= from_hot;
  return from_cold + from_hot;
}

void GuestModel::MoveBalloon(double now, double dt, const Phase& phase) {
  if (Misbehaving(Behaviour::kStuck, now)) return;
  double step = spec_.speed * dt;
  if (Misbehaving(Behaviour::kTrickle, now)) {
    if (now - last_trickle_ < 3) return;
    last_trickle_ = now;
    step = kPage;
  }
  if (target_ < actual_) {
    const double want = std::min(step, actual_ - target_);
    double available = std::max(0.0, Free() - MinFree());
    double reclaimed = 0;
    if (available < want) reclaimed = Reclaim(want - available);
    available += reclaimed;
    const double inflated = std::min(want, available);
    double given_back = 0;
    if (Misbehaving(Behaviour::kChurn, now) && reclaimed > 0 && phase.stream_rate > 0) {
      given_back = kChurnGiveBack * inflated;
    }
    actual_ -= inflated - given_back;
    inflate_pages_ += inflated / kPage;
    deflate_pages_ += given_back / kPage;
    last_.inflated_bytes += inflated;
    last_.deflated_bytes += given_back;
  } else if (target_ > actual_) {
    const double deflated = std::min(step, target_ - actual_);
    actual_ += deflated;
    deflate_pages_ += deflated / kPage;
    last_.deflated_bytes += deflated;
  }
}

void GuestModel::RunAnon(double now, double dt, const Phase& phase, double* stall) {
  double goal = phase.anon;
  if (now < restart_at_) goal = std::min(goal, anon_);
  if (goal <= anon_) {
    anon_ = goal;
    thrash_seconds_ = 0;
    was_self_deflating_ = false;
    allocation_began_.reset();
    return;
  }
  if (!allocation_began_.has_value()) allocation_began_ = now - dt;
  const double need = std::min(spec_.alloc_rate * dt, goal - anon_);
  double available = std::max(0.0, Free() - MinFree());
  double reclaimed = 0;
  if (available < need) {
    reclaimed = Reclaim(need - available);
    *stall += reclaimed / kReclaimRate;
    available += reclaimed;
  }
  const double got = std::min(need, available);
  anon_ += got;
  // The balloon driver's pressure counters (guest_model.h): the cache this allocation reclaimed
  // itself is its direct scan; it and the part not satisfied waited on reclaim.
  direct_scan_bytes_ += reclaimed;
  alloc_stalls_ += (reclaimed + std::max(0.0, need - got)) / kStallBytes;
  if (got + 1 >= need) {
    thrash_seconds_ = 0;
    was_self_deflating_ = false;
    return;
  }
  last_.thrashing = true;
  *stall = 1;
  // Linux's rule: no OOM while reclaim makes progress. An allocation that got memory this step
  // (cache reclaimed, or a balloon the host deflated) proceeds at that pace and stalls; the
  // OOM point is reached only after kOomGraceSeconds in a row in which it got less than
  // kProgressRate and nothing reclaimable was left (Reclaim above took all the cache before it
  // fell short). A page now and then is no progress: Linux's allocator gives up after a few
  // retries without reclaim progress, well within a second, and a balloon that trickles a page
  // every 3 s would otherwise keep a guest thrashing and never killed.
  const bool no_progress = got < kProgressRate * dt && hot_ + cold_ < kPage;
  if (no_progress) {
    thrash_seconds_ += dt;
  } else if (!was_self_deflating_) {
    thrash_seconds_ = 0;
    return;
  }
  // The guest reaches the OOM point after kOomGraceSeconds without progress. With autodeflate
  // the balloon driver's OOM notifier gives memory back there instead of a kill (virtio-balloon
  // deflates from the OOM notifier, so never before reclaim has failed: calibration, the lab's
  // guests stalled 5-11 s on an allocation the balloon stood in the way of), and keeps giving
  // while the episode lasts.
  const bool at_oom = thrash_seconds_ >= kOomGraceSeconds || was_self_deflating_;
  if (!at_oom) return;
  if (spec_.autodeflate && actual_ < spec_.max && !Misbehaving(Behaviour::kStuck, now)) {
    const double deflated = std::min(need - got, spec_.max - actual_);
    actual_ += deflated;
    deflate_pages_ += deflated / kPage;
    last_.deflated_bytes += deflated;
    anon_ += deflated;
    if (!was_self_deflating_) last_.self_deflated = true;
    was_self_deflating_ = true;
    thrash_seconds_ = 0;
    return;
  }
  was_self_deflating_ = false;
  if (thrash_seconds_ >= kOomGraceSeconds) {
    last_.oom_kill = true;
    ++oom_kills_;
    anon_ *= 0.5;
    restart_at_ = now + kRestartSeconds;
    thrash_seconds_ = 0;
    allocation_began_.reset();
  }
}

void GuestModel::ReadDisk(double bytes, double request_bytes) {
  if (bytes <= 0) return;
  disk_read_bytes_ += bytes;
  disk_read_requests_ += bytes / request_bytes;
  last_.disk_read_bytes += bytes;
}

void GuestModel::RunCache(double dt, const Phase& phase, double* stall) {
  // The hot set shrank: what left it is cold now.
  if (hot_ > phase.hot) {
    cold_ += hot_ - phase.hot;
    hot_ = phase.hot;
  }
  hot_loaded_ = std::min(hot_loaded_, phase.hot);
  // What the readers would read from disk this step at their own pace: hot-set misses
  // (uniform reads: the miss ratio is the part of the set not resident) and streamed bytes
  // (a first read, or a pass over a loop the cache does not hold).
  const double missing = phase.hot - hot_;
  double misses = phase.hot > 0 && phase.hot_rate > 0 && missing > 0
                      ? phase.hot_rate * dt * (missing / phase.hot)
                      : 0;
  double streamed = phase.stream_rate * dt;
  const bool stream_refaults = phase.loop > 0 && streamed_ >= phase.loop && cold_ < phase.loop;
  const bool stream_hits = phase.loop > 0 && streamed_ >= phase.loop && !stream_refaults;
  // The guest's disk reads at most disk_rate: readers that miss more wait for it, and so read
  // less (calibration: a squeezed real guest's hot reader refaults at its disk's pace, however
  // fast it read from cache).
  const double from_disk = misses + (stream_hits ? 0 : streamed);
  if (from_disk > spec_.disk_rate * dt) {
    const double scale = spec_.disk_rate * dt / from_disk;
    misses *= scale;
    if (!stream_hits) streamed *= scale;
  }
  if (spec_.pace_noise > 0) {
    // Uniform on [1 - sqrt(3) sd, 1 + sqrt(3) sd]: mean 1, standard deviation pace_noise.
    const double pace = 1 + spec_.pace_noise * std::sqrt(3.0) * (2 * pace_rng_.Uniform() - 1);
    misses *= pace;
    if (!stream_hits) streamed *= pace;
  }
  if (spec_.read_drift > 0) {
    const double pace = std::exp(drift_);
    misses *= pace;
    if (!stream_hits) streamed *= pace;
    // AR(1) with stationary standard deviation read_drift; the step's draw is uniform with
    // unit variance, as pace_noise's.
    const double keep = std::exp(-dt / kReadDriftSeconds);
    drift_ = keep * drift_ +
             std::sqrt(1 - keep * keep) * spec_.read_drift * std::sqrt(3.0) * (2 * drift_rng_.Uniform() - 1);
  }
  if (misses > 0) {
    const double never_loaded = std::max(0.0, phase.hot - hot_loaded_);
    const double first_reads = std::min(misses, misses * never_loaded / missing);
    const double refaults = misses - first_reads;
    hot_loaded_ = std::min(phase.hot, hot_loaded_ + first_reads);
    // Bring the pages in: free memory first, then cold pages make room. Past that they only
    // replace other hot pages (the hot set does not fit).
    const double wanted = std::min(misses, missing);
    double room = std::max(0.0, Free() - MinFree());
    if (room < wanted) {
      const double from_cold = std::min(wanted - room, cold_);
      cold_ -= from_cold;
      room += from_cold;
    }
    hot_ += std::min(wanted, room);
    refault_pages_ += refaults / kPage;
    if (spec_.access == FileAccess::kMmap) major_faults_ += misses / kPage;
    ReadDisk(misses, kRandomRequestBytes);
    last_.refault_bytes += refaults;
    *stall += spec_.refault_stall * refaults / spec_.disk_rate;
  }
  if (streamed > 0) {
    // Another pass over a file read before: all hits when the whole file is cached, else
    // (LRU against a loop larger than the cache) every page was evicted before its turn.
    if (stream_hits) return;
    if (stream_refaults) {
      refault_pages_ += streamed / kPage;
      if (spec_.access == FileAccess::kMmap) major_faults_ += streamed / kPage;
      last_.refault_bytes += streamed;
      *stall += spec_.refault_stall * streamed / spec_.disk_rate;
    }
    ReadDisk(streamed, kStreamRequestBytes);
    streamed_ += streamed;
    // Streamed pages take free memory; past that they replace older cold pages.
    cold_ += std::min(streamed, std::max(0.0, Free() - MinFree()));
  }
}

void GuestModel::Report(double now, bool spike) {
  if (spec_.behaviour == Behaviour::kNoStats) return;
  if (Misbehaving(Behaviour::kStale, now)) return;
  const bool nonsense = Misbehaving(Behaviour::kNonsense, now);
  const double cache = hot_ + cold_;
  if (!libvirt_.has_value() || now - libvirt_->t >= spec_.stats_period - 1e-9) {
    LibvirtReport r;
    r.t = now;
    const double free = std::max(0.0, Free());
    const double low_watermark = 1.25 * MinFree();
    r.unused = free;
    r.usable = std::max(0.0, free + cache - std::min(cache / 2, low_watermark));
    r.total = (spec_.autodeflate ? spec_.max : actual_) - kernel_ / 2;
    r.disk_caches = cache;
    r.major_fault = static_cast<uint64_t>(major_faults_);
    r.oom_kills = static_cast<uint64_t>(oom_kills_);
    r.alloc_stalls = static_cast<uint64_t>(std::llround(alloc_stalls_));
    r.direct_scan_bytes = static_cast<uint64_t>(std::llround(direct_scan_bytes_));
    if (nonsense) {
      r.unused = 3 * spec_.max;
      r.usable = 2 * spec_.max;
      r.disk_caches = 5 * spec_.max;
    }
    libvirt_ = r;
  }
  if (!spec_.agent) return;
  if (!agent_.has_value() || now - agent_->t >= spec_.stats_period - 1e-9 || spike) {
    AgentReport r;
    r.t = now;
    r.anon = anon_;
    r.unreclaimable = spec_.unreclaimable;
    r.active_file = hot_;
    r.inactive_file = cold_;
    r.psi_avg10 = psi_avg10_;
    r.psi_total_us = static_cast<uint64_t>(psi_total_us_);
    r.balloon_inflate = static_cast<uint64_t>(inflate_pages_);
    r.balloon_deflate = static_cast<uint64_t>(deflate_pages_);
    r.oom_kill = static_cast<uint64_t>(oom_kills_);
    r.refault_pages_at = refault_pages_;
    const double since = agent_.has_value() ? now - agent_->t : 0;
    r.refaults_per_second =
        agent_.has_value() && since > 0 ? (refault_pages_ - agent_->refault_pages_at) / since : 0;
    if (nonsense) {
      r.anon = 4 * spec_.max;
      r.psi_avg10 = 250;
      r.refaults_per_second = -5;
    }
    agent_ = r;
  }
}

void GuestModel::RunAgentReclaim(double dt, double stall) {
  since_reclaim_step_ += dt;
  if (!spec_.agent || !reclaim_keep_.has_value()) return;
  GuestReclaimSituation s;
  s.keep = *reclaim_keep_;
  s.used = actual_ - std::max(0.0, Free());
  s.file = hot_ + cold_;
  s.since_step = since_reclaim_step_;
  s.psi_pct = std::max(psi_avg10_, 100 * stall);
  s.refault_bytes_per_second = dt > 0 ? last_.refault_bytes / dt : 0;
  const double bytes = GuestReclaimBytes(s);
  if (bytes <= 0) return;
  since_reclaim_step_ = 0;
  // memory.reclaim takes the inactive file LRU first: the model's cold cache, then hot.
  const double freed = Reclaim(bytes);
  last_.agent_reclaimed_bytes += freed;
  agent_reclaimed_bytes_ += freed;
}

const StepOutcome& GuestModel::Step(double now, double dt) {
  last_ = StepOutcome();
  const Phase& phase = PhaseAt(now);
  double stall = 0;
  MoveBalloon(now, dt, phase);
  RunAnon(now, dt, phase, &stall);
  RunCache(dt, phase, &stall);
  // Rounding must never leave negative free memory: take it from the cache.
  if (Free() < 0) Reclaim(-Free());
  stall = std::clamp(stall, 0.0, 1.0);
  last_.stall = stall;
  psi_total_us_ += stall * dt * 1e6;
  const double decay = std::exp(-dt / 10);
  psi_avg10_ = psi_avg10_ * decay + 100 * stall * (1 - decay);
  if (in_guest_reclaim_) RunAgentReclaim(dt, stall);
  const bool spike = spec_.agent && stall >= kSpikeStall && now - last_spike_ >= kSpikeGapSeconds &&
                     spec_.behaviour != Behaviour::kNoStats && !Misbehaving(Behaviour::kStale, now);
  if (spike) last_spike_ = now;
  last_.spike = spike;
  Report(now, spike);
  return last_;
}

GuestModel::WorkingSet GuestModel::WorkingSetAt(double t) const {
  size_t k = 0;
  for (size_t i = 0; i < spec_.phases.size(); ++i) {
    if (spec_.phases[i].at <= t) k = i;
  }
  const Phase& phase = spec_.phases[k];
  WorkingSet ws;
  ws.hard = kernel_ + spec_.unreclaimable + phase.anon +
            spec_.min_free.value_or(std::max(16 * kMib, 0.005 * spec_.max));
  // The part of this phase's hot set some phase from this one on reads.
  for (size_t j = k; j < spec_.phases.size(); ++j) {
    if (spec_.phases[j].hot_rate > 0) {
      ws.cache = std::max(ws.cache, std::min(phase.hot, spec_.phases[j].hot));
    }
  }
  if (phase.loop > 0 && phase.stream_rate > 0 && ws.total() + phase.loop <= spec_.max) {
    ws.cache += phase.loop;
  }
  return ws;
}

GuestModel::WorkingSet GuestModel::NeedAhead(double now, double lead) const {
  const WorkingSet current = WorkingSetAt(now);
  double hard = current.hard;
  double total = current.total();
  const bool stops = spec_.behaviour == Behaviour::kStuck || spec_.behaviour == Behaviour::kTrickle;
  const double stop = stops ? spec_.behaviour_at : std::numeric_limits<double>::infinity();
  for (const Phase& p : spec_.phases) {
    if (p.at <= now) continue;
    const WorkingSet later = WorkingSetAt(p.at);
    const double travel = spec_.speed * std::max(0.0, std::min(p.at, stop) - now - lead);
    hard = std::max(hard, later.hard - travel);
    total = std::max(total, later.total() - travel);
  }
  WorkingSet need;
  need.hard = hard;
  need.cache = std::max(0.0, total - hard);
  return need;
}

bool GuestModel::BalloonMoves(double now) const {
  return !Misbehaving(Behaviour::kStuck, now) && !Misbehaving(Behaviour::kTrickle, now);
}

void GuestModel::FillStats(double now, double stale_after, policy::GuestView* view) const {
  // Block stats come from QEMU, read when the snapshot is taken: no report to wait for.
  view->disk_read_bytes = static_cast<uint64_t>(disk_read_bytes_);
  view->disk_read_requests = static_cast<uint64_t>(disk_read_requests_);
  if (in_guest_reclaim_) {
    // QEMU's RSS is read on the host, when the snapshot is taken; the balloon device's free
    // page reporting is the host's own configuration.
    view->free_page_reporting = true;
    view->host_rss_bytes = static_cast<int64_t>(HostRss());
  }
  if (!libvirt_.has_value()) {
    view->has_stats = false;
    view->stats_fresh = false;
    view->stats_age_seconds = now;
    view->stats_still_seconds = now;  // the model's host always reads the guest
    return;
  }
  const LibvirtReport& l = *libvirt_;
  view->has_stats = true;
  view->stats_age_seconds = now - l.t;
  view->stats_still_seconds = view->stats_age_seconds;
  view->stats_fresh = policy::StatsFresh(view->stats_age_seconds, stale_after);
  view->unused_bytes = static_cast<int64_t>(l.unused);
  view->usable_bytes = static_cast<int64_t>(l.usable);
  view->total_bytes = static_cast<int64_t>(l.total);
  view->disk_caches_bytes = static_cast<int64_t>(l.disk_caches);
  view->major_fault = l.major_fault;
  view->swap_in = 0;
  view->swap_out = 0;
  if (spec_.balloon_pressure) {
    // They travel with the balloon's stats: as old as the rest of the libvirt report.
    view->balloon_oom_kills = l.oom_kills;
    view->balloon_alloc_stalls = l.alloc_stalls;
    view->balloon_direct_scan_bytes = l.direct_scan_bytes;
  }
  if (!agent_.has_value() || !policy::StatsFresh(now - agent_->t, stale_after)) return;
  const AgentReport& a = *agent_;
  view->anon_bytes = static_cast<int64_t>(a.anon);
  view->unreclaimable_bytes = static_cast<int64_t>(a.unreclaimable);
  view->active_file_bytes = static_cast<int64_t>(a.active_file);
  view->inactive_file_bytes = static_cast<int64_t>(a.inactive_file);
  view->refaults_per_second = a.refaults_per_second;
  view->psi_some_avg10 = a.psi_avg10;
  view->psi_some_total_us = a.psi_total_us;
  view->balloon_inflate_pages = a.balloon_inflate;
  view->balloon_deflate_pages = a.balloon_deflate;
  view->oom_kill = a.oom_kill;
  view->agent_age_seconds = now - a.t;
  // The agent's reclaimer reports itself with every report: able to reclaim (idle, reclaiming
  // or stopped by pressure) whenever in-guest reclaim is on.
  if (in_guest_reclaim_) view->agent_reclaims = true;
}

}  // namespace plimsoll::sim
