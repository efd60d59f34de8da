// The per-guest law of the page-cache-aware policy (docs/policy.md writes it as equations):
// what size one guest should have, from its signals alone. The host's say (free before grow,
// the budget) comes after, in share_out.h.
//
// With M the guest's ceiling, A its actual size, H its hard demand and h the headroom:
//   floor     F = clamp(H + h + burst, min, M)   h = max(headroom_min, headroom_fraction * M)
//             with the agent H includes o = min(h, the least M - MemTotal seen): the kernel's
//             memory outside MemTotal
//             burst: the largest rise of H per report within a window (burst_headroom.h);
//             without the agent H = A - usable with A taken at the report's time: libvirt's A
//             is now, the guest's usable is as old as its report (the floor takes A when the
//             report was first seen: the balloon's moves since are the host's, not demand);
//             plus, after a rise r of it larger than h between the last two reports, t apart,
//             r * min(1, age / t): the rise may go on until the next report
//   ws        W = H + Active(file) + h            with the agent (hot cache is in Active(file))
//             W = A - max(0, MemFree - h)         without it (only free memory is known unused)
//   pressure  x = max(stall / stall_target, refault / refault_target): the plain readings, or
//             without the agent and pressure_profile.h on, each one's excess over a larger
//             size's, the host's disk reads counted so too;
//             with a futile verdict (futile_pressure.h, agent guests) 0 up to futile_ratio * level
//   allowance a (the size the guest is believed calm at), starting at A, moves only on a
//   measured report: the balloon has landed on its target and a report newer than the landing
//   has been seen (one action per measurement, never on the journey; a guest first seen at its
//   target counts as landed long ago):
//     x >= 1, in an episode, x below the previous measured x:
//                         a <- max(a, A) (falling: the last backoff is working; signals lag)
//     x >= 1 otherwise:   a <- max(a, G), G = A + backoff * (M - A) (pressure_edge.h: the
//                         step back for an episode's first); no probing for c; a backoff after
//                         the cooldown ended starts an episode: c <- 2c for the next
//     x < 1, t >= cool,
//       t - probed >= T:  a <- max(F, L, S, b - max(probe * M, take * (b - W), d)),  b = min(a, A)
//                         (L: pressure_edge.h's edge; no taking in balloon_follow.h's retry;
//                         S = W with the agent: takes stop there; without it probes go below;
//                         d, without the agent: what the guest reads from disk in T (read
//                         since the landing, calm against a larger size's reads: streaming),
//                         at most take * (b - max(F, L)))
//     x < 1 otherwise:    a <- min(a, A)      (calm at A is a measurement too)
//   pressure on an unmeasured report stops the balloon where it is: a <- max(a, A); an OOM kill
//   in the guest backs off at once, measured or not.
//   a take not made (the history shows the target it was asked from, and no call setting
//   another): a <- max(a, T), and the next take may come at once.
//   c starts at cooldown_min, doubles per episode up to cooldown_max, and goes back to
//   cooldown_min after cooldown_max without pressure.
//   proposal  clamp(max(a, F), F, M): the floor rises with hard demand at once.
// Slow to take (a step per measurement: half of what lies above the working set, then without
// the agent a small probe below it), fast to give
// (at once: the step that hurt and one more first, then half the gap to the ceiling).
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_PAGECACHE_LAW_H_
#define PLIMSOLL_POLICY_PAGECACHE_LAW_H_

#include <limits>
#include <optional>
#include <string>

#include "policy/balloon_follow.h"
#include "policy/burst_headroom.h"
#include "policy/futile_pressure.h"
#include "policy/guest_safety.h"
#include "policy/guest_signals.h"
#include "policy/policy.h"
#include "policy/pressure_edge.h"
#include "policy/pressure_profile.h"

