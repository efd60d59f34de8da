#include "server/daemon.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/agent/agent_ingest.h"
#include "server/agent/guest_reclaim_bounds.h"
#include "server/agent/agent_store.h"
#include "server/agent/host_key.h"
#include "server/agent/report_validator.h"
#include "server/agent/vsock_listener.h"
#include "server/api/control_service.h"
#include "server/host/proc_host_reader.h"
#include "server/hypervisor/libvirt_hypervisor.h"

namespace plimsoll::server {
namespace {

// True when something accepts connections on the unix socket at `path`.
bool SocketInUse(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool in_use = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return in_use;
}

// Raises the soft file descriptor limit to the hard one. Every agent connection costs a
// descriptor before it can prove anything, and systemd starts services with a soft limit of
// 1024: at that limit one guest holding ~1000 connections starved the control loop
// (/proc/meminfo could not be opened) and the control API and /metrics (accept failed), seen by
// tests/e2e/test_hostile_agent_e2e.py. The hard limit (524288 under systemd) is above what
// a guest can hold open through QEMU user networking (one source address, ~28k ports).
void RaiseFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    PLOG_WARNING << "cannot raise the file descriptor limit from " << before << " to " << limit.rlim_max << ": "
                 << strerror(errno);
    return;
  }
  PLOG_INFO << "file descriptor limit raised from " << before << " to " << limit.rlim_max;
}

LoopOptions LoopOptionsFrom(const Options& options) {
  LoopOptions lo;
  lo.tick = options.tick;
  lo.stats_period_seconds = options.stats_period_seconds;
  lo.rules.min_bytes = options.min_bytes;
  lo.rules.min_fraction = options.min_fraction;
  lo.rules.stale_after = options.stale_after;
  lo.host_reserve_bytes = options.host_reserve_bytes;
  lo.guest_memory_budget_bytes = options.guest_memory_budget_bytes;
  lo.log_every_decision = options.log_every_decision;
  lo.min_wake_interval = options.min_wake_interval;
  lo.balloon_workers = options.balloon_workers;
  lo.balloon_call_deadline = options.balloon_call_deadline;
  lo.block_stats_interval = options.block_stats_interval;
  lo.balloon_pressure_stats = options.balloon_pressure_stats;
  lo.in_guest_reclaim = options.agent_reclaim_bounds;
  lo.line.new_guest_room_bytes = options.line_new_guest_room_bytes;
  lo.line.burst_reserve_bytes = options.line_burst_reserve_bytes;
  lo.offer_hold = options.line_offer_hold;
  return lo;
}

// The agent ingest as the config's `agent` section sets it up.
agent::AgentIngestOptions AgentIngestOptionsFrom(const Options& options) {
  agent::AgentIngestOptions o;
  o.tcp_listen = options.agent_listen;
  o.tls_cert_file = options.agent_tls_cert_file;
  o.tls_key_file = options.agent_tls_key_file;
  if (!options.agent_channel_name.empty()) {
    o.virtio_serial.emplace();
    o.virtio_serial->channel_name = options.agent_channel_name;
    o.virtio_serial->autoattach = options.agent_channel_autoattach;
    o.virtio_serial->socket_dir = options.agent_channel_socket_dir;
  }
  if (options.agent_vsock_port != 0) {
    o.vsock.emplace();
    o.vsock->port = options.agent_vsock_port;
    if (!options.agent_channel_name.empty()) o.vsock->channel_name = options.agent_channel_name;
  }
  return o;
}

