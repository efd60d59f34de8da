// agent/: plimsoll-agent, the in-guest reporter (reader, PSI trigger, dialer, reporter). It runs
// in the guest, so it must never include server/; what it shares with the daemon is protocol/.
//
// The agent's one job: keep one long-lived AgentChannel.Report stream to plimsolld and send a
// proven sample every interval, and at once when the PSI trigger fires.
//
// Behaviour the rest of the system relies on:
// - One stream at a time. When it ends (daemon restart, network loss, rejection), the reporter
//   reconnects by itself with exponential backoff (initial_backoff doubling to max_backoff,
//   +/- backoff_jitter so agents restarted together do not reconnect in lockstep). The backoff
//   resets only once the daemon has accepted a report, so a daemon that accepts connections but
//   rejects every report is not hammered.
// - Bounded memory: nothing is queued. A sample is read when it is sent; while disconnected no
//   sample is taken (an old sample is worthless to a controller). At most a transport window of
//   unacknowledged reports is in flight, and a stream with no ack for ack_timeout is abandoned.
// - One log line per change of connection state (connected = the daemon answered a report;
//   not connected, with the reason, when that reason's status code changes), of acceptance
//   (rejected with a reason / accepted again), and of sample errors; repeated identical
//   failures (a daemon that stays down, an identity that stays denied) are not logged again.
//
// Thread-safety: Run() on one thread; Stop() and stats() from any thread.
#ifndef PLIMSOLL_AGENT_REPORTER_H_
#define PLIMSOLL_AGENT_REPORTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/dial.h"
#include "agent/guest_reader.h"
#include "agent/psi_trigger.h"
#include "agent/reclaim_peer.h"
#include "plimsoll/v1/agent.pb.h"

namespace grpc {
class ClientContext;
}

namespace plimsoll::agent {

struct ReporterOptions {
  ServerAddress server;
  AgentTls tls;             // empty ca_pem: plaintext (TCP on loopback, or vsock)
  std::string server_text;  // the --server value, for logs
  std::string guest_uuid;   // canonical form
  std::string token;        // raw kTokenBytes bytes; empty on virtio-serial and vsock (no proof)
  std::string boot_id;      // canonical form
  absl::Duration interval = absl::Seconds(5);
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  double backoff_jitter = 0.25;  // each delay is scaled by a uniform factor in [1-j, 1+j]
  // Spike reports closer together than this are merged (the kernel fires at most once per
  // window anyway; this guards against a trigger that keeps firing).
  absl::Duration min_spike_gap = absl::Milliseconds(250);
  // One log line per spike report sent, with the time since the trigger fired: for measuring
  // spike latency (bench/spike_latency.py), too chatty for a guest under steady pressure.
  bool log_spikes = false;
  // A stream with reports outstanding and no ack for this long is abandoned. Zero: 3 intervals
  // plus 10 s.
  absl::Duration ack_timeout = absl::ZeroDuration();
  std::string version = "plimsoll-agent/1";
  // A sample and its boottime stamp must be taken together: plimsolld checks that PSI stall time
  // grew no faster than the stamps (1 s of slack). In a guest under memory pressure the agent
  // itself stalls (its own pages evicted, its vCPU busy), so a read that took longer than this
  // is taken again, up to sample_attempts reads; the last one is sent whatever it took.
  absl::Duration max_sample_span = absl::Milliseconds(250);
  int sample_attempts = 3;
  // The reclaimer (reclaimer.h): fills every report's reclaim part and takes the reclaim bounds
  // the daemon's acks carry. Null: reports carry no reclaim part. Must outlive the reporter.
  ReclaimPeer* reclaim = nullptr;
};

struct ReporterStats {
  uint64_t attempts = 0;     // dials started, whether they connected or not
  uint64_t connections = 0;  // streams opened
  uint64_t reports_sent = 0;
  uint64_t spikes_sent = 0;
  uint64_t acks_accepted = 0;
  uint64_t acks_rejected = 0;
  uint64_t sample_errors = 0;
  uint64_t slow_samples = 0;  // reads that took longer than max_sample_span and were taken again
  bool connected = false;  // the current stream got at least one ack
  std::string last_reject_reason;  // from the last rejecting ack
  std::string last_disconnect;     // why the last stream or attempt ended
};

class Reporter {
 public:
  // `source` must outlive the reporter. `trigger` may be null (no PSI, or disabled); when set,
  // the reporter owns it.
  static absl::StatusOr<std::unique_ptr<Reporter>> Create(ReporterOptions options, SampleSource* source,
                                                          std::unique_ptr<PsiTrigger> trigger);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Connects, reports and reconnects until Stop(). Returns after the current stream is closed.
  void Run();

  // Makes Run() return soon: wakes its waits and cancels the current stream. Idempotent.
  void Stop();

  ReporterStats stats() const;

 private:
  Reporter(ReporterOptions options, SampleSource* source, std::unique_ptr<PsiTrigger> trigger, int wake_fd);

  // One connection: dial, stream, report until the stream ends or Stop(). Returns why it ended.
  // Sets *accepted when the daemon accepted at least one report on it.
  absl::Status RunOneStream(bool* accepted);
  // Reads a sample, binds it to the stream's nonce and signs it. Sample errors are logged on
  // change and returned.
  absl::StatusOr<v1::SignedAgentReport> BuildFrame(bool spike, uint64_t sequence, const std::string& nonce);
  // Waits for the wake fd (and the trigger, when `watch_trigger`) up to `timeout`. Returns true
  // when the trigger fired.
  bool WaitEvents(absl::Duration timeout, bool watch_trigger);
  void DrainWake();
  void HandleAck(const v1::AgentReportAck& ack, bool* accepted);
  // Logs `line` when `key` differs from the previous key of the same `topic`.
  void LogOnChange(int topic, const std::string& key, const std::string& line);
  absl::Duration Jittered(absl::Duration d);
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  const ReporterOptions options_;
  SampleSource* const source_;
  std::unique_ptr<PsiTrigger> trigger_;  // null when unavailable or gone
  const int wake_fd_;                    // eventfd: Stop() and the ack reader wake Run()
  std::atomic<bool> stopping_{false};
  uint64_t next_sequence_ = 1;           // Run() thread only
  absl::BitGen rng_;                     // Run() thread only

  mutable absl::Mutex mu_;
  grpc::ClientContext* current_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  ReporterStats stats_ ABSL_GUARDED_BY(mu_);
  std::string last_log_key_[4] ABSL_GUARDED_BY(mu_);
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_REPORTER_H_
