#include "server/loop/balloon_pressure_reader.h"

#include "absl/status/statusor.h"
#include "common/log.h"

namespace plimsoll::server {

void BalloonPressureReader::Reset() {
  monitor_available_ = true;
  memo_.clear();
}

void BalloonPressureReader::Read(absl::Time now, hypervisor::DomainSurvey* survey) {
  if (!options_.enabled || !monitor_available_) return;
  for (const hypervisor::DomainInfo& d : survey->domains) {
    if (d.state != hypervisor::DomainRunState::kRunning) continue;
    auto rec = survey->stats.find(d.uuid);
    // A partial record (a domain busy with a job) keeps what the tracker had, counters included.
    if (rec == survey->stats.end() || !rec->second.last_update.has_value()) continue;
    Memo& m = memo_[d.uuid];
    const int64_t update = *rec->second.last_update;
    if (m.asked_at_update == update || now < m.retry_at) {
      rec->second.pressure = m.pressure;
      continue;
    }
    absl::StatusOr<hypervisor::BalloonPressure> p = hypervisor_->ReadBalloonPressure(d.uuid);
    if (absl::IsUnimplemented(p.status())) {
      monitor_available_ = false;
      PLOG_INFO << "balloon pressure counters not read: " << p.status().message();
      return;
    }
    m.asked_at_update = update;
    if (p.ok() && p->any()) {
      ++counts_.read;
      m.pressure = *p;
      rec->second.pressure = *p;
    } else if (p.ok() || absl::IsNotFound(p.status())) {
      ++counts_.lacking;
      if (m.retry_at == absl::InfinitePast()) {
        PLOG_INFO << "balloon pressure counters absent guest=" << d.name << " ("
                  << (p.ok() ? "QEMU < 9.2 or guest kernel < 6.12" : p.status().message())
                  << "); asked again every " << absl::FormatDuration(options_.retry_after);
      }
      m.pressure = {};
      m.retry_at = now + options_.retry_after;
    } else {
      ++counts_.failed;
      m.asked_at_update.reset();  // asked again next tick
      PLOG_WARNING << "reading balloon pressure counters failed guest=" << d.name << ": " << p.status().message();
    }
  }
}

}  // namespace plimsoll::server
