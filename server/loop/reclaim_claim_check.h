// What an agent claims it reclaimed, checked against what the host saw: its QEMU's RSS.
//
// The in-guest agent reports the bytes its reclaimer freed (AgentReport.reclaim, summed per guest
// by AgentStore as AgentSignals::reclaim_achieved_total_bytes). With free page reporting those
// pages go back to the host and QEMU's resident memory falls. plimsolld never decides anything in
// a guest's favour on a claimed figure; this check says, per guest, how much of what was claimed
// the host saw come back, for the API, the metrics and the logs, and pauses the guest's own
// reclaim bounds after a window the RSS did not confirm: reclaim the host does not get back only
// costs the guest its cache (a hot set read back at once, a reader refilling what was dropped).
// Pure: no I/O, no clock, no logging; the state travels in and out (StepReclaimClaims), and its
// tests are tables of samples.
//
// The law, per guest, over windows of claims:
//
//   a window opens at the first tick whose claimed total grew, and gathers every later growth;
//   it closes once no claim has come for `grace`, or `max_window` after it opened;
//   base  = the sample of highest RSS within `lookback` before it opened (or the opening one)
//   fall  = max over the window's samples i of
//             (base.rss - rss_i) - max(0, (base.actual - actual_i) - max(0, base.actual - base.rss))
//           the fall of RSS the balloon does not explain, clamped at 0: a balloon taking memory
//           makes RSS fall too, but only by pages the host held, and at the base at least
//           actual - RSS of the guest's memory was not resident (pages free page reporting had
//           returned: a guest reading a file with its balloon taken during the read lost 375 MiB
//           of balloon while its RSS fell 27 MiB)
//   confirmed   = min(claimed, fall)        unconfirmed = claimed - confirmed
//   read  = what the guest read from its disks from the base to the window's last reading (the
//           host's block stats, where they were read at both)
//   verdict: unmeasured   no RSS at the base or in the window
//            small        claimed < min_claim_bytes (within RSS noise: not judged)
//            reading      confirmed < min_confirmed_share * claimed, but read >= unconfirmed: the
//                         guest read at least that much into its cache meanwhile (a file read
//                         once, still under way), which raises RSS as much as the reclaim lowers
//                         it; the host cannot tell that from a claim of nothing, so it is not
//                         judged (the bytes still count as unconfirmed). A liar escaping the
//                         verdict this way must read from its disks what it claims: cache the
//                         host sees in its RSS and costs it by.
//            unconfirmed  confirmed < min_confirmed_share * claimed
//            confirmed    otherwise
//   pause:   an unconfirmed window pauses the guest's bounds (plimsolld sends enabled = false)
//            for unconfirmed_pause, doubled for each unconfirmed window since the last
//            confirmed one, at most max_unconfirmed_pause; a confirmed window ends the doubling
//
// A window's RSS history starts after the previous window closed, so one fall confirms at most
// one window. The base looks back because a claim reaches the host after the reclaim (a report
// interval, then a tick), by when reporting may already have returned the pages.
#ifndef PLIMSOLL_SERVER_LOOP_RECLAIM_CLAIM_CHECK_H_
#define PLIMSOLL_SERVER_LOOP_RECLAIM_CLAIM_CHECK_H_

#include <cstdint>
#include <deque>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plimsoll::server {

struct ReclaimClaimParams {
  // No new claim for this long closes a window. Reporting returns freed 2 MiB blocks about 2 s
  // after the free (the kernel's page reporting delay), libvirt's rss comes with the balloon
  // stats (stats_period, 2 s) and the loop reads it once a tick (5 s): a lab guest's RSS showed
  // 546 of 618 MiB reclaimed within 20 s.
  absl::Duration grace = absl::Seconds(20);
  // A window still gathering claims closes after this long anyway, so a guest that claims
  // without pause is judged too (the next window's base is the sample that closed this one).
  absl::Duration max_window = absl::Seconds(60);
  // How far before a window's first claim its base may be: the agent's report interval (5 s), a
  // tick (5 s), and reporting's delay, with room.
  absl::Duration lookback = absl::Seconds(20);
  // Windows claiming less are not judged: QEMU's own memory moves RSS by MiBs, and one default
  // step of the agent is 64 MiB.
  uint64_t min_claim_bytes = uint64_t{64} << 20;
  // A window whose confirmed bytes are below this share of its claim is unconfirmed. Reporting
  // returns only whole free 2 MiB blocks, so cache freed in scattered pages returns less than
  // was freed (a lab guest: 546 of 618 MiB, 88%), and the guest may allocate meanwhile; a
  // quarter leaves room for both and still catches a claim of nothing.
  double min_confirmed_share = 0.25;
  // The pause after an unconfirmed window, and its cap. After it the agent may try again: one
  // step of its hot set per pause at most (its own keep after pressure holds 5 min).
  absl::Duration unconfirmed_pause = absl::Minutes(10);
  absl::Duration max_unconfirmed_pause = absl::Hours(2);
};

