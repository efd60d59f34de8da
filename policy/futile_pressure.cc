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
    if (x > p.ratio * *m->level) return x;
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
  if (std::fabs(z.actual_bytes - m->size_bytes) > z.step_bytes / 2) {
    m->size_bytes = z.actual_bytes;
    m->sum = 0;
    m->count = 0;
    m->highest = 0;
  }
  if (now_s - z.landed_s < kFutileSettleSeconds) return x;
  m->sum += x;
  m->highest = std::max(m->highest, x);
  ++m->count;
  const bool at_ceiling = z.actual_bytes >= z.ceiling_bytes - z.tolerance_bytes;
  const bool grown = z.actual_bytes >= *m->start_bytes + z.step_bytes;
  const double mean = m->sum / m->count;
  const double given = z.actual_bytes - *m->start_bytes;
  const bool unused = z.working_set_bytes - m->start_working_set_bytes <= std::max(z.step_bytes, given / 2) &&
                      z.working_set_bytes < z.actual_bytes - z.step_bytes;
  if (m->count >= 2 && unused && (at_ceiling || (grown && mean >= m->start_pressure / p.ratio))) {
    m->level = std::max(m->start_pressure, m->highest);
    m->verdict_s = now_s;
    return 0;
  }
  return x;
}

}  // namespace plimsoll::policy
