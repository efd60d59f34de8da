#include "agent/reporter.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "agent/boottime_clock.h"
#include "agent/virtio_port.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "plimsoll/v1/agent.grpc.pb.h"
#include "protocol/report_proof.h"

namespace plimsoll::agent {
namespace {

// LogOnChange topics.
constexpr int kTopicConnection = 0;
constexpr int kTopicAcceptance = 1;
constexpr int kTopicSample = 2;
constexpr int kTopicTrigger = 3;

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

int PollMillis(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))), 1 << 30));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Reporter>> Reporter::Create(ReporterOptions options, SampleSource* source,
                                                           std::unique_ptr<PsiTrigger> trigger) {
  if (!protocol::IsCanonicalUuid(options.guest_uuid)) return absl::InvalidArgumentError("reporter: guest_uuid is not canonical");
  if (!protocol::IsCanonicalUuid(options.boot_id)) return absl::InvalidArgumentError("reporter: boot_id is not canonical");
  // On a virtio-serial port or vsock the host knows which domain speaks (its port, its CID), so
  // there is no token; over TCP every report must be proven with one.
  const bool channel_identity = options.server.kind != ServerAddress::Kind::kTcp;
  if (channel_identity ? !options.token.empty() : options.token.size() != protocol::kTokenBytes) {
    return absl::InvalidArgumentError(channel_identity ? std::string("reporter: no token on virtio-serial or vsock")
                                                       : absl::StrCat("reporter: token must be ",
                                                                      protocol::kTokenBytes, " bytes"));
  }
  if (options.interval < absl::Milliseconds(10)) return absl::InvalidArgumentError("reporter: interval below 10ms");
  if (options.initial_backoff <= absl::ZeroDuration() || options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError("reporter: need 0 < initial_backoff <= max_backoff");
  }
  if (options.tls.enabled() && options.server.kind != ServerAddress::Kind::kTcp) {
    return absl::InvalidArgumentError(
        "reporter: TLS applies to a TCP server address only (vsock and virtio-serial are host-local)");
  }
  if (options.ack_timeout == absl::ZeroDuration()) options.ack_timeout = 3 * options.interval + absl::Seconds(10);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return absl::ErrnoToStatus(errno, "reporter: eventfd");
  return std::unique_ptr<Reporter>(new Reporter(std::move(options), source, std::move(trigger), wake_fd));
}

Reporter::Reporter(ReporterOptions options, SampleSource* source, std::unique_ptr<PsiTrigger> trigger, int wake_fd)
    : options_(std::move(options)), source_(source), trigger_(std::move(trigger)), wake_fd_(wake_fd) {}

Reporter::~Reporter() { close(wake_fd_); }

void Reporter::Stop() {
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  absl::MutexLock l(&mu_);
  if (current_context_ != nullptr) current_context_->TryCancel();
}

ReporterStats Reporter::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

void Reporter::LogOnChange(int topic, const std::string& key, const std::string& line) {
  {
    absl::MutexLock l(&mu_);
    if (last_log_key_[topic] == key) return;
    last_log_key_[topic] = key;
  }
  if (!line.empty()) PLOG_INFO << line;
}

absl::Duration Reporter::Jittered(absl::Duration d) {
  const double j = std::clamp(options_.backoff_jitter, 0.0, 0.9);
  return d * absl::Uniform(rng_, 1.0 - j, 1.0 + j);
}

void Reporter::DrainWake() {
  uint64_t value;
  while (read(wake_fd_, &value, sizeof(value)) > 0) {
  }
}

bool Reporter::WaitEvents(absl::Duration timeout, bool watch_trigger) {
  pollfd fds[2] = {};
  fds[0].fd = wake_fd_;
  fds[0].events = POLLIN;
  nfds_t n = 1;
  if (watch_trigger && trigger_ != nullptr) {
    fds[1].fd = trigger_->fd();
    fds[1].events = POLLPRI;
    n = 2;
  }
  const int ready = poll(fds, n, PollMillis(timeout));
  if (ready <= 0) return false;  // timeout, or EINTR: the caller re-evaluates its deadlines
  if (fds[0].revents & POLLIN) DrainWake();
  if (n == 2 && fds[1].revents != 0) {
    if (fds[1].revents & (POLLERR | POLLNVAL)) {
      // The kernel tore the trigger down; reports continue at the interval.
      LogOnChange(kTopicTrigger, "gone", "psi trigger is gone (POLLERR); spikes now wait for the next interval");
      trigger_.reset();
      return false;
    }
    return (fds[1].revents & POLLPRI) != 0;
  }
  return false;
}

