// server/metrics/: every Prometheus series, declared once. It decides nothing and reads nothing
// but what the loop and the agent channel hand it.
//
// Every Prometheus series plimsolld exports is declared in metrics.cc, once.
// Guest series carry labels {domain, uuid} and disappear with the guest.
// Thread-safe: the control loop writes, prometheus-cpp's exposer thread reads.
#ifndef PLIMSOLL_SERVER_METRICS_METRICS_H_
#define PLIMSOLL_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "plimsoll/v1/control.pb.h"
#include "server/metrics/envelope_rules.h"

namespace prometheus {
class Registry;
class Exposer;
}  // namespace prometheus

namespace plimsoll::server {

// The libvirt calls whose failures are counted, as plimsoll_libvirt_errors_total{operation}. A
// closed set, so that every operation's series exists at 0 from the start: Prometheus'
// increase() cannot see a counter's first increment when the series is born with it, and the
// PlimsollLibvirtErrors alert would miss the first failure.
enum class LibvirtOperation {
  kConnect,       // "connect"
  kListDomains,   // "list_domains"
  kEnableStats,   // "enable_stats"
  kBalloonStats,  // "balloon_stats"
  kSetTarget,     // "set_target"
};
inline constexpr LibvirtOperation kAllLibvirtOperations[] = {
    LibvirtOperation::kConnect, LibvirtOperation::kListDomains, LibvirtOperation::kEnableStats,
    LibvirtOperation::kBalloonStats, LibvirtOperation::kSetTarget};
// The operation's label value.
const char* LibvirtOperationName(LibvirtOperation operation);

// The safety net's rules (control_loop.h), the `rule` label of plimsoll_safety_holds_total.
enum class SafetyRule {
  kNoStats,           // "no_stats": a shrink held, the guest has no balloon stats
  kStaleStats,        // "stale_stats": a shrink held, its stats are stale
  kHostStale,         // "host_stale": a shrink held, the host read failed this tick
  kInflationStopped,  // "inflation_stopped": a balloon inflating on such data stopped where it is
};
inline constexpr SafetyRule kAllSafetyRules[] = {SafetyRule::kNoStats, SafetyRule::kStaleStats,
                                                 SafetyRule::kHostStale, SafetyRule::kInflationStopped};
const char* SafetyRuleName(SafetyRule rule);

// Why a guest's balloon move was skipped for a busy domain (control_loop.h), the `reason` label of
// plimsoll_balloon_busy_skips_total.
enum class BusyReason {
  kInFlight,  // "in_flight": an earlier balloon call to the domain has not returned
  kJob,       // "job": the domain has an active libvirt job (migration, save, ...)
  kPoolFull,  // "pool_full": every balloon worker is busy and the queue is full
};
inline constexpr BusyReason kAllBusyReasons[] = {BusyReason::kInFlight, BusyReason::kJob, BusyReason::kPoolFull};
const char* BusyReasonName(BusyReason reason);

// Every counter family whose label values are known up front is created with all of them at 0
// (Prometheus' advice on missing series): decisions by direction, libvirt errors by operation,
// config reloads by result, agent streams ended by reason, and agent reports rejected by reason
// once DeclareAgentRejectReasons has named them.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics on "host:port". Port 0 picks a free port; see bound_port().
  absl::Status Serve(const std::string& listen);
  int bound_port() const;

  // Sets the host gauges from the published view and keeps the view (immutable, shared) for
  // the per-guest series, which a scrape makes from it: a series per guest in it and figure it
  // reports, none for guests no longer in it or stats a guest no longer reports.
  void Publish(std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view);

  // Agent channel totals (cumulative, as AgentStore counts them): exported as counters
  // plimsoll_agent_reports_total and plimsoll_agent_reports_rejected_total{reason}.
  void PublishAgentCounters(uint64_t accepted,
                            const std::vector<std::pair<std::string, uint64_t>>& rejected_by_reason);
  // Creates plimsoll_agent_reports_rejected_total{reason} at 0 for each reason (the daemon calls
  // it with every RejectReasonName when the agent channel is on, before anything is served).
  void DeclareAgentRejectReasons(const std::vector<std::string>& reasons);

