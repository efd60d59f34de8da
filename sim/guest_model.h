// A discrete-time model of one guest's memory, good enough to tell balloon policies apart:
//
//   actual = kernel + unreclaimable + anon + hot cache + cold cache + free
//
// - anon follows the workload phase at alloc_rate; what does not fit is taken from free memory,
//   then by reclaiming cold then hot cache (a direct-reclaim stall). An allocation that falls
//   short stalls (full stall) and proceeds at the pace memory comes: as Linux, there is no OOM
//   kill while reclaim makes progress (cache reclaimed, or a balloon the host deflates). Only
//   after 3 s in a row in which it got less than 1 MiB/s and no page cache was left is the
//   guest at its
//   OOM point: with autodeflate the balloon then deflates above its target; without it the OOM
//   killer halves anon and the workload restarts 30 s later.
// - the page cache has a hot part (a set of size `hot` re-read at hot_rate, uniformly: the hit
//   ratio is resident/hot) and a cold part (streamed pages read once, and hot pages that left the
//   hot set). Misses load pages back, evicting cold pages first; misses of pages that were loaded
//   before are refaults, and each refaulted byte costs 1/disk_rate seconds of stall. A streamed
//   file read in a loop (`loop`) refaults on every pass unless the whole file is cached.
// - the balloon moves towards its target at `speed`; inflating takes free memory, then cold,
//   then hot cache, never anon (with nothing left to take it stops short of the target). Bad
//   balloons: stuck, trickle (4 KiB every 3 s) and churn (the shrinker hands back 97% of what
//   was inflated while a streaming reader refills the cache: the busy no-op of domain.md).
// - stall feeds PSI "some": a cumulative total and avg10, an exponential average over 10 s.
// - major faults (libvirt's major_fault): hot-set misses and refaulted stream reads, only for a
//   guest whose readers map their files (access=mmap); a read() miss is no major fault. Pages
//   the guest's own binaries fault back in are not modelled (the lab's read() guests show a
//   trickle of them: x = 0.00-0.05 while refaulting 1.7-2.5 M pages).
// - disk reads as the host sees them (libvirt's block.<n>.rd.bytes / rd.reqs): every hot-set
//   miss (first reads and refaults) and every streamed byte not served from the cache is read
//   from disk; a hot-set miss is one 4 KiB request (uniform random reads leave readahead nothing
//   to do), a streamed read one kStreamRequestBytes (128 KiB, Linux's default read_ahead_kb)
//   request. They are counted at the host, so every guest has them, whatever its stats do.
// - the balloon driver's pressure counters of a Linux >= 6.12 guest (balloon_pressure=true:
//   /proc/vmstat oom_kill, allocstall and pgscan_direct, sent with the stats through QEMU >= 9.2).
//   OOM kills are the model's kills. Direct scans are the page cache an allocation of anon had
//   to reclaim itself because free memory was gone (RunAnon's Reclaim), counted as scanned
//   (scanned = stolen: the model's cache is clean); what the balloon's inflation reclaims, the
//   cache a streaming reader's or a hot-set miss's new pages replace, are kswapd's background
//   reclaim, not direct: a guest only streaming through its cache scans nothing directly (the
//   lab's: 0 direct scans, 0 stalls). Alloc stalls: one per kStallBytes (128 KiB, the 32 pages
//   a direct-reclaim pass aims to free) of allocation that waited on reclaim, reclaimed
//   synchronously or not satisfied in the step (the shortfall the OOM rule sees). The counters
//   are reported rounded to whole stalls and bytes.
// - reports: libvirt stats and agent reports every stats_period; an agent also reports at once
//   when the stall in a second reaches 15% (a PSI trigger of 150 ms per 1 s window). Reports of
//   a no_stats guest never come, of a stale guest stop, of a nonsense guest are impossible.
// - in-guest reclaim (off unless set_in_guest_reclaim; docs/instruments.md "In-guest reclaim in
//   the model"): the balloon reports free pages, so the guest costs the host its actual size
//   less the free memory it holds (HostRss; host_rss_bytes in FillStats, read at the snapshot as
//   libvirt reads QEMU's RSS on the host); and the agent of an agent guest, once the host names a
//   keep (SetReclaimKeep), reclaims page cache each second by guest_reclaim.h's law, cold then
//   hot (the LRU order of the balloon and of direct reclaim), after the step's workload. What it
//   reclaims becomes free memory, which goes back to the host at once; hot pages it took are
//   refaults when read again, as any evicted hot page.
//
// Not thread-safe; one model per guest per run.
#ifndef PLIMSOLL_SIM_GUEST_MODEL_H_
#define PLIMSOLL_SIM_GUEST_MODEL_H_