// The ingest's numbers as /metrics exports them.
Metrics::AgentCounts AgentMetrics(const agent::AgentIngestCounters& c) {
  Metrics::AgentCounts out;
  out.streams.active = c.streams.active_streams;
  out.streams.opened = c.streams.streams_opened;
  out.streams.refused = c.streams.streams_refused;
  out.streams.timed_out = c.streams.streams_timed_out;
  out.streams.superseded = c.streams.streams_superseded;
  out.streams.denied = c.streams.streams_denied;
  out.streams.flooded = c.streams.streams_flooded;
  const agent::VirtioSerialCounters& ch = c.virtio_serial;
  out.channels.connected = ch.connected;
  out.channels.without_channel = ch.without_channel;
  out.channels.without_controller = ch.without_controller;
  out.channels.connects = ch.connects;
  out.channels.connect_failures = ch.connect_failures;
  out.channels.closed_guest = ch.ended_guest;
  out.channels.closed_daemon = ch.ended_daemon;
  out.channels.closed_error = ch.ended_error;
  out.channels.closed_domain_stopped = ch.ended_gone;
  out.channels.attached = ch.attached;
  out.channels.attach_failed = ch.attach_failed;
  out.channels.attach_no_controller = ch.attach_no_controller;
  out.channels.guest_bytes = ch.pump.bytes_from_guests;
  out.channels.throttled = ch.pump.throttled;
  out.vsock.domains_with_cid = c.vsock.domains_with_cid;
  out.vsock.accepted = c.vsock.accepted;
  out.vsock.unknown_cid = c.vsock.unknown_cid;
  out.vsock.accept_errors = c.vsock.accept_errors;
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const Options& options, DaemonOverrides overrides) {
  ControlApiOptions control;
  control.unix_socket = absl::StartsWith(options.grpc_listen, "unix:");
  control.state_file.clear();
  return Create(options, control, std::move(overrides));
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const Options& options, const ControlApiOptions& control,
                                                       DaemonOverrides overrides) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->options_ = options;
  d->control_ = control;
  d->clock_ = overrides.clock ? overrides.clock : RealClock::Get();
  d->vsock_listener_ = std::move(overrides.vsock_listener);
  auto policy = policy::MakePolicy(options.policy);
  if (!policy.ok()) return policy.status();
  d->policy_ = std::move(*policy);
  d->hypervisor_ = overrides.hypervisor
                       ? std::move(overrides.hypervisor)
                       : std::make_unique<hypervisor::LibvirtHypervisor>(options.libvirt_uri);
  d->host_ = overrides.host ? std::move(overrides.host)
                            : std::make_unique<host::ProcHostReader>(options.proc_root);
  d->live_actuator_ = std::make_unique<HypervisorActuator>(d->hypervisor_.get());
  d->dry_run_actuator_ = std::make_unique<DryRunActuator>();
  d->metrics_ = std::make_unique<Metrics>();
  d->metrics_->SetLibvirtCallSource([hv = d->hypervisor_.get()] { return hv->CallCounts(); });
  d->metrics_->ConfigLoaded(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  {
    std::unique_ptr<StateStore> state;
    if (!control.state_file.empty()) state = std::make_unique<StateStore>(control.state_file, d->clock_);
    auto store = OverrideStore::Open(std::move(state), d->clock_);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("control.state_file: ", store.status().message(),
                                       " (refusing to start without the stored overrides)"));
    }
    d->store_ = std::move(*store);
    if (!d->store_->load_problem().ok()) {
      PLOG_ERROR << "control state (control.state_file): " << d->store_->load_problem().message()
                 << " (also shown in GetHostStatus state_problem)";
    } else if (!control.state_file.empty()) {
      const auto snap = d->store_->snapshot();
      PLOG_INFO << "control state loaded from " << control.state_file << " overrides=" << snap->guests.size()
                << " generation=" << snap->generation << " host_policy={" << snap->host.ShortDebugString() << "}";
    }
  }
  d->hub_ = std::make_unique<WatchHub>(d->clock_);
  // Reports come over TCP (agent_listen, each proven with the guest's token), the domains' own
  // virtio-serial channels (channel_name) and vsock (vsock_port), whose identity is the
  // connection's: one ingest takes them all into one validator and store.
  agent::AgentIngestOptions ingest = AgentIngestOptionsFrom(options);
  if (!ingest.tcp_listen.empty() || ingest.virtio_serial.has_value() || ingest.vsock.has_value()) {
    // Without a TCP listener no token is ever checked, so no host key is needed.
    std::string key;
    if (!ingest.tcp_listen.empty()) {
      absl::StatusOr<std::string> loaded = agent::LoadOrCreateHostKey(options.agent_host_key_file);
      if (!loaded.ok()) {
        return absl::Status(loaded.status().code(),
                            absl::StrCat("agent.agent_host_key_file: ", loaded.status().message()));
      }
      key = *std::move(loaded);
    }
    d->agent_validator_ = std::make_unique<agent::ReportValidator>(key);
    // Every rejection reason's series exists at 0 before the first report, so the first
    // rejection shows as an increase.
    std::vector<std::string> reasons;
    for (agent::RejectReason r : agent::AllRejectReasons()) reasons.emplace_back(agent::RejectReasonName(r));
    d->metrics_->DeclareAgentRejectReasons(reasons);
    agent::AgentStoreOptions so;
    so.stale_after = options.agent_stale_after;
    d->agent_store_ = std::make_unique<agent::AgentStore>(d->agent_validator_.get(), d->clock_, so);
    if (options.agent_reclaim_bounds) {
      d->reclaim_bounds_ = std::make_unique<agent::PublishedReclaimBounds>();
      ingest.streams.reclaim_bounds = d->reclaim_bounds_.get();
    }
    d->agent_ = std::make_unique<agent::AgentIngest>(std::move(ingest), d->agent_store_.get(), d->clock_);
    // Read at scrape time: a listener under attack shows in /metrics even while the loop is
    // slow. Shutdown() detaches this before the ingest goes away.
    d->metrics_->SetAgentSource([ingest = d->agent_.get()] { return AgentMetrics(ingest->counters()); });
  }
  const LoopOptions lo = LoopOptionsFrom(options);
  LoopDeps deps;
  deps.hypervisor = d->hypervisor_.get();
  deps.host = d->host_.get();
  deps.policy = d->policy_.get();
  deps.actuator = options.dry_run ? d->dry_run_actuator_.get() : d->live_actuator_.get();
  deps.clock = d->clock_;
  deps.metrics = d->metrics_.get();
  deps.agents = d->agent_store_.get();
  deps.overrides = d->store_.get();
  deps.hub = d->hub_.get();
  d->loop_ = std::make_unique<ControlLoop>(deps, lo);
  ControlLoop* loop = d->loop_.get();
  d->hypervisor_->SetEventCallback([loop, daemon = d.get()](const hypervisor::DomainEvent& e) {
    // Lifecycle changes are worth an early tick (and a look for the domain's agent channel);
    // a balloon move is folded into the view between ticks (ControlLoop::NoteBalloonChange).
    if (e.kind == hypervisor::DomainEvent::Kind::kBalloonChange) {
      loop->NoteBalloonChange(e.uuid, e.balloon_bytes);
      return;
    }
    if (e.kind == hypervisor::DomainEvent::Kind::kStopped || e.kind == hypervisor::DomainEvent::Kind::kCrashed) {
      loop->NoteStopped(e.uuid);
    }
    loop->Wake();
    // A domain that starts or stops gains or loses an agent channel, and a vsock CID.
    if (daemon->agent_) daemon->agent_->Wake();
  });
  if (d->agent_store_) {
    // A PSI spike inside a guest must not wait for the next tick: the loop ticks early (no
    // sooner than min_wake_interval after its last tick), serving that guest first.
    d->agent_store_->SetSpikeListener([loop](const std::string& uuid) { loop->WakeForSpike(uuid); });
  }
  if (d->reclaim_bounds_) d->reclaim_bounds_->SetSource([loop] { return loop->Published(); });
  d->core_ = std::make_unique<LoopControlCore>(loop, d->store_.get(), d->hub_.get(), d->clock_);
  d->authz_ = std::make_unique<Authorizer>(control.roles);
  ControlServiceOptions so;
  so.authz = d->authz_.get();
  so.policy_names = policy::PolicyNames();
  d->service_ = std::make_unique<ControlService>([loop] { return loop->Published(); }, d->core_.get(), so);
  return d;
}

