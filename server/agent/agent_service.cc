#include "server/agent/agent_service.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "openssl/rand.h"

namespace plimsoll::server::agent {

// One Report stream. Reads and writes alternate, so at most one operation is outstanding and
// the reactions (OnReadDone, OnWriteDone) never run concurrently with each other; mu_ only
// orders them against Terminate(), which the sweeper and superseding streams call.
//
// Lock order: AgentService::mu_ before Stream::mu_. Reactions call into the service without
// holding mu_. The callback API never runs reactions inline in StartRead/StartWrite/Finish/
// TryCancel, so calling those under mu_ cannot re-enter it.
class AgentService::Stream final : public grpc::ServerBidiReactor<v1::SignedAgentReport, v1::AgentReply> {
 public:
  Stream(AgentService* service, grpc::CallbackServerContext* context, absl::Time now, StreamOrigin origin)
      : service_(service),
        context_(context),
        transport_(origin.transport),
        peer_(context->peer()),
        nonce_(NewNonce()),
        bucket_tokens_(service->options_.frame_burst),
        bucket_time_(now) {
    binding_.nonce = nonce_;
    binding_.proof_cache = &proof_cache_;
    binding_.channel_uuid = std::move(origin.channel_uuid);
  }

  // Sends the hello; its OnWriteDone starts the first read.
  void Start() {
    absl::MutexLock l(&mu_);
    if (finishing_) return;  // Terminate() ran between registration and Start()
    reply_.mutable_hello()->set_nonce(nonce_);
    write_pending_ = true;
    StartWrite(&reply_);
  }

  // Ends the stream from outside its reactions. The caller holds service_->mu_, so OnDone
  // (which needs it to unregister) cannot delete this meanwhile. Finish with a write
  // outstanding is not allowed, so that case cancels and lets OnWriteDone finish. Returns true
  // when this call started the ending.
  bool Terminate(grpc::Status status) {
    absl::MutexLock l(&mu_);
    if (finishing_ || cancel_requested_) return false;
    if (write_pending_) {
      cancel_requested_ = true;
      context_->TryCancel();
      return true;
    }
    finishing_ = true;
    Finish(std::move(status));
    return true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent closed or cancelled, or Terminate() finished us
      FinishOnce(grpc::Status::OK);
      return;
    }
    Outcome outcome = service_->HandleFrame(this, frame_);
    absl::MutexLock l(&mu_);
    if (finishing_) return;
    if (outcome.finish) {
      finishing_ = true;
      Finish(std::move(outcome.status));
      return;
    }
    reply_.Clear();
    *reply_.mutable_ack() = std::move(outcome.ack);
    write_pending_ = true;
    StartWrite(&reply_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    write_pending_ = false;
    if (finishing_) return;
    if (!ok || cancel_requested_) {
      finishing_ = true;
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream ended by plimsolld"));
      return;
    }
    StartRead(&frame_);
  }

  void OnDone() override {
    service_->Unregister(this);
    delete this;
  }

  // Per-stream frame budget. Only the read reaction in flight touches it.
  bool TakeFrameToken(absl::Time now, double rate, double burst) {
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - bucket_time_));
    bucket_time_ = std::max(now, bucket_time_);
    bucket_tokens_ = std::min(burst, bucket_tokens_ + elapsed * rate);
    if (bucket_tokens_ < 1.0) return false;
    bucket_tokens_ -= 1.0;
    return true;
  }

  const std::string& peer() const { return peer_; }
  Transport transport() const { return transport_; }

  // What the stream's frames are checked against (the proven uuid once there is one, the nonce,
  // the prepared token). Only the read reaction in flight touches it, so no lock.
  StreamBinding& binding() { return binding_; }

  // Guarded by the service's mu_ (read by Sweep, written once by HandleFrame).
  std::string uuid;
  absl::Time opened;
  // Arrival of the last proven report, Unix ns: written by the read reaction on every report
  // without taking the service's lock, read by Sweep.
  std::atomic<int64_t> last_report_ns{0};

 private:
  void FinishOnce(grpc::Status status) {
    absl::MutexLock l(&mu_);
    if (finishing_) return;
    finishing_ = true;
    Finish(std::move(status));
  }

  AgentService* const service_;
  grpc::CallbackServerContext* const context_;
  const Transport transport_;
  static std::string NewNonce() {
    unsigned char bytes[16];
    // RAND_bytes only fails when the kernel's entropy source is broken; an all-zero nonce then
    // still works, it merely stops protecting against replays across streams.
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::fill(std::begin(bytes), std::end(bytes), 0);
    return std::string(reinterpret_cast<const char*>(bytes), sizeof(bytes));
  }

  const std::string peer_;
  const std::string nonce_;
  v1::SignedAgentReport frame_;
  v1::AgentReply reply_;
  StreamBinding binding_;
  ProofCache proof_cache_;
  double bucket_tokens_;
  absl::Time bucket_time_;

  absl::Mutex mu_;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_requested_ ABSL_GUARDED_BY(mu_) = false;

  friend class AgentService;
};

