// What one guest's stats say about its memory demand and pressure, in one place, so the
// pagecache policy's arithmetic reads the same whether the numbers come from plimsoll-agent or
// from libvirt's balloon stats alone.
//
// Three sources, best first:
// - kAgent: anon_bytes and unreclaimable_bytes are reported. Hard demand = anon + unreclaimable;
//   stall comes from PSI (the cumulative total when present: stall over the report interval, as
//   Senpai measures it; avg10 otherwise) and refaults from workingset_refault_file.
// - kLibvirt: usable (MemAvailable) is reported. Hard demand = actual - usable, i.e. everything
//   the guest itself does not count as available (it includes kernel memory). There is no PSI;
//   major faults plus swap-ins per second stand in for refaults, and so does the memory the
//   guest's allocating tasks scanned (direct reclaim) where its balloon driver reports it
//   (Linux >= 6.12): a guest streaming through its cache leaves that to kswapd, one whose demand
//   outgrows its size cannot. The balloon driver's OOM kill count stands in for the agent's.
// - kFreeOnly: only unused (MemFree). Hard demand = actual - unused: page cache counts as used,
//   as in MoM. Nothing but free memory is ever reclaimable from such a guest.
//
// Rates need two reports. The report time is now - age (agent_age_seconds, else
// stats_age_seconds); a Decide that sees no newer report than the previous one reuses the
// previous rates and says so (new_report == false), so a policy can refuse to act twice on one
// measurement.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_GUEST_SIGNALS_H_
#define PLIMSOLL_POLICY_GUEST_SIGNALS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "policy/policy.h"

namespace plimsoll::policy {

// Bytes per page in the guest counters (workingset_refault_file, balloon_*, major faults).
inline constexpr double kGuestPageBytes = 4096;

enum class SignalSource { kAgent, kLibvirt, kFreeOnly };

// "agent", "libvirt", "free_only".
const char* SignalSourceName(SignalSource source);

// What ReadSignals remembers between calls for one guest (history_deriver.h keeps it per guest).
struct SignalMemory {
  std::optional<double> report_s;  // report time of the last report seen (unix seconds)
  std::optional<double> psi_total_us;
  std::optional<double> major_fault;
  std::optional<double> swap_in_kib;
  std::optional<double> oom_kill;
  // The balloon driver's direct scans, over their own report times (they may lag the stats).
  std::optional<double> direct_scan_bytes;
  std::optional<double> direct_scan_s;
  std::optional<double> direct_scan_bytes_per_s;
  // The libvirt part of the last refault rate (major faults and swap-ins), without the scans.
  std::optional<double> fault_bytes_per_s;
  // The rates computed from the last new report, reused until the next one.
  std::optional<double> stall_pct;
  std::optional<double> refault_bytes_per_s;
};

struct GuestSignals {
  SignalSource source = SignalSource::kFreeOnly;
  double hard_bytes = 0;         // memory the guest cannot give back (see the file comment)
  double cache_bytes = 0;        // page cache (Cached), 0 when unknown
  double active_file_bytes = 0;  // agent only; 0 otherwise
  bool new_report = false;       // a report newer than the one the previous call saw
  double report_s = 0;           // this report's time (unix seconds)
  // Percent of the last report interval some task stalled on memory; absent without PSI.
  std::optional<double> stall_pct;
  // Bytes/s of evicted file pages read back (agent), or of major faults and swap-ins (libvirt).
  std::optional<double> refault_bytes_per_s;
  // OOM kills in the guest since the previous report (the agent's count, else the balloon
  // driver's; 0 without either).
  double new_oom_kills = 0;
  // No new report, but the balloon driver's counters, read apart from the stats, brought a
  // direct-scan sample that changed the refault rate: news about the report already seen.
  bool late_counters = false;
};

// Why `guest`'s stats are impossible and must not steer a decision ("usable=5120MiB>max=4096MiB",
// "psi_some_avg10=250.0"), or nullopt when they are plausible. Sizes above the balloon ceiling
// or negative, PSI outside [0, 100], negative or non-finite refault rates, and agent sizes that
// together exceed the ceiling are impossible. Counters that go backwards are not: a rebooted
// guest restarts them, and ReadSignals starts over.
std::optional<std::string> ImplausibleStatsReason(const GuestView& guest);

// The signals of `guest` at `now_s` (unix seconds), given what the previous call remembered;
// `next` receives what to remember for the next call. Call only on guests with plausible stats
// and an "unused" figure (guest_safety.h).
// Whether libvirt's own numbers show the hard demand `signals` reads, given the headroom a
// floor keeps over it (`room_bytes`). Hard demand is what the neighbours pay for
// in a share-out, so when it rests on the agent's word alone (its AnonPages, which a hostile
// guest can inflate; docs/security.md) the balloon driver's MemAvailable must be below that
// room too. Libvirt's own hard demand (A - MemAvailable) is always seen. An honest guest pays
// with at most one libvirt stats period in which libvirt's numbers lag the agent's.
bool HostSeesHardDemand(const GuestView& guest, const GuestSignals& signals, double room_bytes);

GuestSignals ReadSignals(const GuestView& guest, double now_s, const SignalMemory& previous,
                         SignalMemory* next);

// The signals of `guest` from its latest stats and its history (guest_history.h: the report's
// time and whether it is new, the rates, the OOM kills), which ReadSignals derived when the
// snapshot was made (history_deriver.h). Without a history: no report is new and no rate known.
GuestSignals SignalsOf(const GuestView& guest);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_GUEST_SIGNALS_H_