absl::StatusOr<v1::SignedAgentReport> Reporter::BuildFrame(bool spike, uint64_t sequence,
                                                           const std::string& nonce) {
  v1::AgentReport report;
  int64_t stamp = 0;
  for (int attempt = 1;; ++attempt) {
    // The stamp is taken after the read; the read's own span bounds how far apart they are.
    report.Clear();
    const int64_t started = BoottimeNanos();
    if (absl::Status s = source_->Read(&report); !s.ok()) {
      {
        absl::MutexLock l(&mu_);
        ++stats_.sample_errors;
      }
      LogOnChange(kTopicSample, std::string(s.message()), absl::StrCat("cannot read a sample: ", s.ToString()));
      return s;
    }
    stamp = BoottimeNanos();
    const bool quick = stamp - started <= absl::ToInt64Nanoseconds(options_.max_sample_span);
    if (quick || attempt >= options_.sample_attempts) break;
    absl::MutexLock l(&mu_);
    ++stats_.slow_samples;
  }
  LogOnChange(kTopicSample, "ok", "");  // re-arms the log for the next sample error
  // The reclaim part: the reclaimer's state and counters as of now, just after the sample.
  if (options_.reclaim != nullptr) options_.reclaim->FillReport(report.mutable_reclaim());
  report.set_guest_uuid(options_.guest_uuid);
  report.set_boot_id(options_.boot_id);
  report.set_sequence(sequence);
  report.set_boottime_ns(stamp);
  report.set_spike(spike);
  report.set_stream_nonce(nonce);
  v1::AgentInfo* info = report.mutable_agent();
  info->set_version(options_.version);
  info->set_interval_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.interval)));
  if (trigger_ != nullptr) info->set_psi_trigger(trigger_->effective_spec());
  {
    absl::MutexLock l(&mu_);
    info->set_connections(stats_.connections);
  }
  v1::SignedAgentReport frame;
  std::string* bytes = frame.mutable_report();
  report.SerializeToString(bytes);
  if (!options_.token.empty()) frame.set_proof(protocol::ComputeProof(options_.token, *bytes));
  return frame;
}

void Reporter::HandleAck(const v1::AgentReportAck& ack, bool* accepted) {
  // Bounds ride on accepted acks; the reclaimer makes them expire when they stop coming.
  if (ack.has_reclaim_bounds() && options_.reclaim != nullptr) options_.reclaim->OnHostBounds(ack.reclaim_bounds());
  if (ack.accepted()) {
    *accepted = true;
    {
      absl::MutexLock l(&mu_);
      ++stats_.acks_accepted;
    }
    LogOnChange(kTopicAcceptance, "accepted", "reports are being accepted");
    return;
  }
  {
    absl::MutexLock l(&mu_);
    ++stats_.acks_rejected;
    stats_.last_reject_reason = ack.reject_reason();
  }
  LogOnChange(kTopicAcceptance, "rejected:" + ack.reject_reason(),
              absl::StrCat("plimsolld rejects reports: reason=", ack.reject_reason(), " seq=", ack.sequence()));
}