Daemon::~Daemon() { Shutdown(); }

void Daemon::SetConfigSource(std::string config_path, plimsoll::v1::DaemonConfig flag_config) {
  absl::MutexLock l(&reload_mu_);
  has_config_source_ = true;
  config_path_ = std::move(config_path);
  flag_config_ = std::move(flag_config);
}

Options Daemon::options() const {
  absl::MutexLock l(&reload_mu_);
  return options_;
}

absl::Status Daemon::ReloadConfig() {
  absl::MutexLock l(&reload_mu_);
  if (!has_config_source_) {
    return absl::FailedPreconditionError("no configuration source to reload (SetConfigSource was not called)");
  }
  const std::string source = config_path_.empty() ? std::string("command-line flags only") : config_path_;
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  auto fail = [&](const absl::Status& s) {
    metrics_->ConfigReloaded(false, now);
    PLOG_ERROR << "config reload from " << source << " failed, still running on the previous configuration: "
               << s.message();
    return s;
  };
  absl::StatusOr<EffectiveConfig> next = LoadEffectiveConfig(config_path_, flag_config_);
  if (!next.ok()) return fail(next.status());
  for (const std::string& w : next->options.warnings) PLOG_WARNING << "config reload: " << w;
  const ConfigChanges changes = DiffConfig(options_, control_, next->options, next->control);
  const Options merged = MergeReloadable(options_, next->options);
  if (changes.loop) {
    LoopReconfig r;
    r.options = LoopOptionsFrom(merged);
    if (changes.policy) {
      auto made = policy::MakePolicy(merged.policy);
      if (!made.ok()) return fail(absl::InvalidArgumentError(absl::StrCat("config field \"policy\": ", made.status().message())));
      r.policy = std::move(*made);
    }
    if (changes.dry_run) r.actuator = merged.dry_run ? dry_run_actuator_.get() : live_actuator_.get();
    loop_->Reconfigure(std::move(r));
  }
  if (changes.roles) authz_->SetRules(next->control.roles);
  for (const ConfigChange& c : changes.restart) {
    PLOG_WARNING << "config reload: " << c.field << " changed to " << c.to << " but needs a restart; still using "
                 << c.from;
  }
  options_ = merged;
  control_ = MergeReloadable(control_, next->control);
  metrics_->ConfigReloaded(true, now);
  PLOG_INFO << "config reloaded from " << source << ": changed " << changes.LiveSummary()
            << (changes.loop ? " (in force from the next tick)" : "")
            << (changes.restart.empty() ? "" : absl::StrCat("; ", changes.restart.size(), " setting(s) need a restart"));
  return absl::OkStatus();
}

