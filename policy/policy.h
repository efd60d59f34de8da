// policy/: the pure policies and their shared pieces. No I/O, no clock, no logging, and no
// dependency on server/: the daemon and the simulator (sim/) both drive policies through this seam.
//
// The policy seam: a pure function from a snapshot of the world to balloon
// targets. Policies do no I/O, read no clock and log nothing; everything they
// need is in the Snapshot and everything they want to remember between ticks
// travels in and out through PolicyState (policy_state.h: one typed value per guest,
// owned by the policy). That makes every policy testable by
// a table of literal snapshots (policy/*_test.cc) and replayable in sim/.
#ifndef PLIMSOLL_POLICY_POLICY_H_
#define PLIMSOLL_POLICY_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "policy/guest_history.h"
#include "policy/policy_state.h"

namespace plimsoll::policy {

// What the daemon knows about one guest at the start of a tick (running or paused).
// Sizes are bytes. Optional fields are absent when the guest did not report them
// (never zero-filled).
struct GuestView {
  std::string name;
  std::string uuid;
  int64_t max_bytes = 0;     // balloon ceiling (<memory>)
  int64_t min_bytes = 0;     // floor from config/overrides; policies must not go under it
  int64_t actual_bytes = 0;  // balloon size now (libvirt "actual")
  int64_t target_bytes = 0;  // target we last set (or adopted from actual at start)

  // False when the guest has no balloon driver or never reported stats.
  bool has_stats = false;
  // False when the guest's stats stopped advancing: a guest is never shrunk on stale stats.
  bool stats_fresh = false;
  double stats_age_seconds = 0;
  // How long the host, able to read this guest's stats, has seen them stand still: since they
  // last changed, or since the host last could not read them from the guest (first sight,
  // libvirt lost, a failed stats call, a busy domain's partial record, the domain not running),
  // whichever is later. A guest is blind only by this measure (pagecache_policy.h).
  double stats_still_seconds = 0;

  std::optional<int64_t> unused_bytes;       // MemFree
  std::optional<int64_t> usable_bytes;       // MemAvailable
  std::optional<int64_t> total_bytes;        // MemTotal (libvirt "available")
  std::optional<int64_t> disk_caches_bytes;  // Cached
  std::optional<uint64_t> major_fault;
  std::optional<uint64_t> swap_in;
  std::optional<uint64_t> swap_out;
  // What the balloon driver of a Linux >= 6.12 guest sends beside the stats above (QEMU >= 9.2;
  // plimsolld reads them through QEMU's monitor, server/loop/balloon_pressure_reader.h): the
  // guest's /proc/vmstat oom_kill and allocstall counts, and the memory its allocating tasks
  // scanned (pgscan_direct, in bytes), since guest boot. The agent's view without an agent;
  // absent where QEMU, the guest or the config does not give them. They are read apart from the
  // stats, so they can be older: balloon_pressure_age_seconds says by how much (absent: as old
  // as the stats).
  std::optional<uint64_t> balloon_oom_kills;
  std::optional<uint64_t> balloon_alloc_stalls;
  std::optional<uint64_t> balloon_direct_scan_bytes;
  std::optional<double> balloon_pressure_age_seconds;

  // What the guest costs the host. host_rss_bytes: its QEMU process's resident memory (libvirt's
  // "rss" balloon stat, read on the host). free_page_reporting: whether its balloon device returns
  // the pages the guest frees to the host; where it does, the guest's cost is its RSS, which falls
  // as the guest frees memory, rather than its balloon size. Each absent where not known. plimsolld
  // fills them; pagecache reads them for in-guest reclaim (reclaim_pool.h); the simulator fills
  // them with --in_guest_reclaim (sim/guest_model.h).
  std::optional<int64_t> host_rss_bytes;
  std::optional<bool> free_page_reporting;
  // Whether the agent's reclaimer can reclaim the guest's page cache (it reports itself idle,
  // reclaiming, or stopped by pressure; not off, unable, failed or in a dry run). Absent without
  // a fresh agent report that has a reclaimer.
  std::optional<bool> agent_reclaims;

  // Relative weight when memory is shared out; 1000 by default.
  int64_t shares = 1000;

  // Signals only the in-guest agent (plimsoll-agent) can read; each is absent when the agent did
  // not report it (no agent, old kernel, no PSI). Sizes are bytes from /proc/meminfo.
  std::optional<int64_t> anon_bytes;           // AnonPages
  std::optional<int64_t> unreclaimable_bytes;  // Shmem + SUnreclaim: reclaim cannot free it
  std::optional<int64_t> active_file_bytes;    // Active(file)
  std::optional<int64_t> inactive_file_bytes;  // Inactive(file)
  // workingset_refault_file per second over the agent's last report interval (pages/s).
  std::optional<double> refaults_per_second;
  // /proc/pressure/memory "some": avg10 in percent, and the cumulative stall in microseconds.
  std::optional<double> psi_some_avg10;
  std::optional<uint64_t> psi_some_total_us;
  // /proc/vmstat counters since guest boot: balloon_inflate and balloon_deflate (pages), oom_kill.
  std::optional<uint64_t> balloon_inflate_pages;
  std::optional<uint64_t> balloon_deflate_pages;
  std::optional<uint64_t> oom_kill;
  // Seconds since the agent report the fields above come from (stats_age_seconds when absent).
  std::optional<double> agent_age_seconds;

