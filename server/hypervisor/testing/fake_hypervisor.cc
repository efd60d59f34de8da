#include "server/hypervisor/testing/fake_hypervisor.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plimsoll::hypervisor {
namespace {

constexpr int64_t kKiB = 1024;

// Deliveries in progress on this thread: SetEventCallback from inside a callback must not wait
// for the delivery it is part of.
thread_local int tls_delivering = 0;

bool IsActive(DomainRunState state) {
  return state == DomainRunState::kRunning || state == DomainRunState::kPaused;
}

}  // namespace

FakeHypervisor::FakeHypervisor(Options options) : options_(options) {}

std::optional<absl::Status> FakeHypervisor::TakeFailureLocked(Method method) {
  auto it = failures_.find(method);
  if (it == failures_.end() || it->second.empty()) return std::nullopt;
  absl::Status s = std::move(it->second.front());
  it->second.pop_front();
  // Like the real one: UNAVAILABLE means the connection is gone.
  if (absl::IsUnavailable(s)) connected_ = false;
  return s;
}

absl::Status FakeHypervisor::EnterLocked(Method method) {
  ++call_counts_[method];
  if (std::optional<absl::Status> failure = TakeFailureLocked(method)) return *failure;
  if (!connected_) return absl::UnavailableError("fake hypervisor: not connected");
  return absl::OkStatus();
}

FakeHypervisor::Domain* FakeHypervisor::FindLocked(const std::string& uuid) {
  auto it = domains_.find(uuid);
  return it == domains_.end() ? nullptr : &it->second;
}

const FakeHypervisor::Domain* FakeHypervisor::FindLocked(const std::string& uuid) const {
  auto it = domains_.find(uuid);
  return it == domains_.end() ? nullptr : &it->second;
}

absl::Status FakeHypervisor::Connect() {
  absl::MutexLock l(&mu_);
  ++call_counts_[Method::kConnect];
  if (std::optional<absl::Status> failure = TakeFailureLocked(Method::kConnect)) {
    connected_ = false;
    return *failure;
  }
  connected_ = true;
  return absl::OkStatus();
}

bool FakeHypervisor::IsConnected() const {
  absl::MutexLock l(&mu_);
  return connected_;
}

absl::StatusOr<std::vector<DomainInfo>> FakeHypervisor::ListActiveDomains() {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kListActiveDomains); !s.ok()) return s;
  std::vector<DomainInfo> out;
  for (const auto& [uuid, d] : domains_) {
    if (IsActive(d.info.state)) out.push_back(d.info);
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> FakeHypervisor::GetBalloonStats(
    const std::vector<std::string>& uuids) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kGetBalloonStats); !s.ok()) return s;
  absl::flat_hash_map<std::string, BalloonStats> out;
  for (const std::string& uuid : uuids) {
    const Domain* d = FindLocked(uuid);
    if (d != nullptr && IsActive(d->info.state)) out[uuid] = d->stats;
  }
  return out;
}

absl::StatusOr<DomainSurvey> FakeHypervisor::SurveyDomains(bool with_block_stats) {
  {
    absl::MutexLock l(&mu_);
    survey_block_stats_.push_back(with_block_stats);
  }
  absl::StatusOr<DomainSurvey> survey = Hypervisor::SurveyDomains(with_block_stats);
  if (survey.ok() && !with_block_stats) {
    survey->block_stats_read = false;
    for (auto& [uuid, stats] : survey->stats) {
      stats.disk_read_bytes.reset();
      stats.disk_read_requests.reset();
    }
  }
  return survey;
}

std::vector<bool> FakeHypervisor::survey_block_stats() const {
  absl::MutexLock l(&mu_);
  return survey_block_stats_;
}

absl::StatusOr<AgentChannelInfo> FakeHypervisor::GetAgentChannel(const std::string& uuid, const std::string& name) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kGetAgentChannel); !s.ok()) return s;
  const Domain* d = FindLocked(uuid);
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
  if (d->channel_name == name) return d->channel;
  AgentChannelInfo none;
  none.has_virtio_serial_controller = d->channel.has_virtio_serial_controller;
  none.vsock = d->channel.vsock;
  return none;
}

absl::Status FakeHypervisor::AttachAgentChannel(const std::string& uuid, const std::string& name,
                                                const std::string& socket_path) {
  absl::MutexLock l(&mu_);
  AttachCall call{uuid, name, socket_path, absl::OkStatus()};
  call.result = EnterLocked(Method::kAttachAgentChannel);
  Domain* d = call.result.ok() ? FindLocked(uuid) : nullptr;
  if (call.result.ok() && d == nullptr) call.result = absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
  if (call.result.ok() && !d->channel.has_virtio_serial_controller) {
    call.result = absl::FailedPreconditionError("fake: 'virtio-serial' controller cannot be hot plugged");
  }
  if (call.result.ok()) {
    d->channel_name = name;
    d->channel.found = true;
    d->channel.socket_path = socket_path;
    d->channel.problem.clear();
  }
  attach_calls_.push_back(call);
  return call.result;
}