int Daemon::metrics_port() const { return metrics_ ? metrics_->bound_port() : 0; }

absl::Status Daemon::StartGrpc() {
  std::string listen = options_.grpc_listen;
  const bool is_unix = absl::StartsWith(listen, "unix:");
  std::string socket_path;
  if (is_unix) {
    socket_path = listen.substr(5);
    if (socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("grpc_listen: unix socket path ", socket_path, " is ",
                                                     socket_path.size(), " bytes; the limit is ",
                                                     sizeof(sockaddr_un::sun_path) - 1));
    }
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(socket_path).parent_path(), ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("grpc_listen: cannot create the directory of ",
                                                        socket_path, ": ", ec.message()));
    }
    if (SocketInUse(socket_path)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "grpc_listen: ", socket_path, " is in use by another process (is plimsolld already running?)"));
    }
    unlink(socket_path.c_str());  // a stale socket from a crashed run
  }
  if (control_.unix_socket != is_unix) {
    return absl::InvalidArgumentError(absl::StrCat("grpc_listen: \"", listen, "\" does not match the control API "
                                                   "options (resolved for a ",
                                                   control_.unix_socket ? "unix socket" : "TCP listener", ")"));
  }
  // Unix socket: insecure (the file mode is the access control); TCP: mutual TLS only.
  auto creds = BuildControlServerCredentials(control_);
  if (!creds.ok()) return creds.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, *creds, is_unix ? nullptr : &port);
  builder.RegisterService(service_.get());
  // Only the owner may use the socket: 0600 from creation, not chmod'ed after.
  const mode_t old_umask = umask(0177);
  grpc_server_ = builder.BuildAndStart();
  umask(old_umask);
  if (!grpc_server_) {
    return absl::UnavailableError(absl::StrCat("grpc_listen: cannot listen on ", listen));
  }
  if (is_unix) {
    if (absl::Status s = ApplyUnixSocketAccess(socket_path, control_); !s.ok()) {
      grpc_server_->Shutdown();
      grpc_server_->Wait();
      grpc_server_.reset();
      unlink(socket_path.c_str());
      return s;
    }
    grpc_address_ = listen;
  } else {
    grpc_address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  }
  return absl::OkStatus();
}

