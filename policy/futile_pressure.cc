#include "policy/futile_pressure.h"

#include <algorithm>
#include <cmath>

namespace plimsoll::policy {

double FilterFutile(double x, bool measured, const FutileSize& z, double now_s, double keep_s,
                    const FutileParams& p, FutileMemory* m) {
  if (p.ratio <= 0) return x;
  if (m->level.has_value() && now_s - m->verdict_s > keep_s) {
    *m = FutileMemory();  // measured again from here
  }
  if (m->level.has_value()) {
    const bool beyond = x > p.ratio * *m->level;
    // Not taken below the size the verdict was reached at, the guest is not squeezed: pressure
    // beyond the level there is the loop's own, read higher (a verdict reached as the reader
    // ramped up: the trio lab's stream guest, level 75-92 and then 300 for the rest of the run,
    // backed off on every report at its ceiling or where the budget left it, and was never
    // taken). The level rises to it; beyond it after a take, the take hurt, unless the budget
    // will not grow the guest either: then no size the host gives relieves more (a take of 38
    // MiB after a verdict at the ceiling held the same guest at 985 MiB for a run).
    if (beyond && measured && (z.actual_bytes >= m->verdict_bytes - z.tolerance_bytes || z.growth_denied)) {
      m->level = x;
      m->beyond = false;
      m->verdict_s = now_s;
      return 0;
    }
    // Beyond the futile level on two reports in a row: one PSI reading of a looping reader
    // swings to 100% and back (the trio lab: 200 between 40 and 95 at 550-1022 MiB).
    const bool was_beyond = m->beyond;
    m->beyond = beyond;
    if (beyond && was_beyond) return x;
    if (x >= 1) m->verdict_s = now_s;  // the futile pressure goes on: so does the verdict
    return 0;
  }
  if (!measured) return x;
  if (x < 1) {
    *m = FutileMemory();  // calm: the episode, if any, is over without a verdict
    return x;
  }
  if (!m->start_bytes.has_value()) {
    m->start_bytes = z.actual_bytes;
    m->start_pressure = x;
    m->start_working_set_bytes = z.working_set_bytes;
  }
  // The evidence is at any size grown by a step or more (or the ceiling), pooled: a guest still
  // being backed off moves before 10 s of readings exist at any one size (the trio lab's stream
  // guest climbed 580 -> 1022 MiB in nine moves and got its verdict only at the ceiling). The
  // settle time runs from the first landing there: the lag is of the squeeze at A0.
  const bool at_ceiling = z.actual_bytes >= z.ceiling_bytes - z.tolerance_bytes || z.growth_denied;
  const bool grown = z.actual_bytes >= *m->start_bytes + z.step_bytes;
  if (!at_ceiling && !grown) {
    m->grown_s.reset();
    m->sum = 0;
    m->count = 0;
    m->highest = 0;
    return x;
  }
  if (!m->grown_s.has_value()) m->grown_s = z.landed_s;
  if (now_s - *m->grown_s < kFutileSettleSeconds) return x;
  m->sum += x;
  m->highest = std::max(m->highest, x);
  ++m->count;
  const double mean = m->sum / m->count;
  const double given = z.actual_bytes - *m->start_bytes;
  const bool unused =
      z.working_set_bytes - m->start_working_set_bytes <= std::max(z.step_bytes, given / 2) &&
      z.working_set_bytes < z.actual_bytes - z.step_bytes;
  if (m->count >= 2 && unused && (at_ceiling || (grown && mean >= m->start_pressure / p.ratio))) {
    m->level = std::max(m->start_pressure, m->highest);
    m->verdict_s = now_s;
    m->verdict_bytes = z.actual_bytes;
    return 0;
  }
  return x;
}

}  // namespace plimsoll::policy