void FakeHypervisor::SetAgentChannel(const std::string& uuid, const std::string& name, const AgentChannelInfo& info) {
  absl::MutexLock l(&mu_);
  Domain* d = FindLocked(uuid);
  if (d == nullptr) return;
  d->channel_name = name;
  const VsockDevice vsock = d->channel.vsock;
  d->channel = info;
  d->channel.vsock = vsock;
}

void FakeHypervisor::SetVsockCid(const std::string& uuid, uint32_t cid) {
  absl::MutexLock l(&mu_);
  Domain* d = FindLocked(uuid);
  if (d == nullptr) return;
  d->channel.vsock = VsockDevice{};
  if (cid == 0) return;
  d->channel.vsock.found = true;
  d->channel.vsock.cid = cid;
}

std::vector<FakeHypervisor::AttachCall> FakeHypervisor::attach_calls() const {
  absl::MutexLock l(&mu_);
  return attach_calls_;
}

absl::Status FakeHypervisor::EnableStats(const std::string& uuid, int period_seconds) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kEnableStats); !s.ok()) return s;
  if (period_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("fake: negative period ", period_seconds));
  }
  Domain* d = FindLocked(uuid);
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
  if (!IsActive(d->info.state)) {
    return absl::FailedPreconditionError(absl::StrCat("fake: domain not running uuid=", uuid));
  }
  d->stats_period = period_seconds;
  return absl::OkStatus();
}

bool FakeHypervisor::Unblocked(BlockWait* w) { return w->self->blocks_.count(*w->uuid) == 0; }

absl::Status FakeHypervisor::SetBalloonTarget(const std::string& uuid, int64_t bytes) {
  bool emit = false;
  DomainEvent event;
  absl::Status result;
  {
    absl::MutexLock l(&mu_);
    if (auto it = blocks_.find(uuid); it != blocks_.end()) {
      // Await releases mu_ while it waits: the rest of the fake goes on meanwhile.
      ++blocked_;
      BlockWait w{this, &uuid};
      mu_.AwaitWithTimeout(absl::Condition(&FakeHypervisor::Unblocked, &w), it->second);
      --blocked_;
    }
    result = EnterLocked(Method::kSetBalloonTarget);
    const int64_t rounded = bytes / kKiB * kKiB;
    Domain* d = FindLocked(uuid);
    if (!result.ok()) {
      // Scripted failure or disconnected: recorded below as it is.
    } else if (bytes < kKiB) {
      result = absl::InvalidArgumentError(absl::StrCat("fake: target below 1 KiB: ", bytes));
    } else if (d == nullptr) {
      result = absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
    } else if (!IsActive(d->info.state)) {
      result = absl::FailedPreconditionError(absl::StrCat("fake: domain not running uuid=", uuid));
    } else if (rounded > d->info.max_bytes) {
      result = absl::InvalidArgumentError(absl::StrCat(
          "fake: cannot set memory higher than max memory: ", rounded, " > ", d->info.max_bytes));
    } else {
      d->last_target = rounded;
      if (options_.balloon_follows_target) {
        d->info.current_bytes = rounded;
        d->stats.actual_bytes = rounded;
        if (options_.emit_balloon_events) {
          emit = true;
          event.kind = DomainEvent::Kind::kBalloonChange;
          event.uuid = uuid;
          event.name = d->info.name;
          event.balloon_bytes = rounded;
        }
      }
    }
    target_calls_.push_back({uuid, bytes, result});
  }
  if (emit) EmitEvent(event);
  return result;
}

absl::StatusOr<std::string> FakeHypervisor::ActiveJob(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kActiveJob); !s.ok()) return s;
  const Domain* d = FindLocked(uuid);
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
  return d->job;
}

absl::StatusOr<BalloonPressure> FakeHypervisor::ReadBalloonPressure(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = EnterLocked(Method::kReadBalloonPressure); !s.ok()) return s;
  const Domain* d = FindLocked(uuid);
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("fake: no domain uuid=", uuid));
  return d->pressure;
}

void FakeHypervisor::SetBalloonPressure(const std::string& uuid, absl::StatusOr<BalloonPressure> pressure) {
  absl::MutexLock l(&mu_);
  if (Domain* d = FindLocked(uuid)) d->pressure = std::move(pressure);
}

void FakeHypervisor::SetActiveJob(const std::string& uuid, const std::string& job) {
  absl::MutexLock l(&mu_);
  if (Domain* d = FindLocked(uuid)) d->job = job;
}

void FakeHypervisor::BlockSetTarget(const std::string& uuid, absl::Duration up_to) {
  absl::MutexLock l(&mu_);
  blocks_[uuid] = up_to;
}

