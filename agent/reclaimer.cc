#include "agent/reclaimer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/reclaim_sample.h"
#include "common/log.h"

namespace plimsoll::agent {
namespace {

// The report carries at most this much of a decision's detail.
constexpr size_t kMaxDetailBytes = 200;

absl::Duration Since(absl::Time now, absl::Time then) {
  return then == absl::InfinitePast() ? absl::InfiniteDuration() : now - then;
}

// Reasons that only the host's next bounds can change: nothing to do until they arrive.
bool WaitsForHost(ReclaimReason r) {
  return r == ReclaimReason::kOffDisabled || r == ReclaimReason::kOffUnsupported || r == ReclaimReason::kNoBounds ||
         r == ReclaimReason::kBoundsExpired || r == ReclaimReason::kBoundsInvalid || r == ReclaimReason::kHostDisabled;
}

bool Active(ReclaimReason r) { return r == ReclaimReason::kStep || r == ReclaimReason::kRateLimit; }

uint64_t FileLru(const v1::AgentReport& r) {
  return r.meminfo().active_file_bytes() + r.meminfo().inactive_file_bytes();
}

// The decision before any tick, from what is known at construction.
ReclaimDecision Initial(const ReclaimerOptions& o, const std::string& off_detail, const ReclaimExecutor* executor) {
  if (!off_detail.empty()) return ReclaimDecision{ReclaimReason::kOffDisabled, 0, off_detail};
  if (executor == nullptr) return ReclaimDecision{ReclaimReason::kOffUnsupported, 0, o.unsupported_detail};
  // Said once at start: whether requests can say "page cache only" on this kernel.
  if (!executor->swappiness_probed()) {
    return ReclaimDecision{ReclaimReason::kNoBounds, 0,
                           absl::StrCat("file_only=unknown dry_run=", executor->dry_run(),
                                        " (the swappiness=0 probe was skipped: a dry run writes nothing)")};
  }
  return ReclaimDecision{ReclaimReason::kNoBounds, 0,
                         absl::StrCat("file_only=", executor->file_only(), " dry_run=", executor->dry_run())};
}

}  // namespace

std::string ReclaimOffDetail(const ReclaimerOptions& o) {
  if (!o.enabled) return "--reclaim=off";
  if (o.own.max_step_bytes == 0) return "--reclaim_max_step_mib=0: the agent's own step allows nothing";
  if (!(o.own.max_bytes_per_second > 0)) return "--reclaim_max_rate_mib=0: the agent's own rate allows nothing";
  return "";
}

Reclaimer::Reclaimer(ReclaimerOptions options, std::unique_ptr<ReclaimExecutor> executor, SampleSource* source,
                     Clock* clock, std::unique_ptr<Compactor> compactor)
    : options_(std::move(options)),
      off_detail_(ReclaimOffDetail(options_)),
      executor_(off_detail_.empty() ? std::move(executor) : nullptr),
      compactor_(executor_ != nullptr ? std::move(compactor) : nullptr),
      source_(source),
      clock_(clock),
      keeper_(options_.own),
      last_(Initial(options_, off_detail_, executor_.get())) {
  absl::MutexLock l(&mu_);
  LogDecision(last_, counters_);
}

void Reclaimer::OnHostBounds(const v1::ReclaimBounds& bounds) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  keeper_.Update(bounds, now);
  ++bounds_updates_;
}

