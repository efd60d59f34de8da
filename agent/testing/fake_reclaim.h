// Test fakes for the reclaimer: a guest whose /proc numbers a test sets (FakeGuestMemory, a
// SampleSource), and an executor that records its requests and, like the kernel, takes them out
// of that guest's file cache (FakeReclaimExecutor).
#ifndef PLIMSOLL_AGENT_TESTING_FAKE_RECLAIM_H_
#define PLIMSOLL_AGENT_TESTING_FAKE_RECLAIM_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/guest_reader.h"
#include "agent/reclaim_executor.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent::testing {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// A guest's memory as the agent reads it. Thread-safe.
class FakeGuestMemory : public SampleSource {
 public:
  FakeGuestMemory() {
    absl::MutexLock l(&mu_);
    mem_total_ = 1024 * kMiB;
    mem_free_ = 50 * kMiB;
    active_file_ = 100 * kMiB;
    inactive_file_ = 777 * kMiB;
  }

  absl::Status Read(v1::AgentReport* report) override {
    absl::MutexLock l(&mu_);
    if (!read_error_.ok()) return read_error_;
    report->clear_meminfo();
    report->clear_vmstat();
    report->clear_memory_pressure();
    v1::GuestMeminfo* m = report->mutable_meminfo();
    m->set_mem_total_bytes(mem_total_);
    m->set_mem_free_bytes(mem_free_);
    m->set_mem_available_bytes(mem_free_ + active_file_ + inactive_file_);
    m->set_cached_bytes(active_file_ + inactive_file_);
    m->set_active_file_bytes(active_file_);
    m->set_inactive_file_bytes(inactive_file_);
    m->set_anon_pages_bytes(mem_total_ - mem_free_ - active_file_ - inactive_file_);
    report->mutable_vmstat()->set_workingset_refault_file(refaults_);
    if (psi_) {
      v1::PsiLine* some = report->mutable_memory_pressure()->mutable_some();
      some->set_avg10(psi_avg10_);
      some->set_total_us(psi_total_us_);
    }
    ++reads_;
    return absl::OkStatus();
  }

  // Reclaim as the kernel does it: inactive file pages first, then active, each freed page
  // becoming free memory. Returns what it took.
  uint64_t TakeFile(uint64_t bytes) {
    absl::MutexLock l(&mu_);
    const uint64_t from_inactive = std::min(bytes, inactive_file_);
    inactive_file_ -= from_inactive;
    const uint64_t from_active = std::min(bytes - from_inactive, active_file_);
    active_file_ -= from_active;
    mem_free_ += from_inactive + from_active;
    return from_inactive + from_active;
  }

  // Sets the file LRU; MemFree stays as it is (SetFree).
  void SetFile(uint64_t active, uint64_t inactive) {
    absl::MutexLock l(&mu_);
    active_file_ = active;
    inactive_file_ = inactive;
  }
  void SetFree(uint64_t bytes) {
    absl::MutexLock l(&mu_);
    mem_free_ = bytes;
  }
  void AddRefaults(uint64_t n) {
    absl::MutexLock l(&mu_);
    refaults_ += n;
  }
  void SetPsi(double avg10) {
    absl::MutexLock l(&mu_);
    psi_ = true;
    psi_avg10_ = avg10;
  }
  void AddStall(absl::Duration d) {
    absl::MutexLock l(&mu_);
    psi_total_us_ += static_cast<uint64_t>(absl::ToInt64Microseconds(d));
  }
  void SetReadError(absl::Status s) {
    absl::MutexLock l(&mu_);
    read_error_ = std::move(s);
  }
  uint64_t file() const {
    absl::MutexLock l(&mu_);
    return active_file_ + inactive_file_;
  }
  int reads() const {
    absl::MutexLock l(&mu_);
    return reads_;
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t mem_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t mem_free_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t active_file_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t inactive_file_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refaults_ ABSL_GUARDED_BY(mu_) = 0;
  bool psi_ ABSL_GUARDED_BY(mu_) = true;
  double psi_avg10_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t psi_total_us_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status read_error_ ABSL_GUARDED_BY(mu_);
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records every request and answers from a script (kFull when the script is empty). A kFull
// answer takes the bytes out of `guest` (when set); a kPartial one takes what `partial_takes`
// says. Thread-safe.
class FakeReclaimExecutor : public ReclaimExecutor {
 public:
  explicit FakeReclaimExecutor(FakeGuestMemory* guest = nullptr, bool file_only = true)
      : guest_(guest), file_only_(file_only) {}

  absl::StatusOr<ReclaimOutcome> Reclaim(uint64_t bytes) override {
    absl::StatusOr<ReclaimOutcome> answer = ReclaimOutcome::kFull;
    uint64_t takes = bytes;
    {
      absl::MutexLock l(&mu_);
      requests_.push_back(bytes);
      if (!script_.empty()) {
        answer = script_.front().answer;
        takes = script_.front().takes;
        script_.pop_front();
        if (answer.ok() && *answer == ReclaimOutcome::kFull) takes = bytes;
      }
    }
    if (guest_ != nullptr && answer.ok()) guest_->TakeFile(takes);
    return answer;
  }
  bool file_only() const override { return file_only_; }

  // The next answer: kFull, kPartial having taken `takes` bytes, or an error.
  void Then(absl::StatusOr<ReclaimOutcome> answer, uint64_t takes = 0) {
    absl::MutexLock l(&mu_);
    script_.push_back({std::move(answer), takes});
  }
  std::vector<uint64_t> requests() const {
    absl::MutexLock l(&mu_);
    return requests_;
  }

 private:
  struct Scripted {
    absl::StatusOr<ReclaimOutcome> answer;
    uint64_t takes;
  };
  FakeGuestMemory* const guest_;
  const bool file_only_;
  mutable absl::Mutex mu_;
  std::deque<Scripted> script_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::agent::testing

#endif  // PLIMSOLL_AGENT_TESTING_FAKE_RECLAIM_H_