absl::Status Reporter::RunOneStream(bool* accepted) {
  {
    absl::MutexLock l(&mu_);
    ++stats_.attempts;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(options_.server, options_.connect_timeout, options_.tls);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<v1::AgentChannel::Stub> stub = v1::AgentChannel::NewStub(*channel);
  grpc::ClientContext context;
  {
    absl::MutexLock l(&mu_);
    if (stopping()) return absl::CancelledError("stopping");
    current_context_ = &context;
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::SignedAgentReport, v1::AgentReply>> stream =
      stub->Report(&context);
  const absl::Time opened = absl::Now();
  {
    absl::MutexLock l(&mu_);
    ++stats_.connections;
  }

  // Acks arrive on their own thread so a slow daemon never blocks the timing of reports.
  std::atomic<bool> reader_done{false};
  std::atomic<uint64_t> acked{0};
  std::atomic<int64_t> last_ack_unix_ns{absl::ToUnixNanos(absl::Now())};
  // The stream's nonce from the daemon's hello; written once by the reader before `have_nonce`.
  std::string nonce;
  std::atomic<bool> have_nonce{false};
  std::atomic<bool> protocol_error{false};
  std::thread reader([&] {
    v1::AgentReply reply;
    bool first = true;
    while (stream->Read(&reply)) {
      if (reply.has_hello()) {
        if (have_nonce.load(std::memory_order_relaxed) || reply.hello().nonce().empty()) {
          protocol_error.store(true);
          break;
        }
        nonce = reply.hello().nonce();
        have_nonce.store(true, std::memory_order_release);
        const uint64_t one = 1;
        (void)!write(wake_fd_, &one, sizeof(one));
        continue;
      }
      if (!reply.has_ack() || !have_nonce.load(std::memory_order_relaxed)) {
        protocol_error.store(true);
        break;
      }
      const v1::AgentReportAck& ack = reply.ack();
      if (first) {
        // "Connected" once the daemon answered: a stream it ends at once (a denied identity)
        // is one failed attempt, not a connect/disconnect pair in the log.
        first = false;
        {
          absl::MutexLock l(&mu_);
          stats_.connected = true;
        }
        LogOnChange(kTopicConnection, "connected",
                    absl::StrCat("connected to plimsolld at ", options_.server_text,
                                 options_.tls.enabled() ? " (tls)" : " (plaintext)", " uuid=", options_.guest_uuid,
                                 " interval=", absl::FormatDuration(options_.interval)));
      }
      HandleAck(ack, accepted);
      acked.fetch_add(1, std::memory_order_relaxed);
      last_ack_unix_ns.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
    }
    reader_done.store(true, std::memory_order_release);
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  });

  // A trigger event left over from a disconnected period is stale: clear it.
  if (trigger_ != nullptr) {
    pollfd p{trigger_->fd(), POLLPRI, 0};
    (void)poll(&p, 1, 0);
  }

  absl::Status ended;
  uint64_t sent = 0;
  absl::Time next_report = absl::Now();  // the first report goes out at once
  absl::Time last_spike = absl::InfinitePast();
  absl::Time triggered_at = absl::InfinitePast();
  bool spike_pending = false;
  while (true) {
    if (stopping()) {
      ended = absl::CancelledError("stopping");
      break;
    }
    if (reader_done.load(std::memory_order_acquire)) {
      // The stream ended (Finish() says why) or the daemon broke the protocol.
      if (protocol_error.load()) ended = absl::InternalError("unexpected reply from plimsolld");
      break;
    }
    const absl::Time now = absl::Now();
    if (!have_nonce.load(std::memory_order_acquire)) {
      // Nothing can be sent before the daemon's hello.
      if (now - opened > options_.connect_timeout) {
        ended = absl::DeadlineExceededError("no hello from plimsolld");
        break;
      }
      WaitEvents(opened + options_.connect_timeout - now, /*watch_trigger=*/false);
      continue;
    }
    const absl::Time last_ack = absl::FromUnixNanos(last_ack_unix_ns.load(std::memory_order_relaxed));
    const bool outstanding = acked.load(std::memory_order_relaxed) < sent;
    if (outstanding && now - last_ack > options_.ack_timeout) {
      ended = absl::DeadlineExceededError(
          absl::StrCat("no ack from plimsolld for ", absl::FormatDuration(now - last_ack)));
      break;
    }
    const bool spike_due = spike_pending && now - last_spike >= options_.min_spike_gap;
    if (spike_due || now >= next_report) {
      absl::StatusOr<v1::SignedAgentReport> frame = BuildFrame(spike_due, next_sequence_, nonce);
      if (frame.ok()) {
        ++next_sequence_;
        if (!stream->Write(*frame)) break;  // the stream is broken; Finish() says why
        ++sent;
        absl::MutexLock l(&mu_);
        ++stats_.reports_sent;
        if (spike_due) ++stats_.spikes_sent;
        if (spike_due && options_.log_spikes) {
          PLOG_INFO << "spike sent seq=" << next_sequence_ - 1 << " trigger_to_send_ms="
                    << absl::StrFormat("%.1f", absl::ToDoubleMilliseconds(absl::Now() - triggered_at));
        }
      }
      if (spike_due) {
        spike_pending = false;
        last_spike = now;
      }
      // A spike report also restarts the interval, so two reports never go out back to back.
      next_report = now + options_.interval;
    }
    absl::Time wake_at = next_report;
    if (spike_pending) wake_at = std::min(wake_at, last_spike + options_.min_spike_gap);
    if (outstanding) wake_at = std::min(wake_at, last_ack + options_.ack_timeout);
    if (WaitEvents(wake_at - absl::Now(), /*watch_trigger=*/true)) {
      if (!spike_pending) triggered_at = absl::Now();
      spike_pending = true;
    }
  }

  if (ended.ok()) {
    // The stream broke under us: its status is on the way; give the reader a moment to see it
    // so the log says why (e.g. "Socket closed"), not "Cancelled".
    const absl::Time give_up = absl::Now() + absl::Seconds(1);
    while (!reader_done.load(std::memory_order_acquire) && absl::Now() < give_up && !stopping()) {
      WaitEvents(absl::Milliseconds(50), /*watch_trigger=*/false);
    }
  }
  if (!reader_done.load(std::memory_order_acquire)) context.TryCancel();
  reader.join();
  const grpc::Status finish = stream->Finish();
  {
    absl::MutexLock l(&mu_);
    current_context_ = nullptr;
    stats_.connected = false;
  }
  if (ended.ok()) ended = FromGrpc(finish);
  if (ended.ok()) ended = absl::UnavailableError("stream closed by plimsolld");
  return ended;
}

void Reporter::Run() {
  if (trigger_ != nullptr) {
    LogOnChange(kTopicTrigger, "armed", absl::StrCat("psi trigger armed: \"", trigger_->effective_spec(), "\""));
  }
  absl::Duration backoff = options_.initial_backoff;
  while (!stopping()) {
    bool accepted = false;
    const absl::Status ended = RunOneStream(&accepted);
    if (stopping()) break;
    if (accepted) backoff = options_.initial_backoff;
    // On virtio-serial, "the host end is not connected" comes after Dial watched the port for
    // connect_timeout: plimsolld connecting shows on the port at once, so waiting there is the
    // backoff. Retrying at once means an agent whose plimsolld was away for minutes reports
    // within ~100 ms of its return, not after a backoff grown to max_backoff meanwhile.
    const bool host_absent = options_.server.kind == ServerAddress::Kind::kVirtioSerial && IsHostEndAbsent(ended);
    if (host_absent) backoff = options_.initial_backoff;
    // (100 ms, not 0: whatever connect_timeout is, a port that keeps hanging up is no spin.)
    const absl::Duration delay = host_absent ? absl::Milliseconds(100) : Jittered(backoff);
    {
      absl::MutexLock l(&mu_);
      stats_.last_disconnect = ended.ToString();
    }
    LogOnChange(kTopicConnection, absl::StrCat("down:", absl::StatusCodeToString(ended.code())),
                absl::StrCat("not connected to plimsolld at ", options_.server_text, ": ", ended.ToString(),
                             host_absent ? "; watching the port for it"
                                         : absl::StrCat("; retrying with backoff (next in ",
                                                        absl::FormatDuration(absl::Trunc(delay, absl::Milliseconds(1))),
                                                        ")")));
    const absl::Time until = absl::Now() + delay;
    while (!stopping() && absl::Now() < until) WaitEvents(until - absl::Now(), /*watch_trigger=*/false);
    if (!host_absent) backoff = std::min(backoff * 2, options_.max_backoff);
  }
  LogOnChange(kTopicConnection, "stopped", "reporter stopped");
}

}  // namespace plimsoll::agent
