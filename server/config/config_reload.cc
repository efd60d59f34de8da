#include "server/config/config_reload.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace plimsoll::server {
namespace {

std::string Quote(const std::string& s) { return absl::StrCat("\"", s, "\""); }

std::string Bytes(const std::optional<int64_t>& v) { return v.has_value() ? absl::StrCat(*v) : "unset"; }

std::string List(const std::vector<std::string>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

// Records a change in `out` when the two differ; returns whether they did.
template <typename T, typename Fmt>
bool Compare(std::vector<ConfigChange>* out, const char* name, const T& a, const T& b, Fmt fmt) {
  if (a == b) return false;
  out->push_back({name, fmt(a), fmt(b)});
  return true;
}

}  // namespace

std::string ConfigChange::ToString() const { return absl::StrCat(field, " ", from, " -> ", to); }

std::string ConfigChanges::LiveSummary() const {
  if (live.empty()) return "nothing";
  return absl::StrJoin(live, ", ", [](std::string* out, const ConfigChange& c) { out->append(c.ToString()); });
}

absl::StatusOr<EffectiveConfig> LoadEffectiveConfig(const std::string& config_path,
                                                    const plimsoll::v1::DaemonConfig& flag_config) {
  plimsoll::v1::DaemonConfig file_config;
  if (!config_path.empty()) {
    auto loaded = LoadConfigFile(config_path);
    if (!loaded.ok()) return loaded.status();
    file_config = *std::move(loaded);
  }
  EffectiveConfig e;
  e.config = WithDefaults(Overlay(file_config, flag_config));
  auto options = Resolve(e.config);
  if (!options.ok()) return options.status();
  e.options = *std::move(options);
  // The effective configuration names the policy that runs, also when the file used a
  // deprecated name for it (Options::warnings says so).
  e.config.set_policy(e.options.policy);
  auto control = ResolveControlApi(e.config);
  if (!control.ok()) return control.status();
  e.control = *std::move(control);
  return e;
}

ConfigChanges DiffConfig(const Options& a, const ControlApiOptions& ac, const Options& b,
                         const ControlApiOptions& bc) {
  ConfigChanges c;
  auto str = [](const std::string& s) { return Quote(s); };
  auto dur = [](absl::Duration d) { return absl::FormatDuration(d); };
  auto num = [](auto v) { return absl::StrCat(v); };
  auto boolean = [](bool v) { return std::string(v ? "true" : "false"); };
  auto frac = [](double v) { return absl::StrFormat("%g", v); };
  std::vector<ConfigChange>* live = &c.live;
  c.policy = Compare(live, "policy", a.policy, b.policy, str);
  bool loop = c.policy;
  loop |= Compare(live, "tick", a.tick, b.tick, dur);
  c.dry_run = Compare(live, "dry_run", a.dry_run, b.dry_run, boolean);
  loop |= c.dry_run;
  loop |= Compare(live, "log_every_decision", a.log_every_decision, b.log_every_decision, boolean);
  loop |= Compare(live, "min_wake_interval", a.min_wake_interval, b.min_wake_interval, dur);
  loop |= Compare(live, "block_stats_interval", a.block_stats_interval, b.block_stats_interval, dur);
  loop |= Compare(live, "host.host_reserve_bytes", a.host_reserve_bytes, b.host_reserve_bytes, num);
  loop |= Compare(live, "host.guest_memory_budget_bytes", a.guest_memory_budget_bytes,
                  b.guest_memory_budget_bytes, Bytes);
  loop |= Compare(live, "guest_defaults.min_bytes", a.min_bytes, b.min_bytes, num);
  loop |= Compare(live, "guest_defaults.min_fraction", a.min_fraction, b.min_fraction, frac);
  loop |= Compare(live, "guest_defaults.stats_period_seconds", a.stats_period_seconds, b.stats_period_seconds,
                  num);
  loop |= Compare(live, "guest_defaults.stale_after", a.stale_after, b.stale_after, dur);
  loop |= Compare(live, "line.new_guest_room_bytes", a.line_new_guest_room_bytes, b.line_new_guest_room_bytes, num);
  loop |= Compare(live, "line.burst_reserve_bytes", a.line_burst_reserve_bytes, b.line_burst_reserve_bytes, num);
  loop |= Compare(live, "line.offer_hold", a.line_offer_hold, b.line_offer_hold, dur);
  c.loop = loop;
  const RoleRules& ar = ac.roles;
  const RoleRules& br = bc.roles;
  c.roles |= Compare(live, "control.admin_common_names", ar.admin_common_names, br.admin_common_names, List);
  c.roles |= Compare(live, "control.admin_organizational_units", ar.admin_organizational_units,
                     br.admin_organizational_units, List);
  c.roles |= Compare(live, "control.reader_common_names", ar.reader_common_names, br.reader_common_names, List);
  c.roles |= Compare(live, "control.reader_organizational_units", ar.reader_organizational_units,
                     br.reader_organizational_units, List);

  std::vector<ConfigChange>* restart = &c.restart;
  Compare(restart, "libvirt_uri", a.libvirt_uri, b.libvirt_uri, str);
  Compare(restart, "balloon_workers", a.balloon_workers, b.balloon_workers, num);
  Compare(restart, "balloon_call_deadline", a.balloon_call_deadline, b.balloon_call_deadline, dur);
  Compare(restart, "balloon_pressure_stats", a.balloon_pressure_stats, b.balloon_pressure_stats, boolean);
  Compare(restart, "grpc_listen", a.grpc_listen, b.grpc_listen, str);
  Compare(restart, "metrics_listen", a.metrics_listen, b.metrics_listen, str);
  Compare(restart, "host.proc_root", a.proc_root, b.proc_root, str);
  Compare(restart, "agent.agent_listen", a.agent_listen, b.agent_listen, str);
  Compare(restart, "agent.agent_host_key_file", a.agent_host_key_file, b.agent_host_key_file, str);
  Compare(restart, "agent.agent_stale_after", a.agent_stale_after, b.agent_stale_after, dur);
  Compare(restart, "agent.agent_tls_cert_file", a.agent_tls_cert_file, b.agent_tls_cert_file, str);
  Compare(restart, "agent.agent_tls_key_file", a.agent_tls_key_file, b.agent_tls_key_file, str);
  Compare(restart, "agent.channel_name", a.agent_channel_name, b.agent_channel_name, str);
  Compare(restart, "agent.channel_autoattach", a.agent_channel_autoattach, b.agent_channel_autoattach,
          [](bool v) { return std::string(v ? "true" : "false"); });
  Compare(restart, "agent.channel_socket_dir", a.agent_channel_socket_dir, b.agent_channel_socket_dir, str);
  Compare(restart, "agent.vsock_port", a.agent_vsock_port, b.agent_vsock_port,
          [](uint32_t v) { return absl::StrCat(v); });
  Compare(restart, "agent.reclaim_bounds", a.agent_reclaim_bounds, b.agent_reclaim_bounds,
          [](bool v) { return std::string(v ? "true" : "false"); });
  Compare(restart, "control.socket_group", ac.socket_group, bc.socket_group, str);
  Compare(restart, "control.tls.cert_file", ac.cert_file, bc.cert_file, str);
  Compare(restart, "control.tls.key_file", ac.key_file, bc.key_file, str);
  Compare(restart, "control.tls.client_ca_file", ac.client_ca_file, bc.client_ca_file, str);
  Compare(restart, "control.tls_reload_interval", ac.tls_reload_interval, bc.tls_reload_interval, dur);
  Compare(restart, "control.state_file", ac.state_file, bc.state_file, str);
  return c;
}

Options MergeReloadable(const Options& running, const Options& next) {
  Options o = running;
  o.policy = next.policy;
  o.tick = next.tick;
  o.dry_run = next.dry_run;
  o.log_every_decision = next.log_every_decision;
  o.min_wake_interval = next.min_wake_interval;
  o.block_stats_interval = next.block_stats_interval;
  o.host_reserve_bytes = next.host_reserve_bytes;
  o.guest_memory_budget_bytes = next.guest_memory_budget_bytes;
  o.min_bytes = next.min_bytes;
  o.min_fraction = next.min_fraction;
  o.stats_period_seconds = next.stats_period_seconds;
  o.stale_after = next.stale_after;
  o.line_new_guest_room_bytes = next.line_new_guest_room_bytes;
  o.line_burst_reserve_bytes = next.line_burst_reserve_bytes;
  o.line_offer_hold = next.line_offer_hold;
  return o;
}

ControlApiOptions MergeReloadable(const ControlApiOptions& running, const ControlApiOptions& next) {
  ControlApiOptions o = running;
  o.roles = next.roles;
  return o;
}

}  // namespace plimsoll::server
