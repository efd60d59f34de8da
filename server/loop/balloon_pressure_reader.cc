#include "server/loop/balloon_pressure_reader.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace plimsoll::server {

BalloonPressureReader::BalloonPressureReader(hypervisor::Hypervisor* hypervisor, Options options,
                                             std::function<void()> on_answer)
    : hypervisor_(hypervisor), options_(options), on_answer_(std::move(on_answer)) {
  if (options_.enabled && !options_.inline_reads) thread_ = std::thread([this] { Worker(); });
}

BalloonPressureReader::~BalloonPressureReader() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    queue_.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void BalloonPressureReader::Worker() {
  while (true) {
    Job job;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](BalloonPressureReader* r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return r->stop_ || !r->queue_.empty(); },
          this));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<hypervisor::BalloonPressure> result = hypervisor_->ReadBalloonPressure(job.uuid);
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      answers_.push_back({std::move(job), std::move(result)});
    }
    if (on_answer_) on_answer_();
  }
}

void BalloonPressureReader::Reset() {
  monitor_available_ = true;
  memo_.clear();
  // Answers of the old connection still in flight are applied to fresh memos: harmless, each is
  // a real reading of its guest.
}

void BalloonPressureReader::Apply(absl::Time now, Answer answer) {
  outstanding_.erase(answer.job.uuid);
  const absl::StatusOr<hypervisor::BalloonPressure>& p = answer.result;
  if (absl::IsUnimplemented(p.status())) {
    if (monitor_available_) PLOG_INFO << "balloon pressure counters not read: " << p.status().message();
    monitor_available_ = false;
    return;
  }
  auto it = memo_.find(answer.job.uuid);
  if (it == memo_.end()) return;  // forgotten meanwhile
  Memo& m = it->second;
  const std::string& name = answer.job.name;
  if (p.ok() && p->any()) {
    ++counts_.read;
    if (m.failure_logged) PLOG_INFO << "balloon pressure counters read again guest=" << name;
    m.failure_logged = false;
    m.backoff = absl::ZeroDuration();
    m.pressure = *p;
    m.asked_at_update = answer.job.update;
  } else if (p.ok() && p->last_update.value_or(0) <= 0) {
    // The guest's driver has not sent stats to QEMU yet: asked again at its next report.
    m.asked_at_update = answer.job.update;
  } else if (p.ok() || absl::IsNotFound(p.status())) {
    ++counts_.lacking;
    if (!m.lacking_logged) {
      PLOG_INFO << "balloon pressure counters absent guest=" << name << " ("
                << (p.ok() ? "QEMU < 9.2 or guest kernel < 6.12" : p.status().message())
                << "); asked again every " << absl::FormatDuration(options_.retry_after);
      m.lacking_logged = true;
    }
    m.pressure = {};
    m.asked_at_update = answer.job.update;
    m.retry_at = now + options_.retry_after;
  } else {
    ++counts_.failed;
    m.backoff = std::min(options_.retry_after,
                         m.backoff == absl::ZeroDuration() ? options_.failure_backoff : 2 * m.backoff);
    m.retry_at = now + m.backoff;
    if (!m.failure_logged) {
      PLOG_WARNING << "reading balloon pressure counters failed guest=" << name << ": " << p.status().message()
                   << "; retried with backoff from " << absl::FormatDuration(m.backoff);
      m.failure_logged = true;
    }
  }
}

void BalloonPressureReader::Read(absl::Time now, hypervisor::DomainSurvey* survey) {
  if (!options_.enabled) return;
  std::vector<Answer> answers;
  {
    absl::MutexLock l(&mu_);
    answers.swap(answers_);
  }
  for (Answer& a : answers) Apply(now, std::move(a));
  if (!monitor_available_) return;
  std::vector<Job> jobs;
  for (const hypervisor::DomainInfo& d : survey->domains) {
    if (d.state != hypervisor::DomainRunState::kRunning) continue;
    auto rec = survey->stats.find(d.uuid);
    // A partial record (a domain busy with a job) keeps what the tracker had, counters included;
    // a guest that has not reported has nothing in QEMU yet.
    if (rec == survey->stats.end() || rec->second.last_update.value_or(0) <= 0) continue;
    Memo& m = memo_[d.uuid];
    rec->second.pressure = m.pressure;
    const int64_t update = *rec->second.last_update;
    if (outstanding_.contains(d.uuid) || m.asked_at_update == update || now < m.retry_at) continue;
    outstanding_.insert(d.uuid);
    jobs.push_back({d.uuid, d.name, update});
  }
  if (jobs.empty()) return;
  if (options_.inline_reads) {
    for (Job& j : jobs) {
      absl::StatusOr<hypervisor::BalloonPressure> r = hypervisor_->ReadBalloonPressure(j.uuid);
      const std::string uuid = j.uuid;
      Apply(now, {std::move(j), std::move(r)});
      if (!monitor_available_) break;
      if (auto rec = survey->stats.find(uuid); rec != survey->stats.end()) {
        if (auto m = memo_.find(uuid); m != memo_.end()) rec->second.pressure = m->second.pressure;
      }
    }
    outstanding_.clear();
    return;
  }
  absl::MutexLock l(&mu_);
  for (Job& j : jobs) queue_.push_back(std::move(j));
}

}  // namespace plimsoll::server
