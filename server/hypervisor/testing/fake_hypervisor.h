// The project's one fake Hypervisor: in-memory domains that tests script by hand.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_TESTING_FAKE_HYPERVISOR_H_
#define PLIMSOLL_SERVER_HYPERVISOR_TESTING_FAKE_HYPERVISOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

// Behaves like LibvirtHypervisor as far as the contract goes, with nothing moving
// on its own: a balloon's actual size changes only when the test says so
// (SetActualBytes, SetStats) or when Options::balloon_follows_target is set.
//
// Mirrors of the real thing: it starts disconnected (every call but Connect()
// is UNAVAILABLE until Connect()); SetBalloonTarget on an unknown uuid is
// NOT_FOUND, on a domain that is not running/paused FAILED_PRECONDITION, above
// the domain's max INVALID_ARGUMENT; targets are rounded down to whole KiB; an
// UNAVAILABLE failure (scripted or simulated) leaves it disconnected until the
// next Connect().
//
// Thread-safe. Events are delivered synchronously on the thread that calls
// EmitEvent() (or SetBalloonTarget() with emit_balloon_events), without any
// internal lock held, so the callback may call back into the fake. Like the
// real one, SetEventCallback waits for deliveries in progress on other threads.
class FakeHypervisor : public Hypervisor {
 public:
  struct Options {
    // SetBalloonTarget moves current/actual to the (KiB-rounded) target at once.
    bool balloon_follows_target = false;
    // With balloon_follows_target: also emit kBalloonChange, as QEMU does.
    bool emit_balloon_events = false;
  };

  enum class Method {
    kConnect,
    kListActiveDomains,
    kGetBalloonStats,
    kEnableStats,
    kSetBalloonTarget,
    kGetAgentChannel,
    kAttachAgentChannel,
    kActiveJob,
    kReadBalloonPressure
  };

  // One AttachAgentChannel call as it reached the fake.
  struct AttachCall {
    std::string uuid;
    std::string name;
    std::string socket_path;
    absl::Status result;
  };

  // One SetBalloonTarget call as it reached the fake (scripted failures included).
  struct TargetCall {
    std::string uuid;
    int64_t bytes = 0;
    absl::Status result;
  };

  FakeHypervisor() : FakeHypervisor(Options()) {}
  explicit FakeHypervisor(Options options);

