// server/hypervisor/: the libvirt seam (this interface, LibvirtHypervisor, and in testing/ the one
// fake). The only folder that includes libvirt; it knows nothing of policies, the loop or the API.
//
// The hypervisor seam. Only libvirt_hypervisor.cc includes <libvirt/libvirt.h> (and, in tests,
// testing/test_driver_control.cc); everything else sees this interface, and unit tests use
// FakeHypervisor.
// Sizes are bytes (libvirt's KiB are converted at the boundary).
#ifndef PLIMSOLL_SERVER_HYPERVISOR_HYPERVISOR_H_
#define PLIMSOLL_SERVER_HYPERVISOR_HYPERVISOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace plimsoll::hypervisor {

enum class DomainRunState { kRunning, kPaused, kShutoff, kCrashed, kOther };

// What a guest's balloon driver counts beyond libvirt's memory stats, from Linux 6.12 on: the
// guest's /proc/vmstat oom_kill and allocstall (entries into direct reclaim, all zones) as counts,
// and pgscan_direct, pgsteal_direct (memory scanned and reclaimed by allocating tasks),
// pgscan_kswapd and pgsteal_kswapd (the same in the background) in bytes. Since the guest booted. QEMU >= 9.2 keeps
// them in the balloon's guest-stats; libvirt's memory stats do not carry them, so they are read
// through QEMU's monitor (Hypervisor::ReadBalloonPressure). Absent counters were not reported:
// QEMU before 9.2 does not know them, a guest kernel before 6.12 does not send them.
struct BalloonPressure {
  std::optional<uint64_t> oom_kills;
  std::optional<uint64_t> alloc_stalls;
  std::optional<uint64_t> direct_scans;
  std::optional<uint64_t> direct_reclaims;
  std::optional<uint64_t> async_scans;
  std::optional<uint64_t> async_reclaims;
  // QEMU's last-update: when the guest last sent its stats (unix seconds); absent or 0: never.
  std::optional<int64_t> last_update;

  // Whether any counter was reported.
  bool any() const {
    return oom_kills || alloc_stalls || direct_scans || direct_reclaims || async_scans || async_reclaims;
  }
};

// Identity and limits of one active domain.
struct DomainInfo {
  std::string name;
  std::string uuid;  // canonical lowercase 36-char form
  DomainRunState state = DomainRunState::kOther;
  int64_t max_bytes = 0;      // <memory>: the balloon ceiling
  int64_t current_bytes = 0;  // live balloon size as libvirt knows it
  // Whether the balloon device returns the pages the guest frees to the host (free page
  // reporting): then what the guest costs the host is its QEMU's RSS, which falls as the guest
  // frees memory, not its balloon size. From the live XML (balloon_device_xml.h), read once per
  // domain start, a bounded number of domains per listing (balloon_device_reads.h). Absent: not
  // known (the XML was not read yet, its read failed, or it was not understood), never a guess.
  std::optional<bool> free_page_reporting;
};

// virtio-balloon stats as libvirt reports them. Absent fields were not reported.
struct BalloonStats {
  std::optional<int64_t> actual_bytes;
  std::optional<int64_t> unused_bytes;       // guest MemFree
  std::optional<int64_t> usable_bytes;       // guest MemAvailable
  std::optional<int64_t> available_bytes;    // guest MemTotal (misleading libvirt name)
  std::optional<int64_t> disk_caches_bytes;  // guest Cached
  std::optional<int64_t> rss_bytes;          // QEMU RSS on the host
  // swap_in/swap_out are KiB and the faults are counts, as libvirt reports them.
  std::optional<uint64_t> swap_in;
  std::optional<uint64_t> swap_out;
  std::optional<uint64_t> major_fault;
  std::optional<uint64_t> minor_fault;
  // Guest's timestamp of its last stats update (unix seconds); 0/absent = never.
  std::optional<int64_t> last_update;
  // Not balloon stats but read in the same bulk call: what QEMU saw the guest read from its
  // disks since the domain started, summed over its disks (block_reads.h). Absent where the
  // driver answers no bulk call with block stats (the test driver) or the guest has no disk.
  std::optional<uint64_t> disk_read_bytes;
  std::optional<uint64_t> disk_read_requests;
  // Not in libvirt's stats either: the balloon driver's pressure counters, where they were read
  // (the control loop's balloon_pressure_reader.h fills them after the survey).
  BalloonPressure pressure;
};