// Answers a stream over the limit and goes away; never registered.
class AgentService::RefusedStream final
    : public grpc::ServerBidiReactor<v1::SignedAgentReport, v1::AgentReply> {
 public:
  RefusedStream() {
    Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "plimsolld is at its agent stream limit"));
  }
  void OnDone() override { delete this; }
};

// Answers a stream whose connection is no known domain's channel and goes away; never registered.
class AgentService::DeniedStream final
    : public grpc::ServerBidiReactor<v1::SignedAgentReport, v1::AgentReply> {
 public:
  DeniedStream() {
    Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "connection is no known domain's agent channel"));
  }
  void OnDone() override { delete this; }
};

AgentService::AgentService(AgentStore* store, Clock* clock, AgentServiceOptions options)
    : store_(store), clock_(clock), options_(options) {}

AgentService::~AgentService() {
  absl::MutexLock l(&mu_);
  if (!streams_.empty()) {
    PLOG_ERROR << "AgentService destroyed with " << streams_.size() << " live streams; shut the server down first";
  }
}

grpc::ServerBidiReactor<v1::SignedAgentReport, v1::AgentReply>* AgentService::Report(
    grpc::CallbackServerContext* context) {
  const absl::Time now = clock_->Now();
  StreamOrigin origin;
  if (options_.origin) {
    std::optional<StreamOrigin> found = options_.origin(context->peer());
    if (!found.has_value() || (found->transport != Transport::kTcp && found->channel_uuid.empty())) {
      absl::MutexLock l(&mu_);
      ++counters_.streams_denied;
      if (MayLog()) PLOG_WARNING << "agent stream denied: no domain's channel peer=" << context->peer();
      return new DeniedStream();
    }
    origin = *std::move(found);
  }
  Stream* stream = nullptr;
  {
    absl::MutexLock l(&mu_);
    int& active = active_[static_cast<int>(origin.transport)];
    if (active >= options_.max_streams) {
      ++counters_.streams_refused;
      if (MayLog()) PLOG_WARNING << "agent stream refused: limit " << options_.max_streams << " peer=" << context->peer();
      return new RefusedStream();
    }
    ++active;
    stream = new Stream(this, context, now, std::move(origin));
    stream->opened = now;
    stream->last_report_ns.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
    streams_.insert(stream);
    ++counters_.streams_opened;
  }
  stream->Start();
  return stream;
}