void FakeHypervisor::UnblockSetTarget(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  blocks_.erase(uuid);
}

int FakeHypervisor::blocked_set_target_calls() const {
  absl::MutexLock l(&mu_);
  return blocked_;
}

void FakeHypervisor::SetEventCallback(std::function<void(const DomainEvent&)> callback) {
  absl::MutexLock l(&mu_);
  callback_ =
      callback
          ? std::make_shared<const std::function<void(const DomainEvent&)>>(std::move(callback))
          : nullptr;
  // The contract (hypervisor.h): deliveries to the old callback on other threads are over when
  // this returns. A callback that replaces itself cannot wait for its own delivery.
  if (tls_delivering == 0) mu_.Await(absl::Condition(this, &FakeHypervisor::NoneInFlightLocked));
}

bool FakeHypervisor::NoneInFlightLocked() const { return in_flight_ == 0; }

void FakeHypervisor::AddDomain(const DomainInfo& info) {
  absl::MutexLock l(&mu_);
  Domain d;
  d.info = info;
  d.stats.actual_bytes = info.current_bytes;
  domains_[info.uuid] = std::move(d);
}

void FakeHypervisor::AddDomain(const std::string& uuid, const std::string& name, int64_t max_bytes,
                               int64_t current_bytes) {
  DomainInfo info;
  info.uuid = uuid;
  info.name = name;
  info.state = DomainRunState::kRunning;
  info.max_bytes = max_bytes;
  info.current_bytes = current_bytes;
  AddDomain(info);
}

void FakeHypervisor::RemoveDomain(const std::string& uuid) {
  absl::MutexLock l(&mu_);
  domains_.erase(uuid);
}

void FakeHypervisor::SetFreePageReporting(const std::string& uuid, std::optional<bool> on) {
  absl::MutexLock l(&mu_);
  if (Domain* d = FindLocked(uuid)) d->info.free_page_reporting = on;
}

void FakeHypervisor::SetState(const std::string& uuid, DomainRunState state) {
  absl::MutexLock l(&mu_);
  if (Domain* d = FindLocked(uuid)) d->info.state = state;
}

void FakeHypervisor::SetActualBytes(const std::string& uuid, int64_t bytes) {
  absl::MutexLock l(&mu_);
  if (Domain* d = FindLocked(uuid)) {
    d->info.current_bytes = bytes;
    d->stats.actual_bytes = bytes;
  }
}

void FakeHypervisor::SetStats(const std::string& uuid, const BalloonStats& stats) {
  absl::MutexLock l(&mu_);
  Domain* d = FindLocked(uuid);
  if (d == nullptr) return;
  d->stats = stats;
  if (stats.actual_bytes.has_value()) {
    d->info.current_bytes = *stats.actual_bytes;
  } else {
    d->stats.actual_bytes = d->info.current_bytes;
  }
}

std::optional<DomainInfo> FakeHypervisor::GetDomain(const std::string& uuid) const {
  absl::MutexLock l(&mu_);
  const Domain* d = FindLocked(uuid);
  if (d == nullptr) return std::nullopt;
  return d->info;
}

std::vector<FakeHypervisor::TargetCall> FakeHypervisor::target_calls() const {
  absl::MutexLock l(&mu_);
  return target_calls_;
}

void FakeHypervisor::ClearTargetCalls() {
  absl::MutexLock l(&mu_);
  target_calls_.clear();
}

std::optional<int64_t> FakeHypervisor::LastTarget(const std::string& uuid) const {
  absl::MutexLock l(&mu_);
  const Domain* d = FindLocked(uuid);
  return d == nullptr ? std::nullopt : d->last_target;
}

std::optional<int> FakeHypervisor::StatsPeriod(const std::string& uuid) const {
  absl::MutexLock l(&mu_);
  const Domain* d = FindLocked(uuid);
  return d == nullptr ? std::nullopt : d->stats_period;
}

int FakeHypervisor::call_count(Method method) const {
  absl::MutexLock l(&mu_);
  auto it = call_counts_.find(method);
  return it == call_counts_.end() ? 0 : it->second;
}

void FakeHypervisor::FailNext(Method method, absl::Status status, int times) {
  if (status.ok()) return;
  absl::MutexLock l(&mu_);
  for (int i = 0; i < times; ++i) failures_[method].push_back(status);
}

void FakeHypervisor::SimulateDisconnect() {
  absl::MutexLock l(&mu_);
  connected_ = false;
}

void FakeHypervisor::EmitEvent(const DomainEvent& event) {
  std::shared_ptr<const std::function<void(const DomainEvent&)>> callback;
  {
    absl::MutexLock l(&mu_);
    callback = callback_;
    if (callback == nullptr) return;
    ++in_flight_;
  }
  ++tls_delivering;
  (*callback)(event);
  --tls_delivering;
  absl::MutexLock l(&mu_);
  --in_flight_;
}

}  // namespace plimsoll::hypervisor