std::string Daemon::agent_address() const { return agent_ ? agent_->tcp_address() : ""; }

absl::Status Daemon::Start() {
  RaiseFdLimit();
  if (!options_.metrics_listen.empty()) {
    if (absl::Status s = metrics_->Serve(options_.metrics_listen); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("metrics_listen: ", s.message()));
    }
  }
  if (absl::Status s = StartGrpc(); !s.ok()) return s;
  if (agent_) {
    if (absl::Status s = agent_->Start(hypervisor_.get(), std::move(vsock_listener_)); !s.ok()) return s;
  }
  for (const std::string& w : options_.warnings) PLOG_WARNING << w;
  PLOG_INFO << "plimsolld serving grpc=" << grpc_address_ << " metrics="
            << (options_.metrics_listen.empty()
                    ? std::string("off")
                    : absl::StrCat(options_.metrics_listen.substr(0, options_.metrics_listen.rfind(':')),
                                   ":", metrics_port()))
            << " policy=" << options_.policy << " tick=" << absl::FormatDuration(options_.tick)
            << " dry_run=" << (options_.dry_run ? "true" : "false") << " libvirt_uri=" << options_.libvirt_uri
            << " " << agent::DescribeAgentIngest(agent_.get())
            << " control=" << (control_.unix_socket ? "unix" : "mtls")
            << (control_.socket_group.empty() ? "" : absl::StrCat(" socket_group=", control_.socket_group))
            << " state_file=" << (control_.state_file.empty() ? std::string("memory-only") : control_.state_file);
  started_ = true;
  loop_thread_ = std::thread([this] { loop_->Run(); });
  return absl::OkStatus();
}

void Daemon::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // The event callback points at the loop, and the loop is destroyed before the hypervisor
  // (members die in reverse order; the loop borrows the hypervisor), while libvirt goes on
  // delivering events until the hypervisor closes its connection. Once this returns the callback
  // is not running and never runs again (hypervisor.h), so the loop may go.
  if (hypervisor_) hypervisor_->SetEventCallback(nullptr);
  if (loop_) loop_->Stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  if (metrics_) {
    metrics_->SetAgentSource(nullptr);
    metrics_->SetLibvirtCallSource(nullptr);
  }
  if (agent_) agent_->Shutdown();
  // Ends every Watch stream (UNAVAILABLE) so the gRPC shutdown does not wait for them.
  if (hub_) hub_->Close();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    grpc_server_->Wait();
    if (absl::StartsWith(options_.grpc_listen, "unix:")) unlink(options_.grpc_listen.substr(5).c_str());
  }
}

}  // namespace plimsoll::server
