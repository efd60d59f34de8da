// Component of the pagecache law (pagecache_law.h): a guest that has allocated in bursts keeps
// room for the next one.
//
// The law's floor is hard demand plus a headroom (5% of the ceiling). A guest that allocates
// faster than it reports (the corpus has spikes of 2.6-6 GiB at 512 MiB/s under 10 s stats)
// goes through that headroom between two reports and reaches its OOM path before the floor has
// seen the rise. So the floor also keeps the largest rise of hard demand between two reports
// seen within window_seconds:
//   F = clamp(H + h + burst, min, M),  burst = max rise of H per report within the window
// While an allocation is under way its own rise is the burst, so the floor leads it by one
// report; after window_seconds without a rise as large, the burst falls to the newest rise.
//
// The caller chooses what "hard demand" is measured: the law passes H for agent guests and,
// for the others, A - usable with A taken at the guest's report's time (libvirt's A is now,
// the guest's usable as old as its report: a balloon move between them is no allocation).
//
// Switched off by window_seconds <= 0.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_BURST_HEADROOM_H_
#define PLIMSOLL_POLICY_BURST_HEADROOM_H_

#include <optional>

namespace plimsoll::policy {

struct BurstParams {
  double window_seconds = 600;  // <= 0: off
};

struct BurstMemory {
  std::optional<double> hard_bytes;  // hard demand at the previous new report
  double burst_bytes = 0;            // the largest rise within the window
  double burst_s = 0;                // when it was seen
};

// The burst headroom after a new report of hard demand `hard_bytes` at `now_s` (call once per
// new report; between reports use memory.burst_bytes). Returns 0 when the component is off.
double UpdateBurst(double hard_bytes, double now_s, const BurstParams& params, BurstMemory* memory);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_BURST_HEADROOM_H_