ReclaimDecision Reclaimer::Tick() {
  const absl::Time now = clock_->Now();
  ReclaimSituation s;
  s.enabled = off_detail_.empty();
  s.supported = executor_ != nullptr;
  {
    absl::MutexLock l(&mu_);
    s.bounds = keeper_.Effective(now, &s.limits);
    s.since_step = Since(now, last_step_);
    s.since_partial = Since(now, last_partial_);
    s.since_error = Since(now, last_error_);
  }
  // The law reaches "no sample" only when everything before it allows a step: only then is
  // /proc worth reading.
  ReclaimDecision d = DecideReclaim(s, options_.law);
  if (d.reason == ReclaimReason::kOffDisabled || d.reason == ReclaimReason::kOffUnsupported) {
    d = Initial(options_, off_detail_, executor_.get());  // with the reason in words
  }
  v1::AgentReport sample;
  bool sampled = false;
  if (d.reason == ReclaimReason::kNoSample) {
    if (absl::Status st = source_->Read(&sample); !st.ok()) {
      d.detail = absl::StrCat("cannot read /proc: ", st.message());
    } else {
      sampled = true;
      // A base older than a few periods is from before an idle spell: a rate over it would
      // average the present away.
      const bool base_usable = previous_.has_value() && now - previous_at_ <= 3 * options_.period;
      s.sample = MeasureReclaimSample(sample, base_usable ? &*previous_ : nullptr, now - previous_at_);
      d = DecideReclaim(s, options_.law);
    }
  }
  if (sampled) {
    previous_ = sample;
    previous_at_ = now;
  } else {
    previous_.reset();
  }

  if (d.reason == ReclaimReason::kStep) {
    // An ack may have changed the bounds while /proc was read (off, or a higher keep): decide
    // again on the bounds in force now, with the same sample, so no write outlives them.
    {
      absl::MutexLock l(&mu_);
      s.bounds = keeper_.Effective(clock_->Now(), &s.limits);
    }
    d = DecideReclaim(s, options_.law);
  }
  while (!recent_steps_.empty() && now - recent_steps_.front().first > options_.pressure_blame_window) {
    recent_steps_.pop_front();
  }
  if (d.reason == ReclaimReason::kPressure && !recent_steps_.empty()) {
    uint64_t keep_file = 0;
    for (const auto& [at, file] : recent_steps_) keep_file = std::max(keep_file, file);
    recent_steps_.clear();
    absl::StrAppend(&d.detail, " learned_keep_file=", keep_file);
    absl::MutexLock l(&mu_);
    keeper_.HoldFileKeep(keep_file, now);
    PLOG_INFO << "reclaim took pages in use: pressure within "
              << absl::FormatDuration(options_.pressure_blame_window) << " of a step; the file LRU is kept at "
              << keep_file / (1 << 20) << " MiB for " << absl::FormatDuration(keeper_.own().keep_hold) << " ("
              << d.detail << ")";
  }
  std::optional<Counters> before_step;
  if (d.reason == ReclaimReason::kStep) {
    const absl::StatusOr<ReclaimOutcome> outcome = executor_->Reclaim(d.bytes);
    uint64_t achieved = 0;
    if (outcome.ok() && *outcome == ReclaimOutcome::kPartial) {
      // The kernel says only "less"; what it did take shows in the file LRU. Other activity
      // (a reader refilling the cache) can hide part of it, so this errs low.
      v1::AgentReport after;
      if (source_->Read(&after).ok()) {
        const uint64_t before = FileLru(sample), now_file = FileLru(after);
        achieved = std::min<uint64_t>(before > now_file ? before - now_file : 0, d.bytes);
      }
    } else if (outcome.ok() && !executor_->dry_run()) {
      achieved = d.bytes;
    }
    // A dry run or a failed write took nothing: pressure after it is not its doing.
    if (outcome.ok() && !executor_->dry_run()) recent_steps_.emplace_back(now, FileLru(sample));
    absl::MutexLock l(&mu_);
    before_step = counters_;
    last_step_ = now;
    last_step_keep_ = s.limits.keep_bytes;
    ++counters_.steps;
    counters_.requested += d.bytes;
    counters_.achieved += achieved;
    if (!outcome.ok()) {
      ++counters_.failed;
      last_error_ = now;
      if (last_error_text_ != outcome.status().ToString()) {
        last_error_text_ = outcome.status().ToString();
        PLOG_WARNING << "reclaim write failed, retrying in " << absl::FormatDuration(options_.law.error_backoff)
                     << ": " << last_error_text_;
      }
      d.detail = absl::StrCat(d.detail, " error=", outcome.status().message());
    } else if (*outcome == ReclaimOutcome::kPartial) {
      ++counters_.partial;
      last_partial_ = now;
      d.detail = absl::StrCat(d.detail, " partial achieved=", achieved);
    } else {
      last_error_text_.clear();
    }
  }
  MaybeCompact(now);
  absl::MutexLock l(&mu_);
  LogDecision(d, before_step.value_or(counters_));
  last_ = d;
  return d;
}

