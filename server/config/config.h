// server/config/: the DaemonConfig from text and flags (config) and its SIGHUP reload
// (config_reload). Pure over text and protos; no running part of the daemon lives here.
//
// plimsolld's configuration: a DaemonConfig proto read from text format, overlaid
// with command-line flags of the same names, filled with defaults and validated
// into typed Options. Every error names the offending field.
#ifndef PLIMSOLL_SERVER_CONFIG_CONFIG_H_
#define PLIMSOLL_SERVER_CONFIG_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "plimsoll/v1/config.pb.h"

namespace plimsoll::server {

// The validated, typed configuration the daemon runs with.
struct Options {
  std::string libvirt_uri;
  std::string grpc_listen;
  std::string metrics_listen;  // empty: no metrics listener
  std::string policy;
  absl::Duration tick;
  bool dry_run = false;
  bool log_every_decision = false;
  absl::Duration min_wake_interval;
  int balloon_workers = 0;
  absl::Duration balloon_call_deadline;
  absl::Duration block_stats_interval;
  bool balloon_pressure_stats = true;
  int64_t host_reserve_bytes = 0;
  std::optional<int64_t> guest_memory_budget_bytes;
  std::string proc_root;
  int64_t min_bytes = 0;
  double min_fraction = 0;
  int stats_period_seconds = 0;
  absl::Duration stale_after;
  std::string agent_listen;  // empty: no agent channel
  std::string agent_host_key_file;
  absl::Duration agent_stale_after;
  // Both set (TLS on the agent listener) or both empty (plaintext, loopback only).
  std::string agent_tls_cert_file;
  std::string agent_tls_key_file;
  std::string agent_channel_name;  // empty: no virtio-serial channels
  bool agent_channel_autoattach = false;
  std::string agent_channel_socket_dir;  // empty: libvirt chooses
  uint32_t agent_vsock_port = 0;  // 0: no vsock listener
  bool agent_reclaim_bounds = false;  // agents get in-guest reclaim bounds (guest_reclaim_bounds.h)
  // The Plimsoll line (config block `line`, docs/line.md).
  int64_t line_new_guest_room_bytes = 0;
  int64_t line_burst_reserve_bytes = 0;
  absl::Duration line_offer_hold;
  // Settings accepted under a deprecated spelling and what they were taken as, one sentence each
  // naming the field ("config field \"policy\": ..."). --check_config prints them; the daemon
  // logs them as warnings at start and on reload.
  std::vector<std::string> warnings;
};

// True when a "host:port" listen address is a loopback IP literal: 127.0.0.0/8, ::1 (also
// written [::1]) or an IPv4-mapped 127.x address. Names, "localhost" included, are not: what
// they resolve to is not known here.
bool IsLoopbackListen(absl::string_view listen);

// Parses protobuf text format. Unknown fields and syntax errors are
// INVALID_ARGUMENT with "<source>:<line>:<col>: <message>".
absl::StatusOr<plimsoll::v1::DaemonConfig> ParseConfigText(absl::string_view text,
                                                           absl::string_view source);

// Reads and parses a config file; NOT_FOUND / PERMISSION_DENIED name the path.
absl::StatusOr<plimsoll::v1::DaemonConfig> LoadConfigFile(const std::string& path);

// Builds a config from "--name=value" / "--name" arguments, where name is any
// config field: a top-level one ("tick"), a nested one by its own name when
// that name is unique ("guest_memory_budget_bytes"), or by its dotted path
// ("host.guest_memory_budget_bytes"). Unknown names are INVALID_ARGUMENT.
absl::StatusOr<plimsoll::v1::DaemonConfig> ConfigFromFlags(
    const std::vector<std::pair<std::string, std::string>>& flags);

// Every field name ConfigFromFlags accepts (for --help).
std::vector<std::string> ConfigFlagNames();

// Returns `base` with every field set in `overlay` replacing it.
plimsoll::v1::DaemonConfig Overlay(const plimsoll::v1::DaemonConfig& base,
                                   const plimsoll::v1::DaemonConfig& overlay);

// Fills every unset field with its documented default.
plimsoll::v1::DaemonConfig WithDefaults(const plimsoll::v1::DaemonConfig& config);

// Validates a defaulted config and converts it. INVALID_ARGUMENT names the
// field, the bad value and what is expected (for `policy`, the policies there are). A policy
// named as an earlier plimsolld did ("pagecache_law") is taken under its current name, with a
// warning in Options::warnings.
absl::StatusOr<Options> Resolve(const plimsoll::v1::DaemonConfig& config);

// The config as text format, for --check_config and logs.
std::string ToText(const plimsoll::v1::DaemonConfig& config);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_CONFIG_CONFIG_H_