// A domain's virtio vsock device as its live XML describes it (docs/agent.md, "vsock"):
// <vsock model='virtio'><cid auto='no' address='N'/></vsock>. With auto='yes' the live XML
// names the CID libvirt picked. Guests' CIDs are >= 3 (0-2 are reserved; 2 is the host).
struct VsockDevice {
  bool found = false;  // a <vsock> element exists
  uint32_t cid = 0;    // its guest CID; 0 when none is usable, with `problem` saying why
  std::string problem;
};

// A domain's host-guest agent channels as its live XML describes them: the virtio-serial
// channel (docs/agent.md, "virtio-serial") and the vsock device, which is read from the same
// XML so that one read serves both.
struct AgentChannelInfo {
  // A <channel> whose <target type='virtio' name=NAME/> exists.
  bool found = false;
  // Its host end, when usable: a <channel type='unix'> with <source mode='bind' path=.../>
  // (QEMU listens there; plimsolld connects). Empty otherwise, with `problem` saying why.
  std::string socket_path;
  std::string problem;
  // A <controller type='virtio-serial'> exists, so a channel can be hot-plugged (the controller
  // itself cannot be).
  bool has_virtio_serial_controller = false;
  // The domain's vsock device, whatever `name` was asked for.
  VsockDevice vsock;
};

// One look at the host's domains, as the control loop takes it every tick.
struct DomainSurvey {
  std::vector<DomainInfo> domains;
  // Balloon stats by DomainInfo::uuid; a domain without stats is missing.
  absl::flat_hash_map<std::string, BalloonStats> stats;
  // Not OK when the domains were listed but their stats could not be read: `stats` is then
  // empty, and the loop judges every guest's stats as missing this tick.
  absl::Status stats_status;
  // Whether `stats` carry this call's disk reads (BalloonStats::disk_read_*): then a record
  // without them is a guest without any now. False when the call was asked not to read them
  // (SurveyDomains' with_block_stats): the last ones read still stand.
  bool block_stats_read = true;
};

// Lifecycle and balloon events, delivered on the hypervisor's event thread.
struct DomainEvent {
  enum class Kind { kStarted, kStopped, kCrashed, kBalloonChange, kOther };
  Kind kind = Kind::kOther;
  std::string uuid;
  std::string name;
  int64_t balloon_bytes = 0;  // kBalloonChange only
};

