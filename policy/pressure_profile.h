// Component of the pagecache law (pagecache_law.h): pressure counts only as far as a larger
// size would relieve it.
//
// A reader looping over a file larger than its guest stalls and refaults at any size (on TCG
// guests PSI counts 0.42-0.47 of a refault's read time as stall, docs/policy.md "Calibration against real guests"):
// by the plain targets it is always under pressure
// and the law would give it its ceiling, memory that buys it nothing. And without the agent the
// host sees each guest's disk reads (GuestView::disk_read_bytes), which say nothing by
// themselves (a guest may just be reading a file once) but which, when they rise as the
// balloon grows, are refaults seen from outside.
//
// Both are the same question: is this pressure the size's doing? The profile keeps, per size
// bucket (bucket_fraction of the ceiling), the latest measured reading of each signal (stall %,
// refault bytes/s, disk read bytes/s). The pressure the law acts on is, per signal,
//   excess = max(0, reading - ratio * least reading in any bucket above the current one)
// and the reading itself when no larger size has been measured (a guest never larger than now
// cannot be shown to be calm there); at the ceiling (the last bucket holds only sizes >= it)
// the excess is 0: no size could relieve it, and smaller sizes are measured against it. Readings older than forget_seconds are dropped, so a
// workload that changed is measured again (at most one re-exploration per forget_seconds).
// Disk reads count only through the profile: a guest's own reading rate is not pressure.
//
// Switched off by ratio <= 0: the law then uses the plain readings and ignores disk reads. The
// law applies it to guests without the agent only (pagecache_law.cc): the agent's refault
// counter already tells refaults from first reads, and on the corpus the profile bought agent
// guests nothing.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_PRESSURE_PROFILE_H_
#define PLIMSOLL_POLICY_PRESSURE_PROFILE_H_

#include <optional>
#include <vector>

#include "policy/policy.h"

namespace plimsoll::policy {

struct ProfileParams {
  // <= 0: off. 2: the least of several readings at larger sizes is the reference, and a reader's
  // pace wanders with its neighbours' (on the lab's guests 0.16 of its median between 5 s disk
  // readings, and its first reading under 0.8 of it in 15 runs of 21): at 1.5 a calm streaming
  // guest read as pressured (docs/policy.md "`pressure_profile`").
  double ratio = 2;
  double bucket_fraction = 0.05;
  double forget_seconds = 600;
};

// One measurement of the three signals (any may be absent).
struct PressureReading {
  std::optional<double> stall_pct;
  std::optional<double> refault_bytes_per_s;
  std::optional<double> disk_bytes_per_s;
};

struct ProfileMemory {
  struct Bucket {
    PressureReading reading;
    double at_s = 0;
  };
  std::vector<Bucket> buckets;  // index: size / (bucket_fraction * ceiling); empty: never measured
};

// Per signal, the least reading measured at a larger size than `size_bytes` within
// forget_seconds, which the excess is taken against; absent when there is none (every signal
// absent when the profile is off).
PressureReading ReferencePressure(const ProfileMemory& memory, double size_bytes,
                                  double ceiling_bytes, double now_s, const ProfileParams& params);

// The excess pressure at `size_bytes` for a guest of ceiling `ceiling_bytes` (see the file
// comment), without recording `reading`.
PressureReading ExcessPressure(const ProfileMemory& memory, double size_bytes, double ceiling_bytes,
                               const PressureReading& reading, double now_s,
                               const ProfileParams& params);

// Records a measured `reading` at `size_bytes`, and forgets readings older than forget_seconds.
void RecordPressure(ProfileMemory* memory, double size_bytes, double ceiling_bytes,
                    const PressureReading& reading, double now_s, const ProfileParams& params);

// Forgets the disk read rates under `bytes_per_s` (the other signals stay): against them a reader
// reading at ratio * bytes_per_s looks pressured, and its growth showed that pace is not the
// size's doing.
void ForgetDiskReadsBelow(ProfileMemory* memory, double bytes_per_s);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_PRESSURE_PROFILE_H_
