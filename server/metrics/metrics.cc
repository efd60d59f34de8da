#include "server/metrics/metrics.h"

#include <algorithm>
#include <array>
#include <exception>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace plimsoll::server {
namespace {

using prometheus::Family;
using prometheus::Gauge;

// The per-guest gauges, one family each.
enum GuestMetric {
  kTarget,
  kActual,
  kMax,
  kMin,
  kUsable,
  kDiskCaches,
  kUnused,
  kStatsAge,
  kStatsFresh,
  kManaged,
  kPsiSome,
  kRefaults,
  kActiveFile,
  kInactiveFile,
  kAnon,
  kAgentConnected,
  kDiskRead,
  kBalloonOomKills,
  kBalloonAllocStalls,
  kBalloonDirectScan,
  kBalloonDirectReclaim,
  kBalloonAsyncScan,
  kBalloonAsyncReclaim,
  kHostRss,
  kFreePageReporting,
  kReclaimKeep,
  kReclaimClaimed,
  kReclaimConfirmed,
  kReclaimUnconfirmed,
  kReclaimUnconfirmedClaims,
  kReclaimBoundsPaused,
  kReclaimCompactions,
  kReclaimFailedCompactions,
  kGuestMetrics,  // the count
};

constexpr const char* kBalloonStates[] = {"ok", "stuck", "churning", "self_deflated"};
// AgentReclaim.state's documented values (server/agent/reclaim_names.h), "unknown" aside.
constexpr const char* kReclaimStates[] = {"off_disabled", "off_unsupported", "idle", "active", "stopped_pressure",
                                          "failed"};

// A per-guest family: not in the registry, whose series each cost a map of labels (some 7 KB a
// guest over the 21 series): made at scrape time from the last published view instead.
struct GuestFamilyInfo {
  std::string name;
  std::string help;
  bool counter = false;  // a counter (name ends in _total), else a gauge
};

// One guest series, "domain" and "uuid" labelled (prometheus-cpp's label order: by name).
prometheus::ClientMetric GuestSample(const plimsoll::v1::Guest& g, double value, bool counter) {
  prometheus::ClientMetric c;
  c.label = {{"domain", g.name()}, {"uuid", g.uuid()}};
  if (counter) {
    c.counter.value = value;
  } else {
    c.gauge.value = value;
  }
  return c;
}

}  // namespace

const char* LibvirtOperationName(LibvirtOperation operation) {
  switch (operation) {
    case LibvirtOperation::kConnect:
      return "connect";
    case LibvirtOperation::kListDomains:
      return "list_domains";
    case LibvirtOperation::kEnableStats:
      return "enable_stats";
    case LibvirtOperation::kBalloonStats:
      return "balloon_stats";
    case LibvirtOperation::kSetTarget:
      return "set_target";
  }
  return "unknown";
}

struct Metrics::Impl {
  // What the exposer and Render collect: refreshes the series read at scrape time, then
  // collects the registry.
  class ScrapeCollectable final : public prometheus::Collectable {
   public:
    explicit ScrapeCollectable(Impl* impl) : impl_(impl) {}
    std::vector<prometheus::MetricFamily> Collect() const override {
      impl_->RefreshAgent();
      impl_->RefreshLibvirtCalls();
      std::vector<prometheus::MetricFamily> families = impl_->registry->Collect();
      impl_->CollectGuests(&families);
      return families;
    }

   private:
    Impl* const impl_;
  };

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ScrapeCollectable> scrape = std::make_shared<ScrapeCollectable>(this);
  std::unique_ptr<prometheus::Exposer> exposer;

  absl::Mutex mu;  // guards guest_view and the agent counters' last values
  std::array<GuestFamilyInfo, kGuestMetrics> guest_families{};
  GuestFamilyInfo guest_state{"plimsoll_guest_state",
                              "1 for the guest's balloon state: ok, stuck, churning or self_deflated."};
  GuestFamilyInfo reclaim_state{"plimsoll_guest_reclaim_state",
                                "1 for the state of the guest agent's reclaimer: off_disabled, off_unsupported, idle, "
                                "active, stopped_pressure or failed; no series without one."};
  // The last published view (immutable, shared with the loop): the per-guest series at scrape time.
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> guest_view ABSL_GUARDED_BY(mu);

  Family<Gauge>* host_budget;
  Family<Gauge>* host_available;
  Family<Gauge>* host_total;
  Family<Gauge>* host_reserve;
  Family<Gauge>* host_guests_actual;
  Family<Gauge>* host_guests_rss;
  Family<Gauge>* pool_members;
  Family<Gauge>* pool_lent;
  Family<Gauge>* pool_reserve;
  Family<Gauge>* pool_covers;
  Family<Gauge>* host_psi_some;
  Family<Gauge>* host_psi_full;
  Family<Gauge>* libvirt_connected;
  Family<Gauge>* guests;
  Family<prometheus::Counter>* decisions;
  prometheus::Counter* decisions_inflate;
  prometheus::Counter* decisions_deflate;
  prometheus::Counter* decisions_hold;
  // By LibvirtOperation, all created at construction.
  std::array<prometheus::Counter*, std::size(kAllLibvirtOperations)> libvirt_errors{};
  prometheus::Histogram* tick_duration;
  prometheus::Counter* agent_spikes;
  prometheus::Counter* ticks_woken;
  prometheus::Counter* balloon_change_events;
  prometheus::Counter* host_stale_ticks;
  prometheus::Counter* pressure_read;
  prometheus::Counter* pressure_lacking;
  prometheus::Counter* pressure_failed;
  // By SafetyRule, all created at construction.
  std::array<prometheus::Counter*, std::size(kAllSafetyRules)> safety_holds{};
  std::array<prometheus::Counter*, std::size(kAllEnvelopeRules)> envelope_rules{};
  prometheus::Counter* reclaim_releases;
  // By BusyReason, all created at construction.
  std::array<prometheus::Counter*, std::size(kAllBusyReasons)> busy_skips{};
  prometheus::Counter* call_timeouts;
  Family<Gauge>* host_data_age;
  // The Plimsoll line (docs/line.md), one series each.
  Gauge* line_capacity;
  Gauge* line_committed;
  Gauge* line_headroom;
  Gauge* line_offered;
  Gauge* line_over;
  Gauge* line_stale;
  prometheus::Counter* config_reloads_success;
  prometheus::Counter* config_reloads_failure;
  Gauge* config_last_reload_success;
  Gauge* config_last_reload_timestamp;

