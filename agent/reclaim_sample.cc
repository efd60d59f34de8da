#include "agent/reclaim_sample.h"

#include <algorithm>

namespace plimsoll::agent {

ReclaimSample MeasureReclaimSample(const v1::AgentReport& now, const v1::AgentReport* previous, absl::Duration span) {
  ReclaimSample s;
  const v1::GuestMeminfo& m = now.meminfo();
  if (m.has_mem_total_bytes()) s.mem_total_bytes = m.mem_total_bytes();
  if (m.has_mem_free_bytes()) s.mem_free_bytes = m.mem_free_bytes();
  if (m.has_active_file_bytes()) s.active_file_bytes = m.active_file_bytes();
  if (m.has_inactive_file_bytes()) s.inactive_file_bytes = m.inactive_file_bytes();
  const bool psi = now.has_memory_pressure() && now.memory_pressure().has_some();
  if (psi) s.psi_some_avg10 = now.memory_pressure().some().avg10();

  const double seconds = absl::ToDoubleSeconds(span);
  if (previous == nullptr || !(seconds > 0)) return s;
  const v1::GuestVmstat& a = previous->vmstat();
  const v1::GuestVmstat& b = now.vmstat();
  if (a.has_workingset_refault_file() && b.has_workingset_refault_file() &&
      b.workingset_refault_file() >= a.workingset_refault_file()) {
    s.file_refaults_per_second = static_cast<double>(b.workingset_refault_file() - a.workingset_refault_file()) / seconds;
  }
  // avg10 lags a stall that began a moment ago by seconds; the total's growth over the last
  // period does not, so a step never follows a stall the law could already see.
  if (psi && previous->has_memory_pressure() && previous->memory_pressure().has_some()) {
    const uint64_t before = previous->memory_pressure().some().total_us();
    const uint64_t after = now.memory_pressure().some().total_us();
    if (after >= before) {
      s.psi_some_recent_pct = std::min(100.0, static_cast<double>(after - before) / 1e6 / seconds * 100.0);
    }
  }
  return s;
}

}  // namespace plimsoll::agent
