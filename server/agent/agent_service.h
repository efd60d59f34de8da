// server/agent/: plimsolld's side of the agent channel (the ingest and its connectors, service,
// validator, store, host key, and the token and sink tools). It must not include the guest agent
// (agent/): what both ends compute alike is in protocol/.
//
// The gRPC face of the agent channel: a thin adapter from AgentChannel.Report streams to
// AgentStore::Ingest, plus the stream-level defences the store cannot provide because they
// concern connections, not guests:
// - at most max_streams concurrent streams per transport (more are refused with
//   RESOURCE_EXHAUSTED), so streams over one transport cannot take another's room;
// - per-stream frame budget checked before any parsing or HMAC (a flooding stream is ended with
//   RESOURCE_EXHAUSTED and counted as "flood");
// - a stream must prove an identity within auth_timeout and then keep reporting at least every
//   idle_timeout, or it is ended (DEADLINE_EXCEEDED); Sweep() enforces both;
// - every stream starts with a hello carrying a random nonce that its reports must echo; a
//   report with another stream's nonce (a replay) ends the stream with PERMISSION_DENIED
//   ("replay"), as do a failed proof ("bad_proof") and a switch of uuid
//   ("stream_identity_changed");
// - one stream per guest: a newer authenticated stream of the same guest ends the older one
//   (ABORTED), so a reconnecting agent never waits for its half-open old stream to time out.
// Acks of accepted reports carry the guest's reclaim bounds when a provider is set; a rejected
// report's ack carries none, so an agent whose reports stop being believed stops reclaiming
// when its bounds expire.
//
// Uses the callback API, so an idle stream costs no thread. Every stream's reads and writes
// alternate (write the hello, read a report, write its ack, read the next, ...), so a stream
// has at most one operation outstanding.
//
// Thread-safe. Destroy the grpc::Server serving it (Shutdown and Wait) before the service; the
// store and the clock must outlive the service.
#ifndef PLIMSOLL_SERVER_AGENT_AGENT_SERVICE_H_
#define PLIMSOLL_SERVER_AGENT_AGENT_SERVICE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "plimsoll/v1/agent.grpc.pb.h"
#include "server/agent/agent_store.h"
#include "server/agent/log_budget.h"
#include "server/agent/reclaim_bounds_provider.h"
#include "server/agent/transport.h"

namespace plimsoll::server::agent {

// Where a stream comes from, as AgentServiceOptions::origin says when it opens.
struct StreamOrigin {
  Transport transport = Transport::kTcp;
  // The guest whose connection the stream is on (virtio-serial, vsock): all its reports are this
  // guest's, without a proof (StreamBinding::channel_uuid). Empty on TCP: proven per report.
  std::string channel_uuid;
};

struct AgentServiceOptions {
  // Concurrent streams per transport, authenticated or not. One per guest is needed; the rest
  // is headroom for reconnects racing their old stream.
  int max_streams = 1024;
  // Per-stream frame budget (token bucket), before authentication work.
  double frames_per_second = 10;
  double frame_burst = 20;
  // A new stream must send a proven report within this.
  absl::Duration auth_timeout = absl::Seconds(10);
  // A proven stream must send a report at least this often (agents default to 5 s).
  absl::Duration idle_timeout = absl::Minutes(2);
  // Says where the stream whose peer is `peer` (grpc::ServerContext::peer()) comes from; nullopt
  // for a connection no guest is bound to, whose stream is refused (PERMISSION_DENIED, counted
  // as denied). A StreamOrigin of a connector's transport must name its guest. Unset: every
  // stream is a TCP one. Called once per stream, on a gRPC thread; must be thread-safe.
  std::function<std::optional<StreamOrigin>(const std::string& peer)> origin;
  // The reclaim bounds put in the ack of every accepted report (its rate capped at the
  // validator's max_reclaim_bytes_per_second). Null: acks carry none. Must outlive the service.
  ReclaimBoundsProvider* reclaim_bounds = nullptr;
};

// Every transport's streams together.
struct AgentServiceCounters {
  int64_t active_streams = 0;
  uint64_t streams_opened = 0;      // accepted by the stream limit
  uint64_t streams_refused = 0;     // over max_streams
  uint64_t streams_timed_out = 0;   // auth_timeout or idle_timeout
  uint64_t streams_superseded = 0;  // replaced by a newer stream of the same guest
  uint64_t streams_denied = 0;      // bad proof or identity change
  uint64_t streams_flooded = 0;     // over the frame budget
};

class AgentService final : public v1::AgentChannel::CallbackService {
 public:
  AgentService(AgentStore* store, Clock* clock, AgentServiceOptions options = {});
  ~AgentService() override;

  // gRPC's entry point for a new stream.
  grpc::ServerBidiReactor<v1::SignedAgentReport, v1::AgentReply>* Report(
      grpc::CallbackServerContext* context) override;

  // Ends streams past auth_timeout or idle_timeout. The ingest's sweeper calls it every second.
  void Sweep();

  AgentServiceCounters counters() const;

 private:
  class Stream;
  class RefusedStream;
  class DeniedStream;
  struct Outcome {
    bool finish = false;  // end the stream with `status` instead of acking
    grpc::Status status;
    v1::AgentReportAck ack;
  };

  // Runs in the stream's read reaction; takes mu_ briefly, never the stream's lock.
  Outcome HandleFrame(Stream* stream, const v1::SignedAgentReport& frame);
  void Unregister(Stream* stream);
  // True when a stream event may be logged now (log_budget_).
  bool MayLog() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs a refused report of `stream` (reason, guest, sequence, detail), within MayLog.
  void LogRejected(const Stream& stream, const IngestResult& result) ABSL_LOCKS_EXCLUDED(mu_);

  AgentStore* const store_;
  Clock* const clock_;
  const AgentServiceOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Stream*> by_uuid_ ABSL_GUARDED_BY(mu_);
  int active_[kNumTransports] ABSL_GUARDED_BY(mu_) = {};
  AgentServiceCounters counters_ ABSL_GUARDED_BY(mu_);
  LogBudget log_budget_ ABSL_GUARDED_BY(mu_){"agent stream"};
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_AGENT_SERVICE_H_