// Thread-safe: the control loop calls it while the event thread delivers events.
class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  // Opens (or reopens after loss) the connection. Idempotent when connected.
  virtual absl::Status Connect() = 0;
  virtual bool IsConnected() const = 0;

  // Active domains (running or paused). UNAVAILABLE when the connection is lost.
  virtual absl::StatusOr<std::vector<DomainInfo>> ListActiveDomains() = 0;

  // Balloon stats for the given domains, keyed by uuid. Uses the bulk call where
  // the driver fills it and per-domain calls where it does not. A domain that
  // vanished meanwhile is simply missing from the result.
  virtual absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) = 0;

  // Every active domain and the balloon stats of each (what one tick reads). UNAVAILABLE when
  // the connection is lost. Not pure: the default lists the domains, then reads their stats
  // (ListActiveDomains + GetBalloonStats); LibvirtHypervisor answers with one bulk call where
  // the driver fills it. With `with_block_stats` false the call may leave
  // the guests' disk reads out, which costs QEMU a block-stats query per domain (+1.3 ms a
  // domain idle, +12.5 ms busy on TCG: docs/benchmarks.md "The block group's cost"); the
  // survey's block_stats_read says whether it did. The default reads what GetBalloonStats reads.
  virtual absl::StatusOr<DomainSurvey> SurveyDomains(bool with_block_stats);

  // Switches on guest stats polling (virDomainSetMemoryStatsPeriod, LIVE).
  virtual absl::Status EnableStats(const std::string& uuid, int period_seconds) = 0;

  // Sets the live balloon target (virDomainSetMemoryFlags, AFFECT_LIVE). May take as long as
  // the domain's other jobs make it wait (libvirt's job wait is 30 s; a hung QEMU monitor, for
  // ever): the control loop calls it from its worker pool, never from its own thread.
  virtual absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) = 0;

  // The domain's active long-running libvirt job (a migration, save, dump, snapshot: what
  // virDomainGetJobInfo reports), as a short description, or "" when there is none. A balloon
  // call on such a domain would wait for the job. Not pure: implementations without jobs
  // inherit UNIMPLEMENTED, which callers treat as "no job known".
  virtual absl::StatusOr<std::string> ActiveJob(const std::string& uuid);

  // Registers the single event sink (replacing any previous one); nullptr
  // removes it. Events may arrive on another thread; the callback must be quick
  // and thread-safe. When this returns, the previous callback is not running on
  // another thread and will not be called again, so what it captured may be
  // destroyed: the daemon clears its callback this way before it destroys the
  // loop the callback wakes, while events still arrive.
  virtual void SetEventCallback(std::function<void(const DomainEvent&)> callback) = 0;

  // The domain's agent channel named `name` and its vsock device, in its live XML. NOT_FOUND when there is no such
  // domain. Not pure: implementations that have no channels (benchmarks, test doubles of other
  // calls) inherit UNIMPLEMENTED, which the virtio-serial connector treats as "no channel support".
  virtual absl::StatusOr<AgentChannelInfo> GetAgentChannel(const std::string& uuid, const std::string& name);

  // Hot-plugs a unix-socket virtio-serial channel named `name` whose host socket QEMU creates
  // at `socket_path` (virDomainAttachDeviceFlags, AFFECT_LIVE only: the persistent definition
  // belongs to whoever manages the domain). FAILED_PRECONDITION when the domain has no
  // virtio-serial controller (libvirt refuses to hot-plug one). Default: UNIMPLEMENTED.
  virtual absl::Status AttachAgentChannel(const std::string& uuid, const std::string& name,
                                          const std::string& socket_path);

  // The domain's balloon pressure counters (BalloonPressure), read through QEMU's monitor
  // (virDomainQemuMonitorCommand: libvirt marks the domain tainted, "custom monitor control
  // commands"; docs/operations.md). NOT_FOUND when there is no such domain or it has no balloon;
  // FAILED_PRECONDITION when it is not running. Answers with no counter where QEMU or the guest
  // lacks them. Not pure: default UNIMPLEMENTED (no monitor).
  virtual absl::StatusOr<BalloonPressure> ReadBalloonPressure(const std::string& uuid);

  // The calls made to the hypervisor so far, by the function's name, for /metrics. Default:
  // none counted.
  virtual std::vector<std::pair<std::string, uint64_t>> CallCounts() const { return {}; }
};

inline absl::StatusOr<DomainSurvey> Hypervisor::SurveyDomains(bool /*with_block_stats*/) {
  absl::StatusOr<std::vector<DomainInfo>> domains = ListActiveDomains();
  if (!domains.ok()) return domains.status();
  DomainSurvey out;
  out.domains = *std::move(domains);
  std::vector<std::string> uuids;
  uuids.reserve(out.domains.size());
  for (const DomainInfo& d : out.domains) uuids.push_back(d.uuid);
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> stats = GetBalloonStats(uuids);
  if (stats.ok()) {
    out.stats = *std::move(stats);
  } else {
    out.stats_status = stats.status();
  }
  return out;
}

inline absl::StatusOr<std::string> Hypervisor::ActiveJob(const std::string&) {
  return absl::UnimplementedError("this hypervisor reports no jobs");
}

inline absl::StatusOr<BalloonPressure> Hypervisor::ReadBalloonPressure(const std::string&) {
  return absl::UnimplementedError("this hypervisor has no QEMU monitor");
}

inline absl::StatusOr<AgentChannelInfo> Hypervisor::GetAgentChannel(const std::string&, const std::string&) {
  return absl::UnimplementedError("this hypervisor has no agent channels");
}

inline absl::Status Hypervisor::AttachAgentChannel(const std::string&, const std::string&, const std::string&) {
  return absl::UnimplementedError("this hypervisor cannot attach agent channels");
}

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_HYPERVISOR_H_