void Reclaimer::MaybeCompact(absl::Time now) {
  if (compactor_ == nullptr || executor_->dry_run()) return;
  uint64_t freed = 0;
  absl::Duration since_step;
  {
    absl::MutexLock l(&mu_);
    freed = counters_.achieved - achieved_at_compaction_;
    since_step = Since(now, last_step_);
  }
  if (!CompactionDue(freed, since_step, Since(now, last_compaction_), options_.compaction)) return;
  const absl::Time start = clock_->Now();
  const absl::Status st = compactor_->Compact();
  const absl::Duration took = clock_->Now() - start;
  last_compaction_ = now;
  absl::MutexLock l(&mu_);
  achieved_at_compaction_ = counters_.achieved;
  if (st.ok()) {
    ++compactions_;
    PLOG_INFO << "reclaim compacted: freed_since_last=" << freed / (1 << 20) << "MiB took=" << absl::FormatDuration(took);
  } else {
    ++failed_compactions_;
    PLOG_WARNING << "reclaim compaction failed: " << st;
  }
}

void Reclaimer::LogDecision(const ReclaimDecision& d, const Counters& before) {
  if (logged_.has_value() && (*logged_ == d.reason || (Active(*logged_) && Active(d.reason)))) return;
  const bool was_active = logged_.has_value() && Active(*logged_);
  logged_ = d.reason;
  if (Active(d.reason)) {
    phase_start_ = before;
    PLOG_INFO << "reclaim active: " << d.detail;
    return;
  }
  std::string line = absl::StrCat("reclaim ", ReclaimStateFor(d.reason) == v1::RECLAIM_STATE_OFF_DISABLED ||
                                                   ReclaimStateFor(d.reason) == v1::RECLAIM_STATE_OFF_UNSUPPORTED
                                               ? "off"
                                               : "paused",
                                   ": reason=", ReclaimReasonName(d.reason), d.detail.empty() ? "" : " ", d.detail);
  if (was_active) {
    const Counters& c = counters_;
    absl::StrAppend(&line, " phase_steps=", c.steps - phase_start_.steps,
                    " phase_requested=", c.requested - phase_start_.requested,
                    " phase_achieved=", c.achieved - phase_start_.achieved, " phase_partial=",
                    c.partial - phase_start_.partial, " phase_failed=", c.failed - phase_start_.failed,
                    absl::StrFormat(" last_step_keep=%.1fMiB", static_cast<double>(last_step_keep_) / (1 << 20)));
  }
  PLOG_INFO << line;
}

void Reclaimer::Run() {
  if (executor_ == nullptr) return;
  while (true) {
    uint64_t seen_updates = 0;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      seen_updates = bounds_updates_;
    }
    const ReclaimDecision d = Tick();
    const bool idle = WaitsForHost(d.reason);
    absl::MutexLock l(&mu_);
    // Idle, only new bounds (or Stop) are worth a tick; bounds that arrived while this tick ran
    // end the wait at once.
    auto woken = [this, idle, seen_updates]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (idle && bounds_updates_ != seen_updates);
    };
    mu_.AwaitWithTimeout(absl::Condition(&woken), idle ? options_.idle_wait : options_.period);
  }
}

void Reclaimer::Stop() {
  absl::MutexLock l(&mu_);
  stopping_ = true;
}

void Reclaimer::FillReport(v1::ReclaimReport* out) {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  out->Clear();
  out->set_state(ReclaimStateFor(last_.reason));
  out->set_reason(std::string(ReclaimReasonName(last_.reason)));
  out->set_detail(last_.detail.substr(0, kMaxDetailBytes));
  out->set_counters_since_boottime_ns(options_.series_start_boottime_ns);
  out->set_requested_bytes(counters_.requested);
  out->set_achieved_bytes(counters_.achieved);
  out->set_steps(counters_.steps);
  out->set_partial_steps(counters_.partial);
  out->set_failed_steps(counters_.failed);
  out->set_file_only(executor_ != nullptr && executor_->file_only());
  out->set_dry_run(executor_ != nullptr && executor_->dry_run());
  ReclaimLimits limits;
  keeper_.Effective(now, &limits);
  out->set_keep_bytes(limits.keep_bytes);
  out->set_keep_file_bytes(limits.keep_file_bytes);
  out->set_compactions(compactions_);
  out->set_failed_compactions(failed_compactions_);
}

}  // namespace plimsoll::agent
