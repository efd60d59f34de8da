// Component of the pagecache law (pagecache_law.h): pressure that memory does not relieve is
// not a reason to keep memory.
//
// A reader looping over a file larger than its guest refaults and stalls as much at any size
// (the trio lab's stream guest: 62 s of PSI stall in 150 s unconstrained, 62 s under the law at
// 600-880 MiB). By the plain targets it is always under pressure: the law backs off, the budget
// takes the memory back, and the guest is held at sizes that buy it nothing.
//
// The verdict needs the episode's first pressured reading x0 at size A0, and the mean x̄ of at
// least two measured readings at sizes the guest was grown to (at least one probe step above
// A0, or the ceiling, which no size exceeds), counted only from settle seconds after it first
// landed there (PSI's avg10 and a refault rate lag the move). Then
//   futile  when x̄ >= x0 / ratio          (growing it did not take off a third of the pressure)
//           and W - W0 <= max(s, (A - A0) / 2) (the memory given did not become working set)
//           and W < A - s                   (the guest holds memory beyond its working set)
// with W the law's working set. A size the budget will not grow (every guest backed off at once
// under a full budget: the trio lab's stream guest held at 711 MiB for a whole run, x = 300,
// W = 256 MiB) is evidence as the ceiling is: no size the host gives relieves more. The second condition tells a cache still refilling after a
// squeeze (its pressure lasts as long as the refill, hot size / disk rate, which may be minutes,
// and its working set grows with it: corpus seed2_010 g12_bursty, a 2.2 GiB hot set, whose
// stall went from 48 s to 756 s without it) from a loop that never hits (no working set).
//   level   ℓ = max(x0, the highest settled reading at the grown size)
// The level is the highest reading, not the mean: PSI readings of a looping reader swing (5-200
// on the trio lab at 420-1022 MiB), and a level at the mean backed it off on every high one.
// While the verdict holds the law sees x' = 0 unless x > ratio * ℓ on this report and the one
// before: only pressure beyond the futile level (the guest squeezed into a real shortage), and
// not one swing of a reading, backs off; at the size the verdict was reached at or above (not
// squeezed since), or where the budget will not grow the guest, a measured reading beyond it
// raises ℓ to it instead. The floor (hard
// demand + headroom) still holds. Pressure at the futile level (1 <= x <= ratio * ℓ) renews the
// verdict; keep_seconds without it and the verdict is dropped, the guest measured again (a
// verdict that lapsed while the loop went on cost the corpus 20-30% more reversals, each lapse
// one more backoff and squeeze). A measured calm reading ends an episode that has no verdict yet.
//
// Switched off by ratio <= 0.
//
// Pure functions, thread-safe.
#ifndef PLIMSOLL_POLICY_FUTILE_PRESSURE_H_
#define PLIMSOLL_POLICY_FUTILE_PRESSURE_H_

#include <limits>
#include <optional>

namespace plimsoll::policy {

struct FutileParams {
  double ratio = 1.5;  // <= 0: off
};

struct FutileMemory {
  std::optional<double> start_bytes;  // A0
  double start_pressure = 0;          // x0
  double start_working_set_bytes = 0; // W0
  // When the balloon first landed at a grown size (or the ceiling) in this episode; the
  // readings below are those taken there since, kFutileSettleSeconds after it.
  std::optional<double> grown_s;
  double sum = 0;
  int count = 0;
  double highest = 0;  // the highest of them
  std::optional<double> level;        // ℓ, while a verdict holds
  double verdict_bytes = 0;           // the size the verdict was reached at
  bool beyond = false;                // the previous report was beyond ratio * ℓ
  double verdict_s = -std::numeric_limits<double>::infinity();
};

struct FutileSize {
  double actual_bytes = 0;
  double working_set_bytes = 0;  // the law's W
  double ceiling_bytes = 0;
  double step_bytes = 0;       // the law's probe step
  double tolerance_bytes = 0;  // within this of the ceiling is the ceiling
  double landed_s = 0;         // when the balloon landed at actual_bytes
  // The law asks for more than the balloon's target and the balloon landed there: the host's
  // budget gives it no more now, so no grown size can be measured (see below).
  bool growth_denied = false;
};

// Seconds after landing before a reading counts for the verdict: PSI avg10's window.
inline constexpr double kFutileSettleSeconds = 10;

// The pressure the law acts on for a new report of pressure `x` (x >= 1 is pressure) at
// `now_s`. `measured`: the report measured the current size (the balloon landed before it).
// Returns x when the component is off.
double FilterFutile(double x, bool measured, const FutileSize& size, double now_s,
                    double keep_seconds, const FutileParams& params, FutileMemory* memory);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_FUTILE_PRESSURE_H_
