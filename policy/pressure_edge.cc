#include "policy/pressure_edge.h"

#include <algorithm>
#include <cmath>

namespace plimsoll::policy {

void RecordCalm(double actual, double now_s, EdgeMemory* m) {
  m->calm_bytes = actual;
  m->calm_s = now_s;
}

double EdgeBackoff(double actual, double law_allowance, double step, bool first_in_episode,
                   double now_s, const EdgeParams& p, EdgeMemory* m) {
  if (p.window_seconds <= 0) return law_allowance;
  double allowance = law_allowance;
  if (first_in_episode && m->calm_bytes.has_value() && *m->calm_bytes > actual &&
      now_s - m->calm_s <= p.window_seconds) {
    allowance = std::min(law_allowance, *m->calm_bytes + step);
    m->limit_bytes = allowance;
  } else {
    m->limit_bytes = actual + step;
  }
  m->limit_until_s = now_s + p.window_seconds;
  return allowance;
}

double EdgeLimit(double now_s, const EdgeMemory& m) {
  return now_s < m.limit_until_s ? m.limit_bytes : -HUGE_VAL;
}

}  // namespace plimsoll::policy