  Family<prometheus::Counter>* agent_reports;
  Family<prometheus::Counter>* agent_rejected;
  uint64_t agent_accepted_seen ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<std::string, uint64_t> agent_rejected_seen ABSL_GUARDED_BY(mu);

  // The agent ingest's counts, read at scrape time. The source runs under agent_mu, so
  // detaching it waits for a scrape in progress.
  absl::Mutex agent_mu;
  std::function<AgentCounts()> agent_source ABSL_GUARDED_BY(agent_mu);
  AgentCounts agent_seen ABSL_GUARDED_BY(agent_mu);
  Gauge* streams_active;
  prometheus::Counter* streams_opened;
  prometheus::Counter* streams_refused;
  prometheus::Counter* streams_timed_out;
  prometheus::Counter* streams_superseded;
  prometheus::Counter* streams_denied;
  prometheus::Counter* streams_flooded;
  Gauge* channels_connected;
  Gauge* channels_without_channel;
  Gauge* channels_without_controller;
  prometheus::Counter* channel_connects;
  prometheus::Counter* channel_connect_failures;
  prometheus::Counter* channel_closed_guest;
  prometheus::Counter* channel_closed_daemon;
  prometheus::Counter* channel_closed_error;
  prometheus::Counter* channel_closed_stopped;
  prometheus::Counter* channel_attached;
  prometheus::Counter* channel_attach_failed;
  prometheus::Counter* channel_attach_no_controller;
  prometheus::Counter* channel_guest_bytes;
  prometheus::Counter* channel_throttled;
  Gauge* vsock_domains;
  prometheus::Counter* vsock_accepted;
  prometheus::Counter* vsock_unknown_cid;
  prometheus::Counter* vsock_accept_errors;

  // prometheus-cpp counters only increment: adds to `c` what is new in `now_value` since `seen`.
  static void AddNew(prometheus::Counter* c, uint64_t now_value, uint64_t& seen) {
    if (now_value > seen) c->Increment(static_cast<double>(now_value - seen));
    seen = std::max(seen, now_value);
  }

  void RefreshAgent() ABSL_LOCKS_EXCLUDED(agent_mu) {
    absl::MutexLock l(&agent_mu);
    if (!agent_source) return;
    const AgentCounts now = agent_source();
    const AgentStreamCounts& st = now.streams;
    AgentStreamCounts& st_seen = agent_seen.streams;
    streams_active->Set(static_cast<double>(st.active));
    AddNew(streams_opened, st.opened, st_seen.opened);
    AddNew(streams_refused, st.refused, st_seen.refused);
    AddNew(streams_timed_out, st.timed_out, st_seen.timed_out);
    AddNew(streams_superseded, st.superseded, st_seen.superseded);
    AddNew(streams_denied, st.denied, st_seen.denied);
    AddNew(streams_flooded, st.flooded, st_seen.flooded);

    const AgentChannelCounts& ch = now.channels;
    AgentChannelCounts& ch_seen = agent_seen.channels;
    channels_connected->Set(static_cast<double>(ch.connected));
    channels_without_channel->Set(static_cast<double>(ch.without_channel - ch.without_controller));
    channels_without_controller->Set(static_cast<double>(ch.without_controller));
    AddNew(channel_connects, ch.connects, ch_seen.connects);
    AddNew(channel_connect_failures, ch.connect_failures, ch_seen.connect_failures);
    AddNew(channel_closed_guest, ch.closed_guest, ch_seen.closed_guest);
    AddNew(channel_closed_daemon, ch.closed_daemon, ch_seen.closed_daemon);
    AddNew(channel_closed_error, ch.closed_error, ch_seen.closed_error);
    AddNew(channel_closed_stopped, ch.closed_domain_stopped, ch_seen.closed_domain_stopped);
    AddNew(channel_attached, ch.attached, ch_seen.attached);
    AddNew(channel_attach_failed, ch.attach_failed, ch_seen.attach_failed);
    AddNew(channel_attach_no_controller, ch.attach_no_controller, ch_seen.attach_no_controller);
    AddNew(channel_guest_bytes, ch.guest_bytes, ch_seen.guest_bytes);
    AddNew(channel_throttled, ch.throttled, ch_seen.throttled);

    const AgentVsockCounts& vs = now.vsock;
    AgentVsockCounts& vs_seen = agent_seen.vsock;
    vsock_domains->Set(static_cast<double>(vs.domains_with_cid));
    AddNew(vsock_accepted, vs.accepted, vs_seen.accepted);
    AddNew(vsock_unknown_cid, vs.unknown_cid, vs_seen.unknown_cid);
    AddNew(vsock_accept_errors, vs.accept_errors, vs_seen.accept_errors);
  }

  // The hypervisor's call counts, read at scrape time; a series per call name, made when first seen.
  absl::Mutex libvirt_calls_mu;
  std::function<std::vector<std::pair<std::string, uint64_t>>()> libvirt_call_source
      ABSL_GUARDED_BY(libvirt_calls_mu);
  prometheus::Family<prometheus::Counter>* libvirt_calls = nullptr;
  struct SeenCall {
    prometheus::Counter* counter = nullptr;
    uint64_t seen = 0;
  };
  absl::flat_hash_map<std::string, SeenCall> libvirt_calls_seen ABSL_GUARDED_BY(libvirt_calls_mu);

