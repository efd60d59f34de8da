// A simulation scenario: a host, its guests, their workloads over time, and the outcome we
// expect, in a small line-based text format (sim/scenarios/*.scenario):
//
//   # comment
//   scenario name=cache_stream duration=30m tick=5s
//   description One guest streams a file, one re-reads a hot set, one idles.
//   tags cache_heavy
//   host total=16GiB reserve=1GiB budget=6GiB
//   host_event at=10m other=3GiB
//   guest name=stream max=4GiB min=512MiB agent=true autodeflate=false speed=512MiB/s
//   phase guest=stream at=0s anon=600MiB hot=0 hot_rate=0 stream_rate=40MiB/s loop=0
//   expect pagecache oom_kills == 0
//   expect pagecache reclaimed_gib_s > 1.5 * mom
//
// Every line is a keyword and key=value pairs, except `description` (free text), `tags` (words)
// and `expect` (positional: policy, metric, operator, then a number or [factor *] policy, or
// [factor *] policy:metric).
// Unknown keywords and keys are errors that name the line. Guest keys and their defaults are on
// GuestSpec below; phase keys on Phase.
#ifndef PLIMSOLL_SIM_SCENARIO_H_
#define PLIMSOLL_SIM_SCENARIO_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plimsoll::sim {

// What a guest's workload asks for from `at` (seconds) until the next phase.
struct Phase {
  double at = 0;
  double anon = 0;         // anonymous working set (bytes) the guest's processes want
  double hot = 0;          // size of the file data it re-reads (bytes)
  double hot_rate = 0;     // bytes/s read from the hot set, uniformly
  double stream_rate = 0;  // bytes/s of file data read once (fills the cache with cold pages)
  // With loop > 0 the streamed data is a file of this size read over and over: once it has been
  // read in full, a pass hits the cache only if the whole file is cached; otherwise (LRU over a
  // loop larger than the cache) every read is a refault, whatever the guest's size.
  double loop = 0;
};

// How a guest's balloon or stats misbehave, from `behaviour_at` on.
enum class Behaviour {
  kNormal,
  kStuck,     // the balloon stops moving
  kTrickle,   // the balloon moves one 4 KiB page every 3 s
  kChurn,     // inflating against a streaming reader: the guest deflates 97% of what it inflates
  kNoStats,   // never reports stats (no balloon driver statistics)
  kNonsense,  // reports impossible numbers
  kStale,     // stops reporting
};

const char* BehaviourName(Behaviour b);

// How a guest's readers reach their file data. It decides what libvirt's major_fault counts
// (the agentless pressure signal): pgmajfault counts faults on mapped pages only, so a page a
// read() brings back from disk is no major fault, however often it is evicted and read again.
// The lab's readers use read() (a hot1536 guest squeezed to its floor refaulted 1.7-2.5 M
// pages while its major faults said x = 0.00-0.05: docs/benchmarks.md "The access mode").
enum class FileAccess {
  kRead,  // read()/pread(): most databases' files, cp, the lab's workloads
  kMmap,  // mapped files: every miss is a major fault (Lucene indexes, LMDB, binaries)
};

const char* FileAccessName(FileAccess a);

