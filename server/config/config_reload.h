// Configuration reload (SIGHUP): how plimsolld re-reads its configuration and
// what of it can change while the daemon runs.
//
// The effective configuration is always built the same way, at startup and on
// reload: the --config file, overlaid with the command-line flags, filled with
// defaults, validated (Resolve, ResolveControlApi). A reload that fails at any
// step changes nothing.
//
// Applied live: policy, tick, min_wake_interval, block_stats_interval, dry_run, host.host_reserve_bytes,
// host.guest_memory_budget_bytes, guest_defaults.*, line.* and the control API's role
// rules. Everything else (listeners, libvirt, the balloon worker pool, /proc root, the agent channel,
// the state file, TLS files and socket access) is read once at startup: a
// changed value is reported as needing a restart and the running one is kept.
#ifndef PLIMSOLL_SERVER_CONFIG_CONFIG_RELOAD_H_
#define PLIMSOLL_SERVER_CONFIG_CONFIG_RELOAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plimsoll/v1/config.pb.h"
#include "server/api/security/tls_credentials.h"
#include "server/config/config.h"

namespace plimsoll::server {

struct EffectiveConfig {
  plimsoll::v1::DaemonConfig config;  // overlaid and defaulted; `policy` as it runs (Options::policy)
  Options options;
  ControlApiOptions control;
};

// File (when `config_path` is not empty), overlaid with `flag_config`,
// WithDefaults, Resolve and ResolveControlApi. Errors are those of
// LoadConfigFile ("<file>:<line>:<col>: ...") and of the resolvers (naming the
// field).
absl::StatusOr<EffectiveConfig> LoadEffectiveConfig(const std::string& config_path,
                                                    const plimsoll::v1::DaemonConfig& flag_config);

// One changed setting, values formatted for logs (strings quoted).
struct ConfigChange {
  std::string field;  // config field path, e.g. "host.host_reserve_bytes"
  std::string from;
  std::string to;
  std::string ToString() const;  // "field from -> to"
};

// What a reload would change.
struct ConfigChanges {
  std::vector<ConfigChange> live;     // applied while running
  std::vector<ConfigChange> restart;  // ignored until a restart
  bool policy = false;
  bool dry_run = false;
  bool loop = false;   // anything the control loop reads (policy, tick, host, guest_defaults, line, dry_run)
  bool roles = false;  // control API role rules

  bool empty() const { return live.empty() && restart.empty(); }
  // "policy \"mom\" -> \"pagecache\", tick 5s -> 1s", or "nothing" when no live setting changed.
  std::string LiveSummary() const;
};

// Compares the running configuration with a reloaded one. Pure.
ConfigChanges DiffConfig(const Options& running, const ControlApiOptions& running_control,
                         const Options& next, const ControlApiOptions& next_control);

// The configuration to run with after a reload: `next`'s live settings over
// `running`'s restart-only ones.
Options MergeReloadable(const Options& running, const Options& next);
ControlApiOptions MergeReloadable(const ControlApiOptions& running, const ControlApiOptions& next);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_CONFIG_CONFIG_RELOAD_H_
