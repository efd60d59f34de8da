// The control loop: one tick is Collect -> Snapshot -> Decide -> Apply -> Publish.
// Only Collect (hypervisor, host /proc) and Apply (actuator) touch the world;
// Decide is the policy's pure function. The loop runs on one thread; other
// threads only call Wake(), Stop() and Published().
#ifndef PLIMSOLL_SERVER_CONTROL_LOOP_H_
#define PLIMSOLL_SERVER_CONTROL_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "plimsoll/v1/control.pb.h"
#include "policy/policy.h"
#include "server/actuator.h"
#include "server/agent/agent_store.h"
#include "server/guest_tracker.h"
#include "server/host/host_reader.h"
#include "server/hypervisor/hypervisor.h"
#include "server/metrics.h"

namespace plimsoll::server {

struct LoopOptions {
  absl::Duration tick = absl::Seconds(5);
  int stats_period_seconds = 2;
  GuestRules rules;
  int64_t host_reserve_bytes = 1LL << 30;
  std::optional<int64_t> guest_memory_budget_bytes;
  // Reconnect backoff after the libvirt connection is lost.
  absl::Duration reconnect_min = absl::Seconds(1);
  absl::Duration reconnect_max = absl::Seconds(30);
};

// Dependencies are borrowed and must outlive the loop. `metrics` and `agents` may be null.
struct LoopDeps {
  hypervisor::Hypervisor* hypervisor = nullptr;
  host::HostReader* host = nullptr;
  const policy::Policy* policy = nullptr;
  Actuator* actuator = nullptr;
  Clock* clock = nullptr;
  Metrics* metrics = nullptr;
  // Latest validated in-guest agent reports; null when the agent channel is off.
  agent::AgentStore* agents = nullptr;
};

class ControlLoop {
 public:
  ControlLoop(LoopDeps deps, LoopOptions options);

  // Runs one tick now. Not thread-safe against itself: call from one thread.
  void Tick();

  // Ticks every options.tick until Stop(); Wake() starts the next tick early.
  void Run();
  void Stop();
  // Asks for an early tick (a guest started or stopped). Thread-safe, cheap.
  void Wake();

  // The latest published view: immutable, swapped once per tick. Thread-safe.
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> Published() const;

  int64_t ticks() const { return tick_; }

 private:
  bool EnsureConnected(absl::Time now);
  void Collect(absl::Time now, bool* collected);
  std::optional<policy::Snapshot> BuildSnapshot(absl::Time now);
  void Apply(const policy::Snapshot& snapshot, const policy::Decisions& decisions, absl::Time now);
  void Publish(absl::Time now);
  // Fills a view with the guest's fresh agent signals (nothing when there are none).
  void AddAgentSignals(policy::GuestView& v) const;
  void PublishAgent(const std::string& uuid, plimsoll::v1::Guest* out) const;
  void CountError(const std::string& operation);

  LoopDeps deps_;
  LoopOptions options_;
  GuestTracker tracker_;
  policy::PolicyState policy_state_;
  std::atomic<int64_t> tick_{0};

  bool was_connected_ = false;
  absl::Duration reconnect_backoff_;
  absl::Time next_connect_attempt_ = absl::InfinitePast();
  std::optional<host::HostMemory> last_host_;
  // When and what was last logged per guest, so unchanged holds are not logged every tick.
  struct LoggedDecision {
    plimsoll::v1::Direction direction = plimsoll::v1::DIRECTION_UNSPECIFIED;
    absl::Time at = absl::InfinitePast();
  };
  absl::flat_hash_map<std::string, LoggedDecision> last_logged_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> published_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// Budget for all guests: min(MemTotal - reserve, cap), never negative.
int64_t GuestBudget(int64_t mem_total_bytes, int64_t reserve_bytes, std::optional<int64_t> cap);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_CONTROL_LOOP_H_