#include <cstdint>
#include <limits>
#include <optional>

#include "policy/policy.h"
#include "sim/rng.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

// What happened in the guest during the last Step.
struct StepOutcome {
  double stall = 0;           // fraction of the step some task stalled on memory, [0, 1]
  double refault_bytes = 0;   // evicted file pages read back
  double inflated_bytes = 0;  // balloon inflation (pages handed to the host)
  double deflated_bytes = 0;  // balloon deflation, whoever asked for it
  double disk_read_bytes = 0;  // read from the guest's disks (cache misses), as the host sees
  bool oom_kill = false;
  bool self_deflated = false;  // deflated on OOM (autodeflate)
  bool thrashing = false;      // an allocation could not be satisfied
  bool spike = false;          // the agent sent an early report
  double agent_reclaimed_bytes = 0;  // page cache the agent reclaimed (in-guest reclaim)
};

class GuestModel {
 public:
  explicit GuestModel(const GuestSpec& spec);

  // Advances the guest by `dt` seconds, ending at `now` (seconds since the run started).
  const StepOutcome& Step(double now, double dt);

  // The balloon target the host set.
  void SetTarget(double bytes) { target_ = bytes; }

  // In-guest reclaim (the file comment): the balloon reports free pages and an agent reclaims
  // within the host's keep. Off by default: the guest costs the host its actual size.
  void set_in_guest_reclaim(bool on) { in_guest_reclaim_ = on; }
  bool in_guest_reclaim() const { return in_guest_reclaim_; }
  // The keep the host's reclaim bounds name (used memory is not reclaimed below it); none: the
  // agent does not reclaim. Only an agent guest with in-guest reclaim on acts on it.
  void SetReclaimKeep(std::optional<double> keep) { reclaim_keep_ = keep; }
  std::optional<double> reclaim_keep() const { return reclaim_keep_; }
  // What the guest costs the host (its QEMU's RSS, QEMU's own memory left out): its actual size,
  // less the free memory it holds when its balloon reports free pages.
  double HostRss() const;
  // Page cache the agent reclaimed since the run started.
  double agent_reclaimed_bytes() const { return agent_reclaimed_bytes_; }

  // Fills the stats fields of `view` as plimsolld would see them at `now`: libvirt stats with
  // their age, agent fields only while the agent's last report is younger than `stale_after`.
  // Identity, limits, actual and target are the caller's.
  void FillStats(double now, double stale_after, policy::GuestView* view) const;

  const GuestSpec& spec() const { return spec_; }
  double actual() const { return actual_; }
  double target() const { return target_; }
  double anon() const { return anon_; }
  double hot() const { return hot_; }
  double cold() const { return cold_; }
  double kernel() const { return kernel_; }
  double Free() const;
  const StepOutcome& last() const { return last_; }

  // The model's truth, for the oracle (sim/oracle_policy.h); no policy sees it.
  //
  // The working set at time t: the least balloon size at which the guest neither reclaims nor
  // refaults then. Its hard part: kernel + unreclaimable + the phase's anon + the min-free
  // watermark (taken at max); short of it, allocations fail. Its cache part: the part of the
  // phase's hot set that is read then or later in the run (a set read in bursts stays working
  // set between them), and a looped file when the whole of it fits beside the rest; short of
  // it, the guest refaults. Cold cache (streamed pages, a loop that does not fit) is in neither.
  // The total may exceed max.
  struct WorkingSet {
    double hard = 0;
    double cache = 0;
    double total() const { return hard + cache; }
  };
  WorkingSet WorkingSetAt(double t) const;
  // The least size the balloon must have at `now` so that, deflating at `speed` from a decision
  // up to `lead` seconds later, it is never under a later working set when that set begins:
  // hard = max over t >= now of hard(t) - speed * max(0, min(t, stop) - now - lead), total
  // likewise, and cache = total - hard; `stop` is when the balloon stops moving (stuck or
  // trickling from behaviour_at; never for others), after which it cannot deflate: before it
  // stops, a balloon is left at the most it will need after.
  WorkingSet NeedAhead(double now, double lead) const;
  // False while the balloon does not move at `now`: stuck, or trickling (4 KiB per 3 s). A
  // churning balloon moves: it keeps 3% of what it inflates.
  bool BalloonMoves(double now) const;
  double psi_avg10() const { return psi_avg10_; }
  int64_t oom_kills() const { return oom_kills_; }
  // The balloon driver's cumulative pressure counters as the guest's kernel counts them (the
  // file comment's rule), whether or not its kernel sends them: allocstall, pgscan_direct bytes.
  double alloc_stalls() const { return alloc_stalls_; }
  double direct_scan_bytes() const { return direct_scan_bytes_; }
  // When the allocation under way began (the start of the step in which anon first fell short
  // of the phase's goal); empty while anon is at its goal. An OOM kill ends the allocation.
  std::optional<double> allocation_began() const { return allocation_began_; }
  // Cumulative disk reads since the run started, as libvirt's block stats count them.
  double disk_read_bytes() const { return disk_read_bytes_; }
  double disk_read_requests() const { return disk_read_requests_; }