  // What the host sees of the guest's disks, from libvirt's bulk stats (block.<n>.rd.bytes and
  // block.<n>.rd.reqs, summed over the guest's disks): cumulative since the domain started.
  // QEMU counts them, not the guest, so they exist for guests without the agent or balloon
  // stats, and they are read by the host (no stats_period lag; disk_read_age_seconds). A page-cache
  // refault in the guest is a disk read seen from here: these are an agentless policy's view of
  // refaults. plimsolld fills them from the bulk stats call (server/hypervisor/block_reads.h;
  // absent with drivers that answer no bulk block stats, such as the test driver), and the
  // simulator (sim/guest_model.h) models them. The pagecache policy reads disk_read_bytes through
  // pressure_profile.h when its profile_ratio is on.
  std::optional<uint64_t> disk_read_bytes;
  std::optional<uint64_t> disk_read_requests;
  // How long before the snapshot the disk reads were read (seconds; absent: at it). plimsolld
  // reads them at most every block_stats_interval, and keeps the last between reads.
  std::optional<double> disk_read_age_seconds;

  // What the world did to the guest up to now (guest_history.h): landing, report freshness,
  // counter rates, balloon progress. Derived once per snapshot by its maker (plimsolld's collect
  // step, the simulator) through history_deriver.h; absent when the maker derived none.
  std::optional<GuestHistory> history;
};

// The host side of the snapshot.
struct HostView {
  int64_t mem_total_bytes = 0;
  int64_t mem_free_bytes = 0;
  int64_t mem_available_bytes = 0;
  int64_t buffers_bytes = 0;
  int64_t cached_bytes = 0;
  int64_t host_reserve_bytes = 0;
  // Memory all guests may use together: min(MemTotal - reserve, configured cap).
  int64_t guest_budget_bytes = 0;
  // plimsolld sends the agents reclaim bounds (agent.reclaim_bounds): a guest whose agent
  // reclaims and whose balloon reports free pages costs the host its RSS (reclaim_pool.h).
  bool in_guest_reclaim = false;
  std::optional<double> psi_some_avg10;
  std::optional<double> psi_full_avg10;
};

struct Snapshot {
  absl::Time now;
  int64_t tick = 0;
  HostView host;
  std::vector<GuestView> guests;
};

// One guest's decision. target_bytes == the guest's target_bytes means hold.
struct GuestDecision {
  std::string uuid;
  int64_t target_bytes = 0;
  // Human-readable, key=value numbers: why this target ("host_free_pct=12.0 used=..").
  std::string reason;
  // How the guest's balloon behaves, for the daemon to export: "ok", "stuck" (actual does not
  // follow the target), "churning" (the guest deflates the balloon while we inflate it) or
  // "self_deflated" (the guest took memory back on OOM). Empty from policies that do not track it.
  std::string state;
  // Non-empty when the policy saw the guest in distress on this decision, saying how
  // ("pressure x=1.40", "oom_kill", "self_deflated"): pressure over its target, an OOM kill or a
  // self-deflation. The daemon ends an operator's reclaim hold on such a guest at once. Empty
  // from policies that do not read pressure (mom, proxmox, static).
  std::string distress;
  // The policy's estimates, for the daemon to publish (0 when it has none): what the guest must
  // keep (the floor) and what it uses (the working set). The Reclaim planner takes no more than
  // what lies above the larger of the two.
  int64_t floor_bytes = 0;
  int64_t working_set_bytes = 0;
};

struct Decisions {
  std::vector<GuestDecision> guests;  // one per guest in the snapshot, same order
  PolicyState next_state;
  // One line about the host-level situation ("host_free=.. budget=.. mode=shrink").
  std::string summary;
  // The reserve for the bursts of pooled guests (pagecache's reclaim_pool.h), 0 without: their
  // floors keep no burst room, so the line commits it. The budget keeps it apart only while the
  // pool covers (otherwise it counts balloon sizes, which hold that room).
  int64_t pool_reserve_bytes = 0;
  // The pool itself, for the daemon to publish (0 / false without members): the guests costed
  // by RSS, what they lend (balloon sizes above their cost) and whether that covers the reserve.
  int pool_members = 0;
  int64_t pool_lent_bytes = 0;
  bool pool_covers = false;
};

// Thread-compatible; implementations are immutable after construction, so one
// instance may be shared by threads.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual absl::string_view name() const = 0;
  // Pure: same inputs, same outputs. Must return one decision per guest, in order. The state
  // comes by value: a caller that keeps its own passes a copy; the daemon moves its state in
  // (10,000 guests' memory is not copied each tick) and takes Decisions::next_state back. A
  // policy may update it in place and return it as next_state.
  virtual Decisions Decide(const Snapshot& snapshot, PolicyState state) const = 0;
};

// Builds a policy by name ("mom", "static"), or "pagecache" with parameters changed
// ("pagecache:profile_ratio=0", docs/policy.md). INVALID_ARGUMENT names the unknown policy and
// lists PolicyNames().
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(absl::string_view name);

// The names MakePolicy accepts, for help texts and errors.
std::vector<std::string> PolicyNames();

// For a name an earlier plimsolld accepted and this one calls otherwise, the name it is now:
// "pagecache_law" is "pagecache", "pagecache_law:k=v" is "pagecache:k=v". nullopt for any other
// name. MakePolicy does not take these names: a caller that reads names written for an earlier
// plimsolld (a config file, a stored host policy) translates them and tells the operator.
std::optional<std::string> RenamedPolicy(absl::string_view name);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_POLICY_H_