namespace plimsoll::policy {

// Without the agent, how long after a landing the law waits for a disk read rate measured
// wholly at the new size before it probes a guest that streamed (docs/policy.md "Streaming
// takes"): two of plimsolld's default block_stats_interval (5 s).
inline constexpr double kAwaitReadsSeconds = 10;  // or two read intervals, if longer
// Without the agent, a backoff the disk reads alone made whose reads, at the grown size after its
// cooldown, are still this share of the ones that backed off or more was the reader's pace, not
// the size: its edge goes (docs/policy.md "`pressure_profile`"). A pace's 5 s readings wander by
// 0.16 (sd of the log) on the lab's guests: 0.8 is 1.4 of those below.
inline constexpr double kReadsNotRelievedShare = 0.8;

struct LawParams {
  // The floor's headroom over hard demand: the larger of the two. Memory a guest needs to
  // start a process or absorb a burst before the next report.
  double headroom_min_bytes = kHeadroomMinBytes;  // guest_safety.h
  double headroom_fraction = kHeadroomFraction;   // of M
  // The smallest step (probe_fraction of M), which is also, without the agent, the probe below
  // the working set; at most one step every probe_interval_seconds. Small, because a hot set's
  // edge is a cliff (docs/policy.md).
  double probe_fraction = 0.02;
  double probe_interval_seconds = 5;
  // A constant, not a tunable: the share of what lies above the working set taken per step.
  // Half takes reclaim more than whole ones on sizes4 with the agent (docs/policy.md "Taking").
  double take_fraction = 0.5;
  // Pressure targets: at or above either, the guest is under pressure.
  double stall_target_pct = 0.5;
  double refault_target_bytes_per_second = 1.0 * (1 << 20);
  // A backoff gives this share of the gap between A and M at once.
  double backoff_fraction = 0.5;
  // No probing for a cooldown after a backoff; it doubles per episode (a backoff after the
  // previous cooldown ended), and resets after cooldown_max_seconds without pressure.
  double cooldown_min_seconds = 30;
  double cooldown_max_seconds = 600;
  // Component: pressure only as far as a larger size relieves it (pressure_profile.h).
  ProfileParams profile;
  // Component: pressure that memory does not relieve keeps no memory (futile_pressure.h).
  FutileParams futile;
  // Component: room for the next allocation burst (burst_headroom.h).
  BurstParams burst;
  // Component: a balloon that does not follow is not chased (balloon_follow.h).
  FollowParams follow;
  // Component: remember where pressure began (pressure_edge.h).
  EdgeParams edge;
};

// What the law remembers between decisions for one guest: its own variables only (what the world
// did, landing, rates, the size at a report, is the snapshot's GuestView::history). Times are
// unix seconds.
struct LawMemory {
  std::optional<double> allowance_bytes;  // a: the size the guest is believed calm at
  double probed_s = -std::numeric_limits<double>::infinity();
  double cool_until_s = -std::numeric_limits<double>::infinity();
  double cooldown_s = 0;  // the next episode's cooldown; 0 means cooldown_min_seconds
  double episode_cooldown_s = 0;  // the current episode's (a backoff within it extends it by this)
  double pressured_s = -std::numeric_limits<double>::infinity();
  // x at the previous measured report (0 when it was calm): within an episode a backoff needs
  // pressure that did not fall since then.
  double measured_pressure = 0;
  ProfileMemory profile;  // pressure_profile.h
  FutileMemory futile;    // futile_pressure.h
  BurstMemory burst;      // burst_headroom.h
  // The largest rise of the guest's RSS from one decision to the next within the burst window:
  // how fast a guest that gave its cache back takes memory back (reclaim_pool.h).
  BurstMemory rss_rise;
  std::optional<SignalSource> burst_source;  // whose hard demand the burst last measured
  // When the guest last qualified for the reclaim pool's privileges (pagecache_policy.cc: a
  // guest spending what it lent keeps them for a grace); -infinity when it has not, or lost them.
  double pooled_s = -std::numeric_limits<double>::infinity();
  // When it began waiting for its agent before the balloon takes from it (reclaim_pool.h
  // kAgentWaitSeconds); unset when it is not waiting (pooled, or its agent cannot reclaim).
  std::optional<double> agent_wait_since_s;
  // What the budget took from it by balloon while its agent could give cold cache back in the
  // guest, not yet given back, and when it last took (reclaim_pool.h kBrakeSettleSeconds).
  double braked_bytes = 0;
  double braked_s = -std::numeric_limits<double>::infinity();
  double release_from_s = -std::numeric_limits<double>::infinity();  // when the last release began
  // The most the guest held above its balloon (RSS - actual) since the last take: the balloon's
  // own inflation lowers both alike, the agent's reclaim only RSS.
  double brake_use_peak = -std::numeric_limits<double>::infinity();
  // When a brake its agent did not answer was forgotten (reclaim_pool.h kBrakeReleaseIntervalSeconds).
  double brake_forgot_s = -std::numeric_limits<double>::infinity();
  FollowMemory follow;    // balloon_follow.h
  EdgeMemory edge;        // pressure_edge.h
  // The target the last decision asked for and the target it was asked from (recorded by
  // pagecache_policy.cc): a take the history shows was not made is forgotten.
  std::optional<double> asked_bytes;
  double asked_from_bytes = 0;
  // OOM kills the history counted while the guest was held (pagecache_policy.cc: stats unsafe
  // to act on): the report that counted them is not new when the law acts again.
  double unseen_oom_kills = 0;
  // Without the agent, H as last read on a report after a landing: until the next such report
  // the floor's H does not fall below it (pagecache_law.cc).
  std::optional<double> landed_hard_bytes;
  // Without the agent: the latest report's time and hard demand (A at its time, as the burst
  // measures it), and the rise of that demand from the report before and the time between the
  // two: a rise still under way (pagecache_law.cc).
  std::optional<double> rise_report_s;
  double rise_hard_bytes = 0;
  double rise_bytes = 0;
  double rise_seconds = 0;
  // The report time of the last measured report the law found calm, until late pressure
  // counters for it were answered (pagecache_law.cc); -infinity otherwise.
  double calm_report_s = -std::numeric_limits<double>::infinity();
  // Without the agent: the disk read rate that made the last backoff, when the reads alone made
  // it, until a rate read at the grown size after its cooldown says whether growth relieved it
  // (pagecache_law.cc).
  std::optional<double> backoff_reads;
  double backoff_size_bytes = 0;  // the size that backoff was made at
};

enum class LawAction {
  kHold,      // nothing measured to act on, or nothing to take
  kWait,      // pressure on an unmeasured report: the balloon stops where it is
  kBackoff,   // pressure measured: memory back at once
  kTake,      // calm: a step towards the working set
  kProbe,     // calm: a small step below it
  kCooling,   // calm, but within the cooldown of a backoff
  kRetry,     // the balloon did not follow its target: no taking for a while (balloon_follow.h)
  kEdge,      // calm, at the edge where pressure began (pressure_edge.h)
};

// "hold", "wait", "backoff", "take", "probe", "cooling", "retry", "edge".
const char* LawActionName(LawAction action);

struct LawOutcome {
  LawAction action = LawAction::kHold;
  GuestSignals signals;          // what SignalsOf made of the guest's stats and history
  double floor_bytes = 0;        // F
  double burst_bytes = 0;        // the burst headroom in F (0 when pooled)
  double rising_bytes = 0;       // without the agent: the rise still under way in F's H
  double working_set_bytes = 0;  // W
  double pressure = 0;           // x (0 without any pressure signal)
  double raw_pressure = 0;       // x by the plain readings (stall and refaults)
  // The disk read rate between the last two reads of the guest's disks (bytes/s; the history's:
  // plimsolld reads them every block_stats_interval), absent without a previous count.
  std::optional<double> disk_bytes_per_s;
  double futile_level = 0;       // ℓ while a futile verdict holds (futile_pressure.h), else 0
  bool measured = false;         // this report measured the current size
  // "ok", or the balloon's failure to follow whose retry is under way ("stuck", "churning",
  // "self_deflated"; balloon_follow.h).
  const char* state = "ok";
  double proposal_bytes = 0;     // clamp(max(a, F), F, M): what the guest asks the host for
  // The action and the numbers that decided it ("probe x=0.12 ws=612MiB").
  std::string reason;
};

// The headroom h for `guest` (see the file comment).
double LawHeadroom(const GuestView& guest, const LawParams& params);

// The step s for `guest`: probe_fraction of its ceiling, the smallest take.
double LawStep(const GuestView& guest, const LawParams& params);

// One decision of the law for `guest` at `now_s`, whose stats are safe to act on
// (guest_safety.h UnsafeToActReason is empty, ImplausibleStatsReason too). What the world did
// comes from guest.history (history_deriver.h; without it nothing is measured). `memory` is read
// and updated.
// `pooled`: the guest is a member of a reclaim pool that covers (reclaim_pool.h): its floor
// keeps no burst room (the pool's reserve does), and the balloon does not probe it (its agent
// reclaims the cold cache); it still grows on pressure and hard demand.
// `agent_wait_left_s` > 0: the guest's agent may still give its cold cache back in the guest
// (reclaim_pool.h kAgentWaitSeconds): the balloon does not take from it yet; its floor is as
// without the pool.
LawOutcome StepLaw(const GuestView& guest, double now_s, const LawParams& params,
                   LawMemory* memory, bool pooled = false, double agent_wait_left_s = 0);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PAGECACHE_LAW_H_