enum class ReclaimVerdict {
  kNone,         // no window closed yet
  kConfirmed,    // RSS fell by at least min_confirmed_share of the claim
  kUnconfirmed,  // a claim of at least min_claim_bytes that RSS did not show
  kSmall,        // a claim below min_claim_bytes: not judged
  kUnmeasured,   // no RSS reading to judge it by
  kReading,      // unconfirmed, but the guest read at least the unconfirmed bytes meanwhile
};
// "none", "confirmed", "unconfirmed", "small", "unmeasured", "reading": the API's and the logs'
// word.
absl::string_view ReclaimVerdictName(ReclaimVerdict verdict);

// One tick's readings of one guest.
struct ReclaimClaimSample {
  absl::Time now;
  // The agent's claimed reclaimed bytes, cumulative (AgentSignals::reclaim_achieved_total_bytes);
  // nullopt: the store has no entry for the guest. Its growth is the claim; a total that falls
  // (the store forgot the guest and started again) or appears is a new base, not a claim.
  std::optional<uint64_t> claimed_total;
  // QEMU's RSS read by the host this tick; nullopt: not read this tick.
  std::optional<int64_t> host_rss_bytes;
  int64_t balloon_actual_bytes = 0;
  // What QEMU saw the guest read from its disks, cumulative (BalloonStats::disk_read_bytes);
  // nullopt: not read.
  std::optional<uint64_t> disk_read_bytes;
};

// A closed window, for the log line.
struct ReclaimClaimWindow {
  absl::Time opened;
  absl::Time closed;
  uint64_t claimed_bytes = 0;
  uint64_t rss_fall_bytes = 0;  // the fall the balloon does not explain (0 when unmeasured)
  uint64_t confirmed_bytes = 0;
  uint64_t unconfirmed_bytes = 0;
  ReclaimVerdict verdict = ReclaimVerdict::kNone;
};

// Per guest, carried from one tick to the next. Totals only grow (saturating), and cover the
// closed windows of this daemon's watch of the guest.
struct ReclaimClaimState {
  struct Point {
    absl::Time at;
    int64_t rss = 0;
    int64_t actual = 0;
    std::optional<uint64_t> read;  // disk reads, cumulative
  };
  std::optional<uint64_t> claimed_seen;  // the last sample's claimed_total
  // The open window (open == false: none).
  bool open = false;
  absl::Time opened;
  absl::Time last_claim;
  uint64_t window_claimed = 0;
  std::optional<Point> base;
  std::optional<int64_t> window_fall;  // nullopt: no RSS reading in the window yet
  uint64_t window_read = 0;            // disk reads from the base to the last reading
  // RSS readings since the last window closed, within lookback (while no window is open).
  std::deque<Point> recent;

  uint64_t confirmed_bytes = 0;
  uint64_t unconfirmed_bytes = 0;
  uint64_t unconfirmed_windows = 0;  // windows with verdict kUnconfirmed
  ReclaimVerdict last_verdict = ReclaimVerdict::kNone;
  // Unconfirmed windows since the last confirmed one, and the end of the pause they set.
  uint32_t unconfirmed_run = 0;
  absl::Time paused_until = absl::InfinitePast();
};

// How long the guest's reclaim bounds stay paused after `now`; zero when they are not.
absl::Duration ReclaimBoundsPauseLeft(const ReclaimClaimState& state, absl::Time now);

// Advances `state` by one sample (see the file comment); returns the window it closed, if any.
std::optional<ReclaimClaimWindow> StepReclaimClaims(const ReclaimClaimParams& params, const ReclaimClaimSample& sample,
                                                    ReclaimClaimState* state);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_RECLAIM_CLAIM_CHECK_H_
