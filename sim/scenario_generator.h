// The scenario generator: a seeded, endless supply of hosts for the corpus, so that
// a policy is judged on many cases it was not written for, not on the 14 bundled ones.
//
// Case `index` of seed `seed` is a pure function of the two (its own PRNG stream, rng.h): the
// same whatever count is asked for, on every machine. Each case is an ordinary Scenario, so it
// prints as a scenario file (FormatScenario) that replays to the same run.
//
// What a case holds (docs/policy.md, "Scenario corpus", has the table):
// - 2-32 guests of 512 MiB to 64 GiB (13 sizes, each as likely: 512 MiB, 1, 2, 3, 4, 6, 8, 12,
//   16, 24, 32, 48, 64 GiB), min 1/16 to 1/4 of max (at least 256 MiB);
// - anonymous memory of 3-45% of the guest, or on two hosts in five (anonymous-heavy tenants,
//   tag anon_heavy) 25-80%, never more than 85% of the guest less its kernel;
// - per guest one workload, sometimes with a second, smaller one: streaming reads, a hot set
//   of 5-120% of the guest re-read, anonymous growth in steps, anonymous spikes, bursty phases
//   (reads on, reads off), a loop over a file 1.2-3x the guest, or idle;
// - the agent on every guest, on none, or on about half (mixed);
// - on one host in two, guest kernels that send the balloon driver's pressure counters
//   (balloon_pressure=true on every guest: Linux >= 6.12 on QEMU >= 9.2);
// - balloons: slow (2-32 MiB/s), stuck, trickling and churning ones from a time in the first
//   half of the run, and guests with autodeflate (self-deflating on OOM);
// - a budget of 50-95% of the guests' total; a host with room for every guest at its max,
//   and in some cases an outside process that takes enough of it at some time (and sometimes
//   gives it back later) that the guests must go 5-25% under the budget;
// - 10-30 simulated minutes, a 5 s tick.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_SIM_SCENARIO_GENERATOR_H_
#define PLIMSOLL_SIM_SCENARIO_GENERATOR_H_

#include <cstdint>

#include "sim/scenario.h"

namespace plimsoll::sim {

// The ranges the generator keeps to (its test checks them).
inline constexpr int kGeneratedMinGuests = 2;
inline constexpr int kGeneratedMaxGuests = 32;
inline constexpr double kGeneratedMinGuestBytes = 512.0 * (1 << 20);
inline constexpr double kGeneratedMaxGuestBytes = 64.0 * (1 << 30);
inline constexpr double kGeneratedMinBudgetShare = 0.50;  // of the guests' total max
inline constexpr double kGeneratedMaxBudgetShare = 0.95;
inline constexpr double kGeneratedMinHotShare = 0.05;  // hot set, of the guest's max
inline constexpr double kGeneratedMaxHotShare = 1.20;

// Case `index` (0-based) of the corpus of `seed`, named "seed<seed>_<index>" with 3 digits,
// guests "g<nn>_<workload>"; tags "generated", the workloads it holds, "anon_heavy" and
// "host_pressure" where they apply.
Scenario GenerateScenario(uint64_t seed, int index);

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_SCENARIO_GENERATOR_H_
