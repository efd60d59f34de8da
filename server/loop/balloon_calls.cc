#include "server/loop/balloon_calls.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace plimsoll::server {

const char* BalloonCallKindName(BalloonCalls::Kind kind) {
  switch (kind) {
    case BalloonCalls::Kind::kSetTarget:
      return "set_target";
    case BalloonCalls::Kind::kEnableStats:
      return "enable_stats";
  }
  return "unknown";
}

BalloonCalls::BalloonCalls(Options options, Clock* clock) : options_(options), clock_(clock) {
  workers_.reserve(options_.workers);
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back(&BalloonCalls::Work, this);
}

BalloonCalls::~BalloonCalls() {
  std::vector<std::string> waiting;
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    in_pool_ -= static_cast<int>(queue_.size());
    queue_.clear();  // never started: nothing to wait for
    for (const auto& [seq, uuid] : running_) waiting.push_back(uuid);
  }
  if (!waiting.empty()) {
    PLOG_WARNING << "shutdown waits for " << waiting.size() << " balloon call(s) still running in libvirt, uuid="
                 << absl::StrJoin(waiting, ",");
  }
  for (std::thread& t : workers_) t.join();
}

BalloonCalls::Submitted BalloonCalls::Submit(Call call, std::function<absl::Status()> run) {
  if (pending_.contains(call.uuid)) return Submitted::kBusy;
  call.submitted_at = clock_->Now();
  const uint64_t seq = ++next_seq_;
  if (options_.workers == 0) {
    absl::Status s = run();
    absl::MutexLock l(&mu_);
    done_.push_back({seq, {std::move(call), std::move(s)}});
    return Submitted::kAccepted;
  }
  {
    absl::MutexLock l(&mu_);
    int& n = per_domain_[call.uuid];
    if (n >= kMaxPerDomain) return Submitted::kBusy;
    if (static_cast<int>(queue_.size()) >= kQueueLimit) {
      if (n == 0) per_domain_.erase(call.uuid);
      return Submitted::kPoolFull;
    }
    call.behind_another = n > 0;
    ++n;
    ++in_pool_;
    queue_.push_back({seq, call, std::move(run)});
  }
  std::string uuid = call.uuid;
  pending_[uuid] = {seq, std::move(call)};
  return Submitted::kAccepted;
}

void BalloonCalls::Work() {
  while (true) {
    Task task;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(this, &BalloonCalls::HasWorkOrStop));
      if (stop_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      if (given_up_.erase(task.seq) > 0) {
        // Timed out before it started: running it now would only move the balloon to a target
        // the loop stopped expecting.
        if (--per_domain_[task.call.uuid] == 0) per_domain_.erase(task.call.uuid);
        --in_pool_;
        Result r{std::move(task.call), absl::CancelledError("timed out in the queue; never run")};
        r.late = true;
        done_.push_back({task.seq, std::move(r)});
        continue;
      }
      running_.emplace(task.seq, task.call.uuid);
    }
    absl::Status s = task.run();
    absl::MutexLock l(&mu_);
    running_.erase(task.seq);
    if (--per_domain_[task.call.uuid] == 0) per_domain_.erase(task.call.uuid);
    --in_pool_;
    Result r{std::move(task.call), std::move(s)};
    r.late = given_up_.erase(task.seq) > 0;
    done_.push_back({task.seq, std::move(r)});
  }
}

const BalloonCalls::Call* BalloonCalls::Pending(const std::string& uuid) const {
  // The loop asks for every guest each tick, and most ticks have no call pending: no hash then.
  if (pending_.empty()) return nullptr;
  auto it = pending_.find(uuid);
  return it == pending_.end() ? nullptr : &it->second.call;
}

std::vector<BalloonCalls::Result> BalloonCalls::Take() {
  std::vector<Done> done;
  {
    absl::MutexLock l(&mu_);
    done.swap(done_);
  }
  std::vector<Result> out;
  out.reserve(done.size());
  for (Done& d : done) {
    if (!d.result.late && !pending_.empty()) {  // with workers = 0 nothing is ever pending
      auto it = pending_.find(d.result.call.uuid);
      if (it != pending_.end() && it->second.seq == d.seq) pending_.erase(it);
    }
    out.push_back(std::move(d.result));
  }
  if (pending_.empty()) return out;
  const absl::Time now = clock_->Now();
  std::vector<uint64_t> given_up;
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto here = it++;
    if (now - here->second.call.submitted_at < options_.deadline) continue;
    Result r{here->second.call,
             absl::DeadlineExceededError(absl::StrCat(
                 BalloonCallKindName(here->second.call.kind), " did not return within ",
                 absl::FormatDuration(options_.deadline), " (balloon_call_deadline); its outcome is unknown"))};
    r.timed_out = true;
    given_up.push_back(here->second.seq);
    out.push_back(std::move(r));
    pending_.erase(here);
  }
  if (!given_up.empty()) {
    absl::MutexLock l(&mu_);
    // A call that returned since the swap above is in done_ already, not late: Take reports it
    // next time, after this timeout. Only calls still in the pool can be given up.
    for (uint64_t seq : given_up) {
      bool in_pool = running_.contains(seq);
      for (const Task& t : queue_) in_pool |= t.seq == seq;
      if (in_pool) given_up_.insert(seq);
    }
  }
  return out;
}

int BalloonCalls::in_pool() const {
  absl::MutexLock l(&mu_);
  return in_pool_;
}

}  // namespace plimsoll::server