 private:
  struct LibvirtReport {
    double t = 0;
    double unused = 0, usable = 0, total = 0, disk_caches = 0;
    uint64_t major_fault = 0;
    // The balloon driver's pressure counters (sent only when spec_.balloon_pressure).
    uint64_t oom_kills = 0, alloc_stalls = 0, direct_scan_bytes = 0;
  };
  struct AgentReport {
    double t = 0;
    double anon = 0, unreclaimable = 0, active_file = 0, inactive_file = 0;
    double refaults_per_second = 0;
    double psi_avg10 = 0;
    uint64_t psi_total_us = 0;
    uint64_t balloon_inflate = 0, balloon_deflate = 0, oom_kill = 0;
    double refault_pages_at = 0;  // the refault counter when this report was taken
  };

  const Phase& PhaseAt(double now) const;
  bool Misbehaving(Behaviour b, double now) const {
    return spec_.behaviour == b && now >= spec_.behaviour_at;
  }
  double MinFree() const;
  // Frees up to `bytes` of page cache, cold first; returns what it freed.
  double Reclaim(double bytes);
  void MoveBalloon(double now, double dt, const Phase& phase);
  void RunAnon(double now, double dt, const Phase& phase, double* stall);
  void RunCache(double dt, const Phase& phase, double* stall);
  // Counts a read of `bytes` from disk in requests of `request_bytes`.
  void ReadDisk(double bytes, double request_bytes);
  void Report(double now, bool spike);
  // The agent's reclaim step after the workload's (guest_reclaim.h), on the step's `stall`.
  void RunAgentReclaim(double dt, double stall);

  GuestSpec spec_;
  Rng pace_rng_;   // pace_noise's draws
  Rng drift_rng_;  // read_drift's draws
  double drift_ = 0;  // read_drift's walk: the readers' pace is exp(drift_)
  double kernel_ = 0;
  double actual_ = 0;
  double target_ = 0;
  double anon_ = 0;
  double hot_ = 0;
  double cold_ = 0;
  double streamed_ = 0;     // bytes streamed so far (a looping reader's passes)
  double hot_loaded_ = 0;  // distinct hot bytes ever read (the rest are first reads, not refaults)
  double thrash_seconds_ = 0;
  double restart_at_ = -1;
  double last_trickle_ = -1e9;
  double psi_avg10_ = 0;
  double psi_total_us_ = 0;
  double refault_pages_ = 0;
  double major_faults_ = 0;
  double inflate_pages_ = 0;
  double deflate_pages_ = 0;
  double disk_read_bytes_ = 0;
  double disk_read_requests_ = 0;
  int64_t oom_kills_ = 0;
  double alloc_stalls_ = 0;
  double direct_scan_bytes_ = 0;
  bool was_self_deflating_ = false;
  std::optional<double> allocation_began_;
  StepOutcome last_;
  std::optional<LibvirtReport> libvirt_;
  std::optional<AgentReport> agent_;
  double last_spike_ = -1e9;
  bool in_guest_reclaim_ = false;
  std::optional<double> reclaim_keep_;
  double since_reclaim_step_ = std::numeric_limits<double>::infinity();
  double agent_reclaimed_bytes_ = 0;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_GUEST_MODEL_H_