  void RefreshLibvirtCalls() ABSL_LOCKS_EXCLUDED(libvirt_calls_mu) {
    absl::MutexLock l(&libvirt_calls_mu);
    if (!libvirt_call_source) return;
    for (const auto& [name, count] : libvirt_call_source()) {
      SeenCall& c = libvirt_calls_seen[name];
      if (c.counter == nullptr) c.counter = &libvirt_calls->Add({{"call", name}});
      if (count > c.seen) c.counter->Increment(static_cast<double>(count - c.seen));
      c.seen = std::max(c.seen, count);
    }
  }

  Family<Gauge>* G(const std::string& name, const std::string& help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
  }
  void GuestFamily(GuestMetric metric, const std::string& name, const std::string& help, bool counter = false) {
    guest_families[metric] = {name, help, counter};
  }

  // Appends the per-guest families, from the last published view: a series per guest and
  // figure the guest has (an absent stat has no series), families with no series left out as
  // prometheus-cpp leaves them out.
  void CollectGuests(std::vector<prometheus::MetricFamily>* out) ABSL_LOCKS_EXCLUDED(mu) {
    std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view;
    {
      absl::MutexLock l(&mu);
      view = guest_view;
    }
    if (view == nullptr || view->guests_size() == 0) return;
    std::array<prometheus::MetricFamily, kGuestMetrics> f;
    for (int m = 0; m < kGuestMetrics; ++m) {
      f[m].name = guest_families[m].name;
      f[m].help = guest_families[m].help;
      f[m].type = guest_families[m].counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
      f[m].metric.reserve(view->guests_size());
    }
    prometheus::MetricFamily states;
    states.name = guest_state.name;
    states.help = guest_state.help;
    states.type = prometheus::MetricType::Gauge;
    prometheus::MetricFamily reclaim_states;
    reclaim_states.name = reclaim_state.name;
    reclaim_states.help = reclaim_state.help;
    reclaim_states.type = prometheus::MetricType::Gauge;
    for (const plimsoll::v1::Guest& g : view->guests()) {
      const auto& s = g.stats();
      auto add = [&](GuestMetric m, bool present, double value) {
        if (present) f[m].metric.push_back(GuestSample(g, value, guest_families[m].counter));
      };
      add(kTarget, true, static_cast<double>(g.target_bytes()));
      add(kActual, true, static_cast<double>(g.actual_bytes()));
      add(kMax, true, static_cast<double>(g.max_bytes()));
      add(kMin, true, static_cast<double>(g.min_bytes()));
      add(kUsable, s.has_usable(), static_cast<double>(s.usable().bytes()));
      add(kDiskCaches, s.has_disk_caches(), static_cast<double>(s.disk_caches().bytes()));
      add(kUnused, s.has_unused(), static_cast<double>(s.unused().bytes()));
      add(kStatsAge, true, s.stats_age_seconds());
      add(kStatsFresh, true, s.stats_fresh() ? 1 : 0);
      add(kManaged, true, g.management_state() == plimsoll::v1::MANAGEMENT_STATE_MANAGED ? 1 : 0);
      add(kPsiSome, s.has_psi_some_avg10(), s.psi_some_avg10());
      add(kRefaults, s.has_refaults_per_second(), s.refaults_per_second());
      add(kActiveFile, s.has_active_file(), static_cast<double>(s.active_file().bytes()));
      add(kInactiveFile, s.has_inactive_file(), static_cast<double>(s.inactive_file().bytes()));
      add(kAnon, s.has_anon(), static_cast<double>(s.anon().bytes()));
      add(kAgentConnected, g.has_agent(), g.agent().connected() ? 1 : 0);
      add(kDiskRead, s.has_disk_read_bytes(), static_cast<double>(s.disk_read_bytes()));
      const auto& bp = s.balloon_pressure();
      add(kBalloonOomKills, bp.has_oom_kills(), static_cast<double>(bp.oom_kills()));
      add(kBalloonAllocStalls, bp.has_alloc_stalls(), static_cast<double>(bp.alloc_stalls()));
      add(kBalloonDirectScan, bp.has_direct_scan_bytes(), static_cast<double>(bp.direct_scan_bytes()));
      add(kBalloonDirectReclaim, bp.has_direct_reclaim_bytes(), static_cast<double>(bp.direct_reclaim_bytes()));
      add(kBalloonAsyncScan, bp.has_async_scan_bytes(), static_cast<double>(bp.async_scan_bytes()));
      add(kBalloonAsyncReclaim, bp.has_async_reclaim_bytes(), static_cast<double>(bp.async_reclaim_bytes()));
      add(kHostRss, s.has_rss(), static_cast<double>(s.rss().bytes()));
      add(kFreePageReporting, g.has_free_page_reporting(), g.free_page_reporting() ? 1 : 0);
      // The agent's reclaimer: no series for a guest whose agent reports none.
      if (g.agent().has_reclaim()) {
        const auto& r = g.agent().reclaim();
        add(kReclaimKeep, r.has_bounds_keep_bytes(), static_cast<double>(r.bounds_keep_bytes()));
        add(kReclaimClaimed, true, static_cast<double>(r.claimed_bytes()));
        add(kReclaimConfirmed, true, static_cast<double>(r.confirmed_bytes()));
        add(kReclaimUnconfirmed, true, static_cast<double>(r.unconfirmed_bytes()));
        add(kReclaimUnconfirmedClaims, true, static_cast<double>(r.unconfirmed_claims()));
        add(kReclaimBoundsPaused, true, r.bounds_pause_left_seconds());
        add(kReclaimCompactions, true, static_cast<double>(r.compactions()));
        add(kReclaimFailedCompactions, true, static_cast<double>(r.failed_compactions()));
        for (const char* st : kReclaimStates) {
          prometheus::ClientMetric c;
          c.label = {{"domain", g.name()}, {"state", st}, {"uuid", g.uuid()}};
          c.gauge.value = r.state() == st ? 1 : 0;
          reclaim_states.metric.push_back(std::move(c));
        }
      }
      // One series per balloon state, 1 for the current one (none until a policy tracks it).
      if (!g.balloon_state().empty()) {
        for (const char* st : kBalloonStates) {
          prometheus::ClientMetric c;
          c.label = {{"domain", g.name()}, {"state", st}, {"uuid", g.uuid()}};
          c.gauge.value = g.balloon_state() == st ? 1 : 0;
          states.metric.push_back(std::move(c));
        }
      }
    }
    for (prometheus::MetricFamily& family : f) {
      if (!family.metric.empty()) out->push_back(std::move(family));
    }
    if (!states.metric.empty()) out->push_back(std::move(states));
    if (!reclaim_states.metric.empty()) out->push_back(std::move(reclaim_states));
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.GuestFamily(kTarget, "plimsoll_guest_balloon_target_bytes", "Balloon target plimsolld last set (guest size, bytes).");
  m.GuestFamily(kActual, "plimsoll_guest_balloon_actual_bytes", "Current balloon size reported by libvirt (bytes).");
  m.GuestFamily(kMax, "plimsoll_guest_max_bytes", "Balloon ceiling: the domain's <memory> (bytes).");
  m.GuestFamily(kMin, "plimsoll_guest_min_bytes", "Floor plimsolld never balloons the guest below (bytes).");
  m.GuestFamily(kUsable, "plimsoll_guest_usable_bytes", "Guest MemAvailable from virtio-balloon stats (bytes).");
  m.GuestFamily(kDiskCaches, "plimsoll_guest_disk_caches_bytes", "Guest page cache (Cached) from virtio-balloon stats (bytes).");
  m.GuestFamily(kUnused, "plimsoll_guest_unused_bytes", "Guest MemFree from virtio-balloon stats (bytes).");
  m.GuestFamily(kStatsAge, "plimsoll_guest_stats_age_seconds", "Seconds since the guest's balloon stats last advanced.");
  m.GuestFamily(kStatsFresh, "plimsoll_guest_stats_fresh", "1 when the guest's stats are fresh enough to shrink it on.");
  m.GuestFamily(kManaged, "plimsoll_guest_managed", "1 when plimsolld is applying targets to the guest.");
  m.GuestFamily(kPsiSome, "plimsoll_guest_psi_some_avg10", "Guest memory PSI 'some' avg10 (percent), from plimsoll-agent.");
  m.GuestFamily(kRefaults, "plimsoll_guest_refaults_per_second", "Guest workingset refaults per second, from plimsoll-agent.");
  m.GuestFamily(kActiveFile, "plimsoll_guest_active_file_bytes", "Guest Active(file) page cache (bytes), from plimsoll-agent.");
  m.GuestFamily(kInactiveFile, "plimsoll_guest_inactive_file_bytes", "Guest Inactive(file) page cache (bytes), from plimsoll-agent.");
  m.GuestFamily(kAnon, "plimsoll_guest_anon_bytes", "Guest AnonPages (bytes), from plimsoll-agent.");
  m.GuestFamily(kAgentConnected, "plimsoll_guest_agent_connected", "1 while the guest's plimsoll-agent has an authenticated stream open.");
  m.GuestFamily(kBalloonOomKills, "plimsoll_guest_balloon_oom_kills", "OOM kills in the guest since it booted (a counter), from its balloon driver (Linux >= 6.12, QEMU >= 9.2).");
  m.GuestFamily(kBalloonAllocStalls, "plimsoll_guest_balloon_alloc_stalls", "Times the guest's allocating tasks entered direct reclaim since it booted (a counter), from its balloon driver.");
  m.GuestFamily(kBalloonDirectScan, "plimsoll_guest_balloon_direct_scan_bytes", "Memory the guest's allocating tasks scanned to reclaim since it booted (a counter, bytes), from its balloon driver.");
  m.GuestFamily(kBalloonDirectReclaim, "plimsoll_guest_balloon_direct_reclaim_bytes", "Memory the guest's allocating tasks reclaimed since it booted (a counter, bytes), from its balloon driver.");
  m.GuestFamily(kBalloonAsyncScan, "plimsoll_guest_balloon_async_scan_bytes", "Memory the guest's kswapd scanned since it booted (a counter, bytes), from its balloon driver.");
  m.GuestFamily(kBalloonAsyncReclaim, "plimsoll_guest_balloon_async_reclaim_bytes", "Memory the guest's kswapd reclaimed since it booted (a counter, bytes), from its balloon driver.");
  m.GuestFamily(kHostRss, "plimsoll_guest_host_rss_bytes", "Resident memory of the guest's QEMU process on the host (bytes), from libvirt's balloon stats: what the guest costs the host.");
  m.GuestFamily(kFreePageReporting, "plimsoll_guest_free_page_reporting", "1 when the guest's balloon device returns the pages the guest frees to the host (free page reporting), 0 when not; no series when not known.");
  m.GuestFamily(kReclaimKeep, "plimsoll_guest_reclaim_keep_bytes", "The keep plimsolld last sent the guest's agent for its in-guest reclaim (bytes); no series when the last ack carried no bounds or bounds with enabled = false.");
  m.GuestFamily(kReclaimClaimed, "plimsoll_guest_reclaim_claimed_bytes_total", "Bytes the guest's agent claims its in-guest reclaim freed, over its processes and the guest's boots (capped on the host's clock). A claim: nothing is decided on it.", true);
  m.GuestFamily(kReclaimConfirmed, "plimsoll_guest_reclaim_confirmed_bytes_total", "Claimed reclaim bytes that the fall of the guest's QEMU RSS confirmed, over the windows of claims judged.", true);
  m.GuestFamily(kReclaimUnconfirmed, "plimsoll_guest_reclaim_unconfirmed_bytes_total", "Claimed reclaim bytes that the fall of the guest's QEMU RSS did not confirm, over the windows of claims judged.", true);
  m.GuestFamily(kReclaimBoundsPaused, "plimsoll_guest_reclaim_bounds_pause_seconds", "Seconds left of the pause of the guest's reclaim bounds after claimed reclaim that QEMU's RSS did not show (plimsolld sends enabled = false meanwhile); 0: not paused.");
  m.GuestFamily(kReclaimCompactions, "plimsoll_guest_reclaim_compactions_total", "Compactions the guest's agent made after its reclaim rounds (free page reporting returns only whole 2 MiB blocks), as it reports them; a report adds at most one a host second.", true);
  m.GuestFamily(kReclaimFailedCompactions, "plimsoll_guest_reclaim_failed_compactions_total", "Of the guest agent's compactions, those whose write to /proc/sys/vm/compact_memory failed.", true);
  m.GuestFamily(kReclaimUnconfirmedClaims, "plimsoll_guest_reclaim_unconfirmed_claims_total", "Windows of claimed reclaim (at least 64 MiB) judged unconfirmed: the guest's QEMU RSS fell by less than a quarter of the claim within the grace.", true);
  m.GuestFamily(kDiskRead, "plimsoll_guest_disk_read_bytes", "Bytes QEMU saw the guest read from its disks since the domain started (a counter; rate() it), from libvirt's block stats.");
  m.agent_reports = &prometheus::BuildCounter().Name("plimsoll_agent_reports_total").Help("Agent reports accepted.").Register(*m.registry);
  m.agent_reports->Add({});
  m.agent_rejected = &prometheus::BuildCounter().Name("plimsoll_agent_reports_rejected_total").Help("Agent reports rejected, by reason.").Register(*m.registry);
  m.streams_active = &m.G("plimsoll_agent_streams_active", "Agent streams open now, proven or not (the listener refuses more than its limit).")->Add({});
  m.streams_opened = &prometheus::BuildCounter().Name("plimsoll_agent_streams_opened_total").Help("Agent streams accepted by the stream limit.").Register(*m.registry).Add({});
  m.streams_refused = &prometheus::BuildCounter().Name("plimsoll_agent_streams_refused_total").Help("Agent streams refused because the listener was at its stream limit.").Register(*m.registry).Add({});
  {
    auto& ended = prometheus::BuildCounter().Name("plimsoll_agent_streams_ended_total").Help("Agent streams ended by plimsolld, by reason: timeout, superseded, denied, flood.").Register(*m.registry);
    m.streams_timed_out = &ended.Add({{"reason", "timeout"}});
    m.streams_superseded = &ended.Add({{"reason", "superseded"}});
    m.streams_denied = &ended.Add({{"reason", "denied"}});
    m.streams_flooded = &ended.Add({{"reason", "flood"}});
  }
  {
    auto* channels = m.G("plimsoll_agent_channels", "Running domains by the state of their virtio-serial agent channel: connected, no_channel (none usable in the XML), no_controller (cannot be hot-plugged).");
    m.channels_connected = &channels->Add({{"state", "connected"}});
    m.channels_without_channel = &channels->Add({{"state", "no_channel"}});
    m.channels_without_controller = &channels->Add({{"state", "no_controller"}});
    auto& connects = prometheus::BuildCounter().Name("plimsoll_agent_channel_connects_total").Help("Connections to domains' agent channel sockets, by result.").Register(*m.registry);
    m.channel_connects = &connects.Add({{"result", "connected"}});
    m.channel_connect_failures = &connects.Add({{"result", "failed"}});
    auto& closed = prometheus::BuildCounter().Name("plimsoll_agent_channel_closed_total").Help("Agent channel connections that ended, by reason: guest_closed (QEMU closed the socket), daemon_closed (the gRPC session ended), error, domain_stopped.").Register(*m.registry);
    m.channel_closed_guest = &closed.Add({{"reason", "guest_closed"}});
    m.channel_closed_daemon = &closed.Add({{"reason", "daemon_closed"}});
    m.channel_closed_error = &closed.Add({{"reason", "error"}});
    m.channel_closed_stopped = &closed.Add({{"reason", "domain_stopped"}});
    auto& attach = prometheus::BuildCounter().Name("plimsoll_agent_channel_attach_total").Help("Agent channel hot-plugs (agent.channel_autoattach), by result: attached, failed, no_controller (a domain without a virtio-serial controller, counted once).").Register(*m.registry);
    m.channel_attached = &attach.Add({{"result", "attached"}});
    m.channel_attach_failed = &attach.Add({{"result", "failed"}});
    m.channel_attach_no_controller = &attach.Add({{"result", "no_controller"}});
    m.channel_guest_bytes = &prometheus::BuildCounter().Name("plimsoll_agent_channel_guest_bytes_total").Help("Bytes guests sent on their agent channels.").Register(*m.registry).Add({});
    m.channel_throttled = &prometheus::BuildCounter().Name("plimsoll_agent_channel_throttled_total").Help("Times a guest's agent channel was not read for a while because the guest used up its byte budget.").Register(*m.registry).Add({});
  }
  {
    auto& conns = prometheus::BuildCounter().Name("plimsoll_agent_vsock_connections_total").Help("Connections accepted on the agent vsock port (agent.vsock_port), by result: accepted (from a running domain's CID, handed to gRPC), unknown_cid (closed unanswered: no running domain has that CID), accept_error.").Register(*m.registry);
    m.vsock_accepted = &conns.Add({{"result", "accepted"}});
    m.vsock_unknown_cid = &conns.Add({{"result", "unknown_cid"}});
    m.vsock_accept_errors = &conns.Add({{"result", "accept_error"}});
    m.vsock_domains = &m.G("plimsoll_agent_vsock_domains", "Running domains whose live XML gives a usable vsock CID (the identity of their vsock agent connections).")->Add({});
  }
  m.host_budget = m.G("plimsoll_host_guest_budget_bytes", "Memory all guests may use together: min(MemTotal - reserve, configured budget).");
  m.host_available = m.G("plimsoll_host_mem_available_bytes", "Host MemAvailable (bytes).");
  m.host_total = m.G("plimsoll_host_mem_total_bytes", "Host MemTotal (bytes).");
  m.host_reserve = m.G("plimsoll_host_reserve_bytes", "Memory kept for the host itself (bytes).");
  m.host_guests_actual = m.G("plimsoll_host_guests_actual_bytes", "Sum of all guests' current balloon sizes (bytes).");
  m.host_guests_rss = m.G("plimsoll_host_guests_rss_bytes", "Sum of the guests' QEMU RSS (bytes), over the guests that report it: what the guests really cost the host; no series while no guest reports it.");
  m.pool_members = m.G("plimsoll_reclaim_pool_members", "Guests costed by their QEMU RSS in the policy's reclaim pool (in-guest reclaim; 0 without).");
  m.pool_lent = m.G("plimsoll_reclaim_pool_lent_bytes", "What the pool's guests lend: their balloon sizes above their cost (bytes).");
  m.pool_reserve = m.G("plimsoll_reclaim_pool_reserve_bytes", "The reserve committed for the pool's bursts (bytes).");
  m.pool_covers = m.G("plimsoll_reclaim_pool_covers", "1 when the pool's lent memory covers its reserve (the budget counts the guests' cost), else 0.");
  m.host_psi_some = m.G("plimsoll_host_psi_memory_some_avg10", "Host memory PSI 'some' avg10 (percent of time stalled).");
  m.host_psi_full = m.G("plimsoll_host_psi_memory_full_avg10", "Host memory PSI 'full' avg10 (percent of time stalled).");
  m.libvirt_connected = m.G("plimsoll_libvirt_connected", "1 while the libvirt connection is up.");
  m.guests = m.G("plimsoll_guests", "Guests plimsolld knows, by management state.");
  m.decisions = &prometheus::BuildCounter().Name("plimsoll_decisions_total").Help("Balloon decisions by direction (inflate = guest shrinks).").Register(*m.registry);
  m.decisions_inflate = &m.decisions->Add({{"direction", "inflate"}});
  m.decisions_deflate = &m.decisions->Add({{"direction", "deflate"}});
  m.decisions_hold = &m.decisions->Add({{"direction", "hold"}});
  {
    auto& errors = prometheus::BuildCounter().Name("plimsoll_libvirt_errors_total").Help("Failed libvirt calls, by operation.").Register(*m.registry);
    for (LibvirtOperation op : kAllLibvirtOperations) {
      m.libvirt_errors[static_cast<size_t>(op)] = &errors.Add({{"operation", LibvirtOperationName(op)}});
    }
  }
  m.libvirt_calls = &prometheus::BuildCounter().Name("plimsoll_libvirt_calls_total").Help("libvirt calls plimsolld made, by function (one virConnectGetAllDomainStats a tick where the driver fills it).").Register(*m.registry);
  auto& tick = prometheus::BuildHistogram().Name("plimsoll_tick_duration_seconds").Help("Wall time of one control tick (collect, decide, apply).").Register(*m.registry);
  auto& reloads = prometheus::BuildCounter().Name("plimsoll_config_reloads_total").Help("Configuration reloads (SIGHUP), by result: success or failure (the old config is kept).").Register(*m.registry);
  m.config_reloads_success = &reloads.Add({{"result", "success"}});
  m.config_reloads_failure = &reloads.Add({{"result", "failure"}});
  m.config_last_reload_success = &m.G("plimsoll_config_last_reload_success", "1 when the last configuration load or reload succeeded, 0 when the last reload failed and the previous config is still in use.")->Add({});
  m.config_last_reload_timestamp = &m.G("plimsoll_config_last_reload_timestamp_seconds", "Unix time of the last configuration load or reload attempt.")->Add({});
  m.agent_spikes = &prometheus::BuildCounter().Name("plimsoll_agent_spikes_total").Help("Agent spike reports (PSI trigger) that asked for an early tick; those closer together than min_wake_interval share one.").Register(*m.registry).Add({});
  m.balloon_change_events = &prometheus::BuildCounter().Name("plimsoll_balloon_change_events_total").Help("Balloon-change events from libvirt (the balloon's size changed); their sizes reach the view and plimsoll_guest_balloon_actual_bytes between ticks, at most once per min_wake_interval.").Register(*m.registry).Add({});
  m.ticks_woken = &prometheus::BuildCounter().Name("plimsoll_ticks_woken_total").Help("Ticks started before their schedule because something asked for one (agent spikes, guests starting or stopping, API calls, reloads); at most one per min_wake_interval.").Register(*m.registry).Add({});
  m.host_stale_ticks = &prometheus::BuildCounter().Name("plimsoll_host_stale_ticks_total").Help("Ticks whose host memory read failed: they decided on the last good reading and shrank no guest.").Register(*m.registry).Add({});
  auto& pressure = prometheus::BuildCounter().Name("plimsoll_balloon_pressure_reads_total").Help("QEMU monitor reads of guests' balloon pressure counters, by result: read (counters came), lacking (QEMU < 9.2, a guest kernel < 6.12 or no balloon: asked again after 5 min), failed.").Register(*m.registry);
  m.pressure_read = &pressure.Add({{"result", "read"}});
  m.pressure_lacking = &pressure.Add({{"result", "lacking"}});
  m.pressure_failed = &pressure.Add({{"result", "failed"}});
  auto& safety = prometheus::BuildCounter().Name("plimsoll_safety_holds_total").Help("Decisions the safety net changed, by rule: a shrink held for no_stats, stale_stats or host_stale; inflation_stopped: a balloon still inflating when its data went bad, stopped where it was.").Register(*m.registry);
  for (SafetyRule rule : kAllSafetyRules) {
    m.safety_holds[static_cast<size_t>(rule)] = &safety.Add({{"rule", SafetyRuleName(rule)}});
  }
  auto& envelope = prometheus::BuildCounter().Name("plimsoll_envelope_rules_total").Help("Decisions the envelope changed, by rule, in the order it applies them: pin, pin_floor, pin_step, hold_released, hold, clamp, lowered_min_floor, lowered_min_step, exclude, the safety net's no_stats, stale_stats, host_stale, inflation_stopped, then absent and reassert.").Register(*m.registry);
  for (EnvelopeRule rule : kAllEnvelopeRules) {
    m.envelope_rules[static_cast<size_t>(rule)] = &envelope.Add({{"rule", EnvelopeRuleName(rule)}});
  }
  m.reclaim_releases = &prometheus::BuildCounter().Name("plimsoll_reclaim_holds_released_total").Help("Reclaim holds ended early on a guest in distress (pressure over target, an OOM kill, a self-deflation); the rest of the plan held.").Register(*m.registry).Add({});
  auto& busy = prometheus::BuildCounter().Name("plimsoll_balloon_busy_skips_total").Help("Balloon moves skipped because the domain was busy, by reason: in_flight (an earlier balloon call to it has not returned), job (an active libvirt job such as a migration), pool_full (every balloon worker busy). Tried again next tick.").Register(*m.registry);
  for (BusyReason r : kAllBusyReasons) m.busy_skips[static_cast<size_t>(r)] = &busy.Add({{"reason", BusyReasonName(r)}});
  m.call_timeouts = &prometheus::BuildCounter().Name("plimsoll_balloon_call_timeouts_total").Help("Balloon calls (set target, stats period) that did not return within balloon_call_deadline: their outcome is unknown, the domain may take a new call.").Register(*m.registry).Add({});
  m.host_data_age = m.G("plimsoll_host_data_age_seconds", "Seconds since the host memory numbers in use were read; 0 when the last tick read them.");
  m.line_capacity = &m.G("plimsoll_host_line_capacity_bytes", "The Plimsoll line's capacity: the guest budget, min(MemTotal - reserve, configured budget).")->Add({});
  m.line_committed = &m.G("plimsoll_host_line_committed_bytes", "What the running guests must keep (per guest max(floor, working set), at its ceiling without fresh stats) plus the burst reserve.")->Add({});
  m.line_headroom = &m.G("plimsoll_host_line_headroom_bytes", "capacity - committed - new_guest_room; negative over the line.")->Add({});
  m.line_offered = &m.G("plimsoll_host_line_offered_bytes", "Guest memory this host offers to schedulers: the headroom held for line.offer_hold, at least 0; 0 while the line is stale.")->Add({});
  m.line_over = &m.G("plimsoll_host_over_line", "1 while committed exceeds capacity: the host holds more than it can back.")->Add({});
  // Stale until the first tick publishes a line: a host never offers before it has looked.
  m.line_stale = &m.G("plimsoll_host_line_stale", "1 while the line cannot be trusted (host memory not read, libvirt disconnected, no tick yet); the offer is then 0.")->Add({});
  m.line_stale->Set(1);
  m.tick_duration = &tick.Add({}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
}

Metrics::~Metrics() {
  // Stop serving before anything a scrape reads goes away.
  impl_->exposer.reset();
}

absl::Status Metrics::Serve(const std::string& listen) {
  try {
    impl_->exposer = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  impl_->exposer->RegisterCollectable(impl_->scrape);
  return absl::OkStatus();
}

int Metrics::bound_port() const {
  if (!impl_->exposer) return 0;
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::ConfigLoaded(double unix_seconds) {
  impl_->config_last_reload_success->Set(1);
  impl_->config_last_reload_timestamp->Set(unix_seconds);
}

void Metrics::ConfigReloaded(bool success, double unix_seconds) {
  (success ? impl_->config_reloads_success : impl_->config_reloads_failure)->Increment();
  impl_->config_last_reload_success->Set(success ? 1 : 0);
  impl_->config_last_reload_timestamp->Set(unix_seconds);
}

std::shared_ptr<prometheus::Registry> Metrics::registry() const { return impl_->registry; }

void Metrics::Publish(std::shared_ptr<const plimsoll::v1::ListGuestsResponse> published) {
  Impl& m = *impl_;
  const plimsoll::v1::ListGuestsResponse& view = *published;
  std::array<int, plimsoll::v1::ManagementState_ARRAYSIZE> by_state{};
  for (const auto& g : view.guests()) {
    if (g.management_state() >= 0 && g.management_state() < plimsoll::v1::ManagementState_ARRAYSIZE) {
      by_state[g.management_state()]++;
    }
  }
  {
    absl::MutexLock l(&m.mu);
    m.guest_view = published;  // copied: `view` is read below
  }
  const auto& h = view.host();
  m.host_budget->Add({}).Set(h.guest_budget_bytes());
  m.host_available->Add({}).Set(h.mem_available_bytes());
  m.host_total->Add({}).Set(h.mem_total_bytes());
  m.host_reserve->Add({}).Set(h.host_reserve_bytes());
  m.host_guests_actual->Add({}).Set(h.guests_actual_bytes());
  // The sum is over the guests that report their RSS: with none, there is no sum (no series),
  // never a 0 that would read as "the guests cost nothing".
  if (h.has_guests_rss_bytes()) {
    m.host_guests_rss->Add({}).Set(static_cast<double>(h.guests_rss_bytes()));
  } else if (m.host_guests_rss->Has({})) {
    m.host_guests_rss->Remove(&m.host_guests_rss->Add({}));
  }
  m.pool_members->Add({}).Set(h.reclaim_pool().members());
  m.pool_lent->Add({}).Set(static_cast<double>(h.reclaim_pool().lent_bytes()));
  m.pool_reserve->Add({}).Set(static_cast<double>(h.reclaim_pool().reserve_bytes()));
  m.pool_covers->Add({}).Set(h.reclaim_pool().covers() ? 1 : 0);
  m.host_psi_some->Add({}).Set(h.psi_memory_some_avg10());
  m.host_psi_full->Add({}).Set(h.psi_memory_full_avg10());
  m.host_data_age->Add({}).Set(h.host_data_age_seconds());
  if (view.has_host_line()) {
    const auto& line = view.host_line();
    m.line_capacity->Set(static_cast<double>(line.capacity_bytes()));
    m.line_committed->Set(static_cast<double>(line.committed_bytes()));
    m.line_headroom->Set(static_cast<double>(line.headroom_bytes()));
    m.line_offered->Set(static_cast<double>(line.offered_bytes()));
    m.line_over->Set(line.over_line() ? 1 : 0);
    m.line_stale->Set(line.stale() ? 1 : 0);
  }
  m.libvirt_connected->Add({}).Set(h.libvirt_connected() ? 1 : 0);
  for (int s = plimsoll::v1::ManagementState_MIN; s <= plimsoll::v1::ManagementState_MAX; ++s) {
    if (s == plimsoll::v1::MANAGEMENT_STATE_UNSPECIFIED) continue;
    const std::string name = plimsoll::v1::ManagementState_Name(static_cast<plimsoll::v1::ManagementState>(s));
    std::string label = name.substr(std::string("MANAGEMENT_STATE_").size());
    for (char& c : label) c = static_cast<char>(std::tolower(c));
    m.guests->Add({{"state", label}}).Set(by_state[s]);
  }
}

void Metrics::PublishAgentCounters(uint64_t accepted,
                                   const std::vector<std::pair<std::string, uint64_t>>& rejected_by_reason) {
  Impl& m = *impl_;
  absl::MutexLock l(&m.mu);
  // prometheus-cpp counters only increment: add what is new since the last publish.
  if (accepted > m.agent_accepted_seen) {
    m.agent_reports->Add({}).Increment(static_cast<double>(accepted - m.agent_accepted_seen));
    m.agent_accepted_seen = accepted;
  }
  for (const auto& [reason, count] : rejected_by_reason) {
    auto& counter = m.agent_rejected->Add({{"reason", reason}});
    uint64_t& seen = m.agent_rejected_seen[reason];
    if (count > seen) {
      counter.Increment(static_cast<double>(count - seen));
      seen = count;
    }
  }
}

void Metrics::SetAgentSource(std::function<AgentCounts()> source) {
  absl::MutexLock l(&impl_->agent_mu);
  impl_->agent_source = std::move(source);
}

void Metrics::SetLibvirtCallSource(std::function<std::vector<std::pair<std::string, uint64_t>>()> source) {
  absl::MutexLock l(&impl_->libvirt_calls_mu);
  impl_->libvirt_call_source = std::move(source);
}

void Metrics::CountDecision(plimsoll::v1::Direction direction) {
  prometheus::Counter* c = direction == plimsoll::v1::DIRECTION_INFLATE   ? impl_->decisions_inflate
                           : direction == plimsoll::v1::DIRECTION_DEFLATE ? impl_->decisions_deflate
                                                                          : impl_->decisions_hold;
  c->Increment();
}

void Metrics::CountLibvirtError(LibvirtOperation operation) {
  impl_->libvirt_errors[static_cast<size_t>(operation)]->Increment();
}

void Metrics::DeclareAgentRejectReasons(const std::vector<std::string>& reasons) {
  for (const std::string& reason : reasons) impl_->agent_rejected->Add({{"reason", reason}});
}

void Metrics::ObserveTick(double seconds) { impl_->tick_duration->Observe(seconds); }

void Metrics::CountAgentSpike() { impl_->agent_spikes->Increment(); }

void Metrics::CountWokenTick() { impl_->ticks_woken->Increment(); }

void Metrics::CountBalloonChangeEvent() { impl_->balloon_change_events->Increment(); }

void Metrics::PublishBalloonSizes(std::shared_ptr<const plimsoll::v1::ListGuestsResponse> view) {
  Impl& m = *impl_;
  const double sum = static_cast<double>(view->host().guests_actual_bytes());
  {
    absl::MutexLock l(&m.mu);
    m.guest_view = std::move(view);
  }
  m.host_guests_actual->Add({}).Set(sum);
}

void Metrics::CountHostStaleTick() { impl_->host_stale_ticks->Increment(); }

void Metrics::AddBalloonPressureReads(uint64_t read, uint64_t lacking, uint64_t failed) {
  impl_->pressure_read->Increment(static_cast<double>(read));
  impl_->pressure_lacking->Increment(static_cast<double>(lacking));
  impl_->pressure_failed->Increment(static_cast<double>(failed));
}

void Metrics::CountReclaimRelease() { impl_->reclaim_releases->Increment(); }

void Metrics::CountSafetyHold(SafetyRule rule) { impl_->safety_holds[static_cast<size_t>(rule)]->Increment(); }
void Metrics::CountEnvelopeRule(EnvelopeRule rule) {
  impl_->envelope_rules[static_cast<size_t>(rule)]->Increment();
}

void Metrics::CountBalloonBusySkip(BusyReason reason) { impl_->busy_skips[static_cast<size_t>(reason)]->Increment(); }

void Metrics::CountBalloonCallTimeout() { impl_->call_timeouts->Increment(); }


const char* BusyReasonName(BusyReason reason) {
  switch (reason) {
    case BusyReason::kInFlight:
      return "in_flight";
    case BusyReason::kJob:
      return "job";
    case BusyReason::kPoolFull:
      return "pool_full";
  }
  return "unknown";
}

const char* SafetyRuleName(SafetyRule rule) {
  switch (rule) {
    case SafetyRule::kNoStats:
      return "no_stats";
    case SafetyRule::kStaleStats:
      return "stale_stats";
    case SafetyRule::kHostStale:
      return "host_stale";
    case SafetyRule::kInflationStopped:
      return "inflation_stopped";
  }
  return "unknown";
}

std::string Metrics::Render() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(impl_->scrape->Collect());
}

}  // namespace plimsoll::server