  // ---- Hypervisor
  absl::Status Connect() override;
  bool IsConnected() const override;
  absl::StatusOr<std::vector<DomainInfo>> ListActiveDomains() override;
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) override;
  // The default survey (ListActiveDomains + GetBalloonStats), which leaves the disk reads out
  // when `with_block_stats` is false, as LibvirtHypervisor's bulk call does. Recorded.
  absl::StatusOr<DomainSurvey> SurveyDomains(bool with_block_stats) override;
  absl::Status EnableStats(const std::string& uuid, int period_seconds) override;
  // Waits first while the domain is blocked (BlockSetTarget), then behaves as described above.
  absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) override;
  // The job scripted by SetActiveJob ("" by default); NOT_FOUND for an unknown domain.
  absl::StatusOr<std::string> ActiveJob(const std::string& uuid) override;
  // The counters scripted by SetBalloonPressure; UNIMPLEMENTED (no monitor) where none were,
  // NOT_FOUND for an unknown domain.
  absl::StatusOr<BalloonPressure> ReadBalloonPressure(const std::string& uuid) override;
  void SetEventCallback(std::function<void(const DomainEvent&)> callback) override;
  // The domain's scripted channel (SetAgentChannel) when `name` is the one scripted; otherwise
  // not found, with the domain's controller flag. NOT_FOUND for an unknown domain.
  absl::StatusOr<AgentChannelInfo> GetAgentChannel(const std::string& uuid, const std::string& name) override;
  // Like libvirt: FAILED_PRECONDITION without a virtio-serial controller ("cannot be hot
  // plugged"); otherwise the domain then has the channel at `socket_path`. Recorded.
  absl::Status AttachAgentChannel(const std::string& uuid, const std::string& name,
                                  const std::string& socket_path) override;

  // ---- Domains
  // Adds or replaces a domain. Its stats start as {actual = current_bytes}.
  void AddDomain(const DomainInfo& info);
  // Convenience: a running domain.
  void AddDomain(const std::string& uuid, const std::string& name, int64_t max_bytes,
                 int64_t current_bytes);
  // Forgets the domain; later calls for it are NOT_FOUND. No event is emitted.
  void RemoveDomain(const std::string& uuid);
  // Only running and paused domains are listed and have stats.
  void SetState(const std::string& uuid, DomainRunState state);
  // What the domain's balloon device says of free page reporting, as its live XML would
  // (DomainInfo::free_page_reporting; nullopt: not known).
  void SetFreePageReporting(const std::string& uuid, std::optional<bool> on);
  // Moves the balloon: DomainInfo::current_bytes and BalloonStats::actual_bytes.
  void SetActualBytes(const std::string& uuid, int64_t bytes);
  // Replaces the stats. A set actual_bytes also moves current_bytes; an unset
  // one keeps the current size as actual.
  void SetStats(const std::string& uuid, const BalloonStats& stats);
  std::optional<DomainInfo> GetDomain(const std::string& uuid) const;
  // The domain's agent channel named `name` (info.found) or none (found = false), and its
  // controller flag.
  // (Keeps the domain's vsock device, which SetVsockCid sets.)
  void SetAgentChannel(const std::string& uuid, const std::string& name, const AgentChannelInfo& info);
  // The domain's vsock device with guest CID `cid` (0: no vsock device). GetAgentChannel returns
  // it whatever name it is asked for, as the live XML would.
  void SetVsockCid(const std::string& uuid, uint32_t cid);

  // A domain busy with a job, as ActiveJob reports it ("" for none).
  void SetActiveJob(const std::string& uuid, const std::string& job);
  // What ReadBalloonPressure answers for the domain from now on.
  void SetBalloonPressure(const std::string& uuid, absl::StatusOr<BalloonPressure> pressure);
  // A hung domain: SetBalloonTarget calls for `uuid` from now on wait (in real time, on the
  // caller's thread, holding no lock of the fake) until UnblockSetTarget(uuid) or until `up_to`
  // has passed, then take effect (or fail) as usual.
  void BlockSetTarget(const std::string& uuid, absl::Duration up_to);
  void UnblockSetTarget(const std::string& uuid);
  // SetBalloonTarget calls waiting in a block now.
  int blocked_set_target_calls() const;

  // ---- What the code under test did
  std::vector<TargetCall> target_calls() const;
  void ClearTargetCalls();
  std::vector<AttachCall> attach_calls() const;
  // SurveyDomains' with_block_stats, call by call.
  std::vector<bool> survey_block_stats() const;
  // Last successfully applied target (KiB-rounded bytes), if any.
  std::optional<int64_t> LastTarget(const std::string& uuid) const;
  // Period from the last successful EnableStats, if any.
  std::optional<int> StatsPeriod(const std::string& uuid) const;
  // Calls that reached the fake, failed or not.
  int call_count(Method method) const;

  // ---- Scripted trouble
  // The next `times` calls of `method` fail with `status` (queued after any
  // earlier script for that method). An UNAVAILABLE failure also disconnects.
  // An OK status is ignored.
  void FailNext(Method method, absl::Status status, int times = 1);
  // Drops the connection: IsConnected() false and calls UNAVAILABLE until a
  // successful Connect().
  void SimulateDisconnect();

  // ---- Events
  // Delivers `event` to the registered callback (if any) on this thread.
  void EmitEvent(const DomainEvent& event);

 private:
  struct Domain {
    DomainInfo info;
    BalloonStats stats;
    std::optional<int64_t> last_target;
    std::optional<int> stats_period;
    std::string channel_name;
    AgentChannelInfo channel;
    std::string job;
    absl::StatusOr<BalloonPressure> pressure = absl::UnimplementedError("fake: no QEMU monitor");
  };

  // Consumes one scripted failure for `method`, if any.
  std::optional<absl::Status> TakeFailureLocked(Method method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the call, then applies scripted failures and the connection check.
  absl::Status EnterLocked(Method method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Domain* FindLocked(const std::string& uuid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Domain* FindLocked(const std::string& uuid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct BlockWait {
    FakeHypervisor* self;
    const std::string* uuid;
  };
  static bool Unblocked(BlockWait* w) ABSL_NO_THREAD_SAFETY_ANALYSIS;  // under mu_

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Duration> blocks_ ABSL_GUARDED_BY(mu_);
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Domain> domains_ ABSL_GUARDED_BY(mu_);  // by uuid, for a stable order
  std::vector<TargetCall> target_calls_ ABSL_GUARDED_BY(mu_);
  std::vector<AttachCall> attach_calls_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> survey_block_stats_ ABSL_GUARDED_BY(mu_);
  std::map<Method, std::deque<absl::Status>> failures_ ABSL_GUARDED_BY(mu_);
  std::map<Method, int> call_counts_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::function<void(const DomainEvent&)>> callback_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // deliveries running now
  bool NoneInFlightLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_TESTING_FAKE_HYPERVISOR_H_