AgentService::Outcome AgentService::HandleFrame(Stream* stream, const v1::SignedAgentReport& frame) {
  Outcome out;
  const absl::Time now = clock_->Now();
  // The frame budget comes before any parsing or HMAC, so junk costs almost nothing.
  if (!stream->TakeFrameToken(now, options_.frames_per_second, options_.frame_burst)) {
    store_->CountRejected(RejectReason::kFlood);
    absl::MutexLock l(&mu_);
    ++counters_.streams_flooded;
    if (MayLog()) PLOG_WARNING << "agent stream ended: flood uuid=" << (stream->uuid.empty() ? "-" : stream->uuid)
                               << " peer=" << stream->peer();
    out.finish = true;
    out.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(RejectReasonName(RejectReason::kFlood)));
    return out;
  }
  StreamBinding& binding = stream->binding();
  IngestResult result = store_->Ingest(frame, binding);
  out.ack.set_sequence(result.sequence);
  out.ack.set_accepted(result.ok());
  if (!result.ok()) out.ack.set_reject_reason(std::string(RejectReasonName(*result.reject)));

  if (!result.authenticated || result.end_stream) {
    if (result.end_stream) {
      absl::MutexLock l(&mu_);
      ++counters_.streams_denied;
      if (MayLog()) {
        PLOG_WARNING << "agent stream denied: reason=" << RejectReasonName(*result.reject) << " " << result.detail
                     << " peer=" << stream->peer();
      }
      out.finish = true;
      out.status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, std::string(RejectReasonName(*result.reject)));
    }
    // Oversized or malformed frames are acked as rejected; an unproven stream still has to
    // prove itself before auth_timeout.
    if (!result.ok() && !result.end_stream) LogRejected(*stream, result);
    return out;
  }

  // Proven but refused (absurd values, counters backwards, a rate no guest can reach): the
  // counter says how many, the log says which guest and why. The stream is proven all the same.
  if (!result.ok()) LogRejected(*stream, result);
  if (result.ok()) {
    std::optional<v1::ReclaimBounds> bounds = BoundsForAck(
        options_.reclaim_bounds, result.uuid, store_->validator_options().max_reclaim_bytes_per_second);
    store_->NoteBoundsSent(result.uuid, bounds);
    if (bounds.has_value()) *out.ack.mutable_reclaim_bounds() = *std::move(bounds);
  }
  stream->last_report_ns.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
  if (!binding.uuid.empty()) return out;  // every report after the first: no lock taken
  // The stream's first proven report: bind it to its guest.
  binding.uuid = result.uuid;
  absl::MutexLock l(&mu_);
  stream->uuid = result.uuid;
  auto [it, inserted] = by_uuid_.try_emplace(result.uuid, stream);
  if (!inserted) {
    // One stream per guest: the newer one wins, the old one is most likely half-open.
    if (it->second->Terminate(grpc::Status(grpc::StatusCode::ABORTED, "superseded by a newer stream"))) {
      ++counters_.streams_superseded;
    }
    it->second = stream;
  }
  store_->StreamOpened(result.uuid);
  if (MayLog()) PLOG_INFO << "agent connected uuid=" << result.uuid << " peer=" << stream->peer();
  return out;
}

void AgentService::LogRejected(const Stream& stream, const IngestResult& result) {
  absl::MutexLock l(&mu_);
  if (!MayLog()) return;
  const std::string& uuid = !result.uuid.empty() ? result.uuid : stream.uuid;
  PLOG_WARNING << "agent report rejected: reason=" << RejectReasonName(*result.reject)
               << " uuid=" << (uuid.empty() ? "-" : uuid) << " sequence=" << result.sequence << " "
               << result.detail << " peer=" << stream.peer();
}

void AgentService::Unregister(Stream* stream) {
  absl::MutexLock l(&mu_);
  streams_.erase(stream);
  --active_[static_cast<int>(stream->transport())];
  if (!stream->uuid.empty()) {
    auto it = by_uuid_.find(stream->uuid);
    if (it != by_uuid_.end() && it->second == stream) by_uuid_.erase(it);
    store_->StreamClosed(stream->uuid);
    if (MayLog()) PLOG_INFO << "agent disconnected uuid=" << stream->uuid << " peer=" << stream->peer();
  }
}

void AgentService::Sweep() {
  const absl::Time now = clock_->Now();
  absl::MutexLock l(&mu_);
  for (Stream* stream : streams_) {
    const bool unproven = stream->uuid.empty();
    const absl::Duration limit = unproven ? options_.auth_timeout : options_.idle_timeout;
    const absl::Time since =
        unproven ? stream->opened : absl::FromUnixNanos(stream->last_report_ns.load(std::memory_order_relaxed));
    if (now - since <= limit) continue;
    const std::string why = unproven ? absl::StrCat("no proven report within ", absl::FormatDuration(limit))
                                     : absl::StrCat("no report for ", absl::FormatDuration(now - since));
    if (stream->Terminate(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, why))) {
      ++counters_.streams_timed_out;
      if (MayLog()) {
        PLOG_INFO << "agent stream ended: " << why << " uuid=" << (unproven ? "-" : stream->uuid)
                  << " peer=" << stream->peer();
      }
    }
  }
}

AgentServiceCounters AgentService::counters() const {
  absl::MutexLock l(&mu_);
  AgentServiceCounters c = counters_;
  c.active_streams = static_cast<int64_t>(streams_.size());
  return c;
}

bool AgentService::MayLog() { return log_budget_.Take(clock_->Now()); }

}  // namespace plimsoll::server::agent