struct GuestSpec {
  std::string name;
  double max = 0;                  // max=  (required)
  double min = 0;                  // min=
  std::optional<double> start;     // start=  initial balloon size; default max
  // cache=  page cache at the start, hot set first; default all that anon leaves (a guest
  // that has run for long). A freshly booted guest has little: the rest is free memory.
  std::optional<double> cache;
  bool agent = true;               // agent=  plimsoll-agent reports (anon, PSI, refaults, ...)
  bool autodeflate = false;        // autodeflate=  deflate on OOM
  double speed = 512.0 * (1 << 20);  // speed=  balloon bytes/s, both ways
  double shares = 1000;            // shares=
  std::optional<double> kernel;    // kernel=  memory the kernel keeps; default 48MiB + 2% of max
  double unreclaimable = 64.0 * (1 << 20);  // unreclaimable=  Shmem + SUnreclaim
  double alloc_rate = 256.0 * (1 << 20);    // alloc_rate=  how fast anon grows, bytes/s
  // disk_rate=  how fast the guest reads from its disk, bytes/s: its readers' misses and
  // streamed reads together never exceed it (they wait and read less).
  double disk_rate = 100.0 * (1 << 20);
  // refault_stall=  the part of a refault's read time that PSI counts as a memory stall, in
  // [0, 1]. 1: the reader does nothing but wait for the disk. The lab's TCG guests measured
  // 0.42-0.47 (docs/policy.md "Calibration").
  double refault_stall = 1.0;
  // pace_noise=  how unsteady the guest's readers are: each second their disk reads (hot-set
  // misses, streamed reads) are scaled by a factor drawn uniformly with this relative standard
  // deviation, from a stream seeded by the guest's name (the same run every time). 0: steady.
  // The lab's looping guest's stall varies by 0.07-0.09 of its mean from one 2 s interval to
  // the next, unconstrained (docs/policy.md "Calibration").
  double pace_noise = 0;
  // read_drift=  how far the guest's readers' pace wanders with its neighbours (their CPU and
  // disk contention): their disk reads are scaled by exp(x), x a random walk pulled back to 0
  // (AR(1), a 2.5 s correlation time) with this standard deviation, starting at -0.75 (readers
  // that start beside their neighbours read slowly at first). From a
  // stream seeded by the guest's name. 0: off. The lab's streaming guests read at 0.45-1.19
  // (median 0.68) of their steady rate in their first 5 s reading, and their 5 s readings after
  // it deviate from the run's median by 0.16 (sd of the log; lag-one correlation 0.3): 0.21
  // (bench/read_drift.py, docs/policy.md "Calibration against real guests").
  double read_drift = 0;
  // min_free=  free memory the guest's kernel keeps however hard it is squeezed (watermarks,
  // reserves); default max(16 MiB, 0.5% of its size).
  std::optional<double> min_free;
  FileAccess access = FileAccess::kRead;    // access=  read | mmap
  // balloon_pressure=  the guest's kernel (Linux >= 6.12, through QEMU >= 9.2) sends its
  // balloon driver's oom_kill, allocstall and pgscan_direct counters with the stats
  // (policy::GuestView::balloon_*; guest_model.h models them). Printed only when true, so that
  // scenarios written before the key print as they did.
  bool balloon_pressure = false;
  double stats_period = 5;                  // stats_period=  seconds between reports
  Behaviour behaviour = Behaviour::kNormal;  // behaviour=
  double behaviour_at = 0;                   // behaviour_at=
  std::vector<Phase> phases;                 // from `phase guest=<name>` lines, by time
};

// Memory on the host that is not the guests', from `at` on.
struct HostEvent {
  double at = 0;
  double other = 0;
};

struct HostSpec {
  double total = 0;    // total=  (required)
  double reserve = 0;  // reserve=
  std::optional<double> budget;  // budget=  the configured guest budget cap
  std::vector<HostEvent> events;
};

enum class CompareOp { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual };

// The operator as a scenario file spells it ("<", "<=", ">", ">=", "==").
const char* CompareOpText(CompareOp op);

// `expect <policy> <metric> <op> <rhs>`; rhs is a number, or `[factor *] other_policy` (the
// same metric of another policy's run), or `[factor *] other_policy:other_metric`.
struct Expectation {
  int line = 0;
  std::string text;
  std::string policy;
  std::string metric;
  CompareOp op = CompareOp::kEqual;
  double value = 0;
  double factor = 1;
  std::optional<std::string> other_policy;
  std::optional<std::string> other_metric;
};

struct Scenario {
  std::string name;
  std::string description;
  std::vector<std::string> tags;
  double duration = 1800;  // seconds
  double tick = 5;         // seconds between policy decisions
  double stale_after = 30;  // seconds without a report before stats count as stale
  HostSpec host;
  std::vector<GuestSpec> guests;
  std::vector<Expectation> expectations;

  bool HasTag(absl::string_view tag) const;
  // The guest budget the daemon would compute: min(total - reserve, budget).
  double GuestBudget() const;
};

// Parses a scenario; errors name the line ("line 7: unknown key \"spead\" in guest").
absl::StatusOr<Scenario> ParseScenario(absl::string_view text);

// Reads and parses a file.
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

// The scenario as a scenario file that ParseScenario reads back to the same Scenario (every
// field but Expectation::line; values print exactly, see units.h FormatExactBytes). Every key
// is written, defaults too, so that a printed case reads on its own (but balloon_pressure only
// when true, read_drift only when set). The description goes on
// one line and must hold no '#' or newline (they would not read back).
std::string FormatScenario(const Scenario& scenario);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_SCENARIO_H_