  // What the agent ingest counts (AgentIngest::counters()), as plain numbers so this file needs
  // nothing from server/agent. Stream counts, every transport's together: exported as
  // plimsoll_agent_streams_active, plimsoll_agent_streams_opened_total,
  // plimsoll_agent_streams_refused_total and plimsoll_agent_streams_ended_total{reason}.
  struct AgentStreamCounts {
    int64_t active = 0;
    uint64_t opened = 0;      // accepted by the stream limit
    uint64_t refused = 0;     // over the stream limit
    uint64_t timed_out = 0;   // no proven report within auth_timeout, or silent for idle_timeout
    uint64_t superseded = 0;  // replaced by a newer stream of the same guest
    uint64_t denied = 0;      // bad proof, another stream's nonce, or a uuid switch
    uint64_t flooded = 0;     // over the per-stream frame budget
  };
  // The virtio-serial connector's counts. Exported as plimsoll_agent_channels{state=
  // "connected|no_channel|no_controller"}, plimsoll_agent_channel_connects_total{result=
  // "connected|failed"}, plimsoll_agent_channel_closed_total{reason="guest_closed|daemon_closed|
  // error|domain_stopped"}, plimsoll_agent_channel_attach_total{result="attached|failed|
  // no_controller"}, plimsoll_agent_channel_guest_bytes_total and
  // plimsoll_agent_channel_throttled_total.
  struct AgentChannelCounts {
    int64_t connected = 0;
    int64_t without_channel = 0;     // running domains with no usable channel (incl. no controller)
    int64_t without_controller = 0;
    uint64_t connects = 0;
    uint64_t connect_failures = 0;
    uint64_t closed_guest = 0;
    uint64_t closed_daemon = 0;
    uint64_t closed_error = 0;
    uint64_t closed_domain_stopped = 0;
    uint64_t attached = 0;
    uint64_t attach_failed = 0;
    uint64_t attach_no_controller = 0;
    uint64_t guest_bytes = 0;
    uint64_t throttled = 0;
  };
  // The vsock connector's counts. Exported as plimsoll_agent_vsock_connections_total{result=
  // "accepted|unknown_cid|accept_error"} and plimsoll_agent_vsock_domains (running domains whose
  // XML gives a vsock CID).
  struct AgentVsockCounts {
    int64_t domains_with_cid = 0;
    uint64_t accepted = 0;
    uint64_t unknown_cid = 0;
    uint64_t accept_errors = 0;
  };
  struct AgentCounts {
    AgentStreamCounts streams;
    AgentChannelCounts channels;  // zero when the virtio-serial connector is off
    AgentVsockCounts vsock;       // zero when the vsock connector is off
  };
  // Reads the agent counts from `source` at every scrape (and Render), not once per tick: a
  // listener under attack is seen even while the control loop is slow. `source` must be
  // thread-safe. Passing nullptr detaches it (the series keep their last values); once that
  // call returns, `source` is not running and will not be called again, so the owner of what it
  // reads may go away.
  void SetAgentSource(std::function<AgentCounts()> source);

  // The hypervisor's calls so far by name (Hypervisor::CallCounts), read at every scrape and
  // exported as plimsoll_libvirt_calls_total{call}: what a tick costs libvirt. Same detaching
  // contract as SetAgentSource.
  void SetLibvirtCallSource(std::function<std::vector<std::pair<std::string, uint64_t>>()> source);

  void CountDecision(plimsoll::v1::Direction direction);
  void CountLibvirtError(LibvirtOperation operation);
  void ObserveTick(double seconds);
  // An agent spike report asked for an early tick (plimsoll_agent_spikes_total), and a tick
  // started early because something asked for one (plimsoll_ticks_woken_total). Thread-safe.
  void CountAgentSpike();
  void CountWokenTick();
  // A balloon-change event arrived from libvirt (plimsoll_balloon_change_events_total), and the
  // sizes such events brought were folded in between ticks: `view` is the published view with
  // them (plimsoll_guest_balloon_actual_bytes from then on) and its host's guests_actual_bytes
  // (plimsoll_host_guests_actual_bytes). Thread-safe.
  void CountBalloonChangeEvent();
  void PublishBalloonSizes(std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view);
  // A tick whose host memory read failed, so no guest was shrunk (plimsoll_host_stale_ticks_total).
  void CountHostStaleTick();
  // QEMU monitor reads of the balloon's pressure counters since the last call, by outcome
  // (plimsoll_balloon_pressure_reads_total{result="read"|"lacking"|"failed"}).
  void AddBalloonPressureReads(uint64_t read, uint64_t lacking, uint64_t failed);
  // The safety net changed a decision (plimsoll_safety_holds_total{rule}).
  void CountSafetyHold(SafetyRule rule);
  // A rule of the envelope (envelope_rules.h) that changed a decision.
  void CountEnvelopeRule(EnvelopeRule rule);
  // A reclaim hold ended early on a guest in distress (plimsoll_reclaim_holds_released_total).
  void CountReclaimRelease();
  // A balloon move skipped because the domain is busy (plimsoll_balloon_busy_skips_total{reason}),
  // and a balloon call that did not return within balloon_call_deadline
  // (plimsoll_balloon_call_timeouts_total).
  void CountBalloonBusySkip(BusyReason reason);
  void CountBalloonCallTimeout();

  // Configuration: ConfigLoaded at startup (last_reload_success 1, timestamp
  // now, no reload counted); ConfigReloaded for every reload attempt
  // (plimsoll_config_reloads_total{result="success|failure"},
  // plimsoll_config_last_reload_success 1/0,
  // plimsoll_config_last_reload_timestamp_seconds).
  void ConfigLoaded(double unix_seconds);
  void ConfigReloaded(bool success, double unix_seconds);

  // The text exposition, for tests that do not want a socket.
  std::string Render() const;

  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_METRICS_METRICS_H_
