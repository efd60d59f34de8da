#include "policy/burst_headroom.h"

#include <algorithm>

namespace plimsoll::policy {

double UpdateBurst(double hard_bytes, double now_s, const BurstParams& p, BurstMemory* m) {
  if (p.window_seconds <= 0) return 0;
  const double rise = m->hard_bytes.has_value() ? std::max(0.0, hard_bytes - *m->hard_bytes) : 0.0;
  m->hard_bytes = hard_bytes;
  if (rise >= m->burst_bytes || now_s - m->burst_s > p.window_seconds) {
    m->burst_bytes = rise;
    m->burst_s = now_s;
  }
  return m->burst_bytes;
}

}  // namespace plimsoll::policy
