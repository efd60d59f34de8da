// What the world did to one guest up to the snapshot, as the collect step derives it: when its
// balloon landed, whether the latest report came after that, the counters' rates over the last
// report interval, the balloon's size at the report's time, the kernel's memory outside MemTotal
// and whether the balloon follows its target. These are facts about the world, not a policy's
// beliefs: plimsolld derives them once per tick from the targets its balloon calls set and
// libvirt's stats (server/loop/guest_tracker.h), the simulator from the calls it made
// (sim/simulation.h), both through history_deriver.h. Every optional field is absent when it is
// not known (never zero-filled).
//
// Plain data; no dependency on the rest of policy/ so policy.h can hold it.
#ifndef PLIMSOLL_POLICY_GUEST_HISTORY_H_
#define PLIMSOLL_POLICY_GUEST_HISTORY_H_

#include <cstdint>
#include <optional>
#include <string>

namespace plimsoll::policy {

// How the balloon follows its target (balloon_progress.h judges it): kNone is "ok".
enum class ProgressEvent { kNone, kStuck, kChurning, kSelfDeflated };

struct GuestHistory {
  // When the balloon was first seen within the landing tolerance (history_deriver.h
  // LandingToleranceBytes) of its current target, unix seconds; absent while it travels. A guest
  // first seen at its target landed long ago (-infinity).
  std::optional<double> landed_s;
  // The latest stats report's time (unix seconds: now - agent_age_seconds, else
  // stats_age_seconds), and whether it is newer than the one the previous snapshot had.
  double report_s = 0;
  bool new_report = false;
  // The latest report was taken after the balloon landed: it measures the current size.
  bool report_after_landing = false;

  // Over the interval between the latest report and the one before it, kept until the next
  // report. Percent of the time some task stalled on memory: from PSI's cumulative total, else
  // its avg10.
  std::optional<double> stall_pct;
  // Bytes/s of evicted file pages read back: the agent's workingset_refault_file rate, else
  // libvirt's major faults and swap-ins plus the balloon driver's direct scans
  // (guest_signals.h).
  std::optional<double> refault_bytes_per_s;
  // OOM kills in the guest counted by the latest report and not by the one before (the agent's
  // oom_kill, else the balloon driver's; 0 when the report is not new); absent when the guest
  // reports neither.
  std::optional<double> new_oom_kills;
  // No new report, but the balloon driver's counters (read a tick after their stats) changed
  // the refault rate above: what they say is about the latest report (guest_signals.h).
  bool late_counters = false;
  // Bytes/s the host read from the guest's disks between its last two reads of them, and the
  // time of the earlier of the two (unix seconds): the rate says nothing of a size the balloon
  // landed on after it.
  std::optional<double> disk_read_bytes_per_s;
  std::optional<double> disk_read_since_s;
  // The length of that window: how often the host reads the disks (block_stats_interval, which
  // an operator may change), as the readings themselves show it.
  std::optional<double> disk_read_window_s;

  // The balloon's size at the latest report's time as the snapshots saw it (libvirt's actual is
  // now, the guest's report is as old as its age).
  std::optional<double> size_at_report_bytes;
  // The balloon's size at the first snapshot at or after the latest report's time: the latest
  // size the report can show, with none of the moves made after the report was seen (a loop
  // ticking faster than the guest reports moves the balloon between reports).
  std::optional<double> size_after_report_bytes;
  // The least max_bytes - MemTotal seen: the kernel's memory outside MemTotal (bytes), exact once
  // the guest was seen at its ceiling, too high before.
  std::optional<double> outside_bytes;

  // Whether the balloon follows its target, judged at this snapshot, with the numbers behind a
  // verdict other than kNone ("moved=2.0MiB in=30.0s need=30MiB").
  ProgressEvent progress = ProgressEvent::kNone;
  std::string progress_detail;

  // A balloon call setting this target was issued and has not returned: the target above is the
  // last one set, and the move to this one is under way (plimsolld only).
  std::optional<int64_t> pending_target_bytes;
};

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_GUEST_HISTORY_H_
