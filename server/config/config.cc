#include "server/config/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "policy/policy.h"
#include "server/config/default_paths.h"

namespace plimsoll::server {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::plimsoll::v1::DaemonConfig;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kGiB = 1024 * kMiB;

// Collects the first text-format error with its position.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstErrorCollector(std::string source) : source_(std::move(source)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message);
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string source_;
  std::string error_;
};

// Field path ("host.proc_root") -> descriptor chain, for every scalar field.
void CollectScalarFields(const Descriptor* d, const std::string& prefix,
                         std::vector<std::pair<std::string, std::vector<const FieldDescriptor*>>>* out,
                         std::vector<const FieldDescriptor*> chain) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::vector<const FieldDescriptor*> c = chain;
    c.push_back(f);
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      CollectScalarFields(f->message_type(), path, out, c);
    } else {
      out->push_back({path, c});
    }
  }
}

const std::vector<std::pair<std::string, std::vector<const FieldDescriptor*>>>& ScalarFields() {
  static const auto* fields = [] {
    auto* v = new std::vector<std::pair<std::string, std::vector<const FieldDescriptor*>>>();
    CollectScalarFields(DaemonConfig::descriptor(), "", v, {});
    return v;
  }();
  return *fields;
}

// Quotes a value for text format when the field is a string.
std::string TextValue(const FieldDescriptor* f, const std::string& value) {
  if (f->type() != FieldDescriptor::TYPE_STRING) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("config field \"", field, "\": ", message));
}

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view field, const std::string& v,
                                                     absl::Duration min, absl::Duration max) {
  absl::Duration d;
  if (!absl::ParseDuration(v, &d)) {
    return FieldError(field, absl::StrCat("\"", v, "\" is not a duration (e.g. \"5s\", \"500ms\")"));
  }
  if (d < min || d > max) {
    return FieldError(field, absl::StrCat("\"", v, "\" is out of range [", absl::FormatDuration(min),
                                          ", ", absl::FormatDuration(max), "]"));
  }
  return d;
}

// "unix:/abs/path" or "host:port" with a numeric port.
absl::Status ValidateListen(absl::string_view field, const std::string& v, bool allow_unix) {
  if (allow_unix && absl::StartsWith(v, "unix:")) {
    if (v.size() <= 5 || v[5] != '/') {
      return FieldError(field, absl::StrCat("\"", v, "\": a unix socket needs an absolute path, e.g. unix:/run/plimsoll/plimsolld.sock"));
    }
    return absl::OkStatus();
  }
  const size_t colon = v.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(v.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return FieldError(field, absl::StrCat("\"", v, "\" is not ", allow_unix ? "unix:/path or " : "",
                                          "host:port (e.g. 127.0.0.1:9587)"));
  }
  return absl::OkStatus();
}

// An agent TLS file: an absolute path that can be opened and read now (the PEM itself is
// parsed and the key matched against the certificate when the listener starts).
absl::Status CheckReadableFile(absl::string_view field, const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return FieldError(field, absl::StrCat("\"", path, "\" must be an absolute path"));
  }
  std::ifstream in(path, std::ios::binary);
  char c;
  if (!in.is_open() || !in.get(c)) {
    const int error = errno;
    return FieldError(field, absl::StrCat("cannot read ", path, ": ",
                                          in.is_open() ? "empty file" : strerror(error)));
  }
  return absl::OkStatus();
}

// The agent listener's transport: TLS files both or neither, and required off loopback.
absl::Status ResolveAgentTls(const plimsoll::v1::AgentConfig& a, Options* o) {
  const bool has_cert = a.has_agent_tls_cert_file() && !a.agent_tls_cert_file().empty();
  const bool has_key = a.has_agent_tls_key_file() && !a.agent_tls_key_file().empty();
  if (o->agent_listen.empty()) {
    if (has_cert || has_key) {
      return FieldError(has_cert ? "agent.agent_tls_cert_file" : "agent.agent_tls_key_file",
                        "set, but agent_listen is empty (the agent channel is off)");
    }
    return absl::OkStatus();
  }
  if (!has_cert && !has_key) {
    if (IsLoopbackListen(o->agent_listen)) return absl::OkStatus();
    return FieldError(
        "agent.agent_tls_cert_file",
        absl::StrCat("required: agent_listen \"", o->agent_listen,
                     "\" is not a loopback address, and off loopback the agent channel is only served over "
                     "TLS (set agent.agent_tls_cert_file and agent.agent_tls_key_file, or listen on "
                     "127.0.0.1 for QEMU user networking)"));
  }
  if (!has_cert) {
    return FieldError("agent.agent_tls_cert_file", "required with agent.agent_tls_key_file (set both or neither)");
  }
  if (!has_key) {
    return FieldError("agent.agent_tls_key_file", "required with agent.agent_tls_cert_file (set both or neither)");
  }
  if (absl::Status s = CheckReadableFile("agent.agent_tls_cert_file", a.agent_tls_cert_file()); !s.ok()) return s;
  if (absl::Status s = CheckReadableFile("agent.agent_tls_key_file", a.agent_tls_key_file()); !s.ok()) return s;
  o->agent_tls_cert_file = a.agent_tls_cert_file();
  o->agent_tls_key_file = a.agent_tls_key_file();
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackListen(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return false;
  std::string host(listen.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::StatusOr<DaemonConfig> ParseConfigText(absl::string_view text, absl::string_view source) {
  DaemonConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors{std::string(source)};
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(errors.error().empty() ? absl::StrCat(source, ": parse error")
                                                             : errors.error());
  }
  return config;
}

absl::StatusOr<DaemonConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot read config file ", path, ": ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg)
           : err == EACCES ? absl::PermissionDeniedError(msg)
                           : absl::InvalidArgumentError(msg);
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseConfigText(buffer.str(), path);
}

std::vector<std::string> ConfigFlagNames() {
  std::vector<std::string> names;
  for (const auto& [path, chain] : ScalarFields()) names.push_back(path);
  return names;
}

absl::StatusOr<DaemonConfig> ConfigFromFlags(
    const std::vector<std::pair<std::string, std::string>>& flags) {
  DaemonConfig merged;
  for (const auto& [name, value] : flags) {
    // Exact dotted path first, then a unique leaf name.
    const std::vector<const FieldDescriptor*>* chain = nullptr;
    int leaf_matches = 0;
    const std::vector<const FieldDescriptor*>* leaf_chain = nullptr;
    for (const auto& [path, c] : ScalarFields()) {
      if (path == name) chain = &c;
      if (c.back()->name() == name) {
        ++leaf_matches;
        leaf_chain = &c;
      }
    }
    if (chain == nullptr && leaf_matches == 1) chain = leaf_chain;
    if (chain == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", name, leaf_matches > 1 ? " (ambiguous: use its dotted path)" : "",
          "; config flags are: --", absl::StrJoin(ConfigFlagNames(), ", --")));
    }
    // The value is parsed alone into its own field, and must be exactly one value: spliced into
    // a text-format line, "--dry_run=true policy: \"x\"" would set a second field
    // (caught by fuzz/config_flags_fuzz: one flag, one field).
    DaemonConfig one;
    google::protobuf::Message* parent = &one;
    for (size_t i = 0; i + 1 < chain->size(); ++i) {
      parent = parent->GetReflection()->MutableMessage(parent, (*chain)[i]);
    }
    const FieldDescriptor* leaf = chain->back();
    std::string v = value;
    if (leaf->type() == FieldDescriptor::TYPE_BOOL && v.empty()) v = "true";
    google::protobuf::TextFormat::Parser parser;
    FirstErrorCollector errors{absl::StrCat("--", name)};
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFieldValueFromString(TextValue(leaf, v), leaf, parent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, "=", value, ": not a valid ", leaf->type_name(), " (",
                       errors.error().empty() ? "not a single value" : errors.error(), ")"));
    }
    // Merge message by message: text format refuses a repeated "host { }" block.
    merged.MergeFrom(one);
  }
  return merged;
}

DaemonConfig Overlay(const DaemonConfig& base, const DaemonConfig& overlay) {
  DaemonConfig merged = base;
  // All scalar fields are proto3 `optional`, so MergeFrom copies exactly the set ones.
  merged.MergeFrom(overlay);
  return merged;
}

DaemonConfig WithDefaults(const DaemonConfig& in) {
  DaemonConfig c = in;
  if (!c.has_libvirt_uri()) c.set_libvirt_uri("qemu:///system");
  if (!c.has_grpc_listen()) c.set_grpc_listen("unix:/run/plimsoll/plimsolld.sock");
  if (!c.has_metrics_listen()) c.set_metrics_listen("127.0.0.1:9587");
  if (!c.has_policy()) c.set_policy("pagecache");
  if (!c.has_tick()) c.set_tick("5s");
  if (!c.has_dry_run()) c.set_dry_run(false);
  if (!c.has_log_every_decision()) c.set_log_every_decision(false);
  if (!c.has_min_wake_interval()) c.set_min_wake_interval("1s");
  if (!c.has_balloon_workers()) c.set_balloon_workers(4);
  if (!c.has_balloon_call_deadline()) c.set_balloon_call_deadline("60s");
  if (!c.has_block_stats_interval()) c.set_block_stats_interval("5s");
  if (!c.has_balloon_pressure_stats()) c.set_balloon_pressure_stats(true);
  auto* host = c.mutable_host();
  if (!host->has_host_reserve_bytes()) host->set_host_reserve_bytes(1 * kGiB);
  if (!host->has_proc_root()) host->set_proc_root("/");
  auto* g = c.mutable_guest_defaults();
  if (!g->has_min_bytes()) g->set_min_bytes(256 * kMiB);
  if (!g->has_min_fraction()) g->set_min_fraction(0.25);
  if (!g->has_stats_period_seconds()) g->set_stats_period_seconds(2);
  if (!g->has_stale_after()) g->set_stale_after("30s");
  auto* a = c.mutable_agent();
  if (!a->has_agent_listen()) a->set_agent_listen("127.0.0.1:9588");
  if (!a->has_agent_host_key_file()) a->set_agent_host_key_file(kDefaultAgentHostKeyFile);
  if (!a->has_agent_stale_after()) a->set_agent_stale_after("20s");
  if (!a->has_channel_name()) a->set_channel_name("org.plimsoll.agent.0");
  if (!a->has_channel_autoattach()) a->set_channel_autoattach(false);
  if (!a->has_channel_socket_dir()) a->set_channel_socket_dir("");
  if (!a->has_vsock_port()) a->set_vsock_port(0);
  if (!a->has_reclaim_bounds()) a->set_reclaim_bounds(false);
  auto* line = c.mutable_line();
  if (!line->has_new_guest_room_bytes()) line->set_new_guest_room_bytes(512 * kMiB);
  if (!line->has_burst_reserve_bytes()) line->set_burst_reserve_bytes(1 * kGiB);
  if (!line->has_offer_hold()) line->set_offer_hold("5m");
  return c;
}

absl::StatusOr<Options> Resolve(const DaemonConfig& c) {
  Options o;
  o.libvirt_uri = c.libvirt_uri();
  if (o.libvirt_uri.empty()) return FieldError("libvirt_uri", "must not be empty (e.g. qemu:///system)");
  o.grpc_listen = c.grpc_listen();
  if (absl::Status s = ValidateListen("grpc_listen", o.grpc_listen, /*allow_unix=*/true); !s.ok()) return s;
  o.metrics_listen = c.metrics_listen();
  if (!o.metrics_listen.empty()) {
    if (absl::Status s = ValidateListen("metrics_listen", o.metrics_listen, false); !s.ok()) return s;
  }
  o.policy = c.policy();
  // A config written for an earlier plimsolld must not stop the daemon after an upgrade: the
  // old name runs the same policy, and the operator is told to change it.
  if (std::optional<std::string> renamed = policy::RenamedPolicy(o.policy); renamed.has_value()) {
    o.warnings.push_back(absl::StrCat("config field \"policy\": \"", o.policy, "\" is a deprecated name of \"",
                                      *renamed, "\" (the same policy), which runs; write policy: \"", *renamed,
                                      "\""));
    o.policy = *std::move(renamed);
  }
  // MakePolicy is the one place that knows the policies, and it also takes a variant with
  // parameters changed ("pagecache:profile_ratio=1.5", docs/policy.md), which the lab
  // benchmarks compare on real guests.
  if (auto made = policy::MakePolicy(o.policy); !made.ok()) {
    return FieldError("policy", made.status().message());
  }
  auto tick = ParsePositiveDuration("tick", c.tick(), absl::Milliseconds(100), absl::Hours(1));
  if (!tick.ok()) return tick.status();
  o.tick = *tick;
  o.dry_run = c.dry_run();
  o.log_every_decision = c.log_every_decision();
  auto min_wake = ParsePositiveDuration("min_wake_interval", c.min_wake_interval(), absl::Milliseconds(100),
                                        absl::Hours(1));
  if (!min_wake.ok()) return min_wake.status();
  o.min_wake_interval = *min_wake;
  o.balloon_workers = c.balloon_workers();
  if (o.balloon_workers < 1 || o.balloon_workers > 64) {
    return FieldError("balloon_workers", absl::StrCat(o.balloon_workers, " is outside [1, 64]"));
  }
  auto deadline = ParsePositiveDuration("balloon_call_deadline", c.balloon_call_deadline(), absl::Seconds(1),
                                        absl::Hours(1));
  if (!deadline.ok()) return deadline.status();
  o.balloon_call_deadline = *deadline;
  auto block = ParsePositiveDuration("block_stats_interval", c.block_stats_interval(), absl::ZeroDuration(),
                                     absl::Hours(1));
  if (!block.ok()) return block.status();
  o.block_stats_interval = *block;
  o.balloon_pressure_stats = c.balloon_pressure_stats();

  o.host_reserve_bytes = c.host().host_reserve_bytes();
  if (o.host_reserve_bytes < 0) {
    return FieldError("host.host_reserve_bytes", absl::StrCat(o.host_reserve_bytes, " is negative"));
  }
  if (c.host().has_guest_memory_budget_bytes()) {
    if (c.host().guest_memory_budget_bytes() <= 0) {
      return FieldError("host.guest_memory_budget_bytes",
                        absl::StrCat(c.host().guest_memory_budget_bytes(), " must be positive"));
    }
    o.guest_memory_budget_bytes = c.host().guest_memory_budget_bytes();
  }
  o.proc_root = c.host().proc_root();
  if (o.proc_root.empty() || o.proc_root[0] != '/') {
    return FieldError("host.proc_root", absl::StrCat("\"", o.proc_root, "\" must be an absolute path"));
  }

  const auto& g = c.guest_defaults();
  o.min_bytes = g.min_bytes();
  if (o.min_bytes < 0) return FieldError("guest_defaults.min_bytes", absl::StrCat(o.min_bytes, " is negative"));
  o.min_fraction = g.min_fraction();
  if (!(o.min_fraction >= 0 && o.min_fraction <= 1)) {
    return FieldError("guest_defaults.min_fraction", absl::StrCat(o.min_fraction, " is outside [0, 1]"));
  }
  o.stats_period_seconds = g.stats_period_seconds();
  if (o.stats_period_seconds < 1 || o.stats_period_seconds > 3600) {
    return FieldError("guest_defaults.stats_period_seconds",
                      absl::StrCat(o.stats_period_seconds, " is outside [1, 3600]"));
  }
  auto stale = ParsePositiveDuration("guest_defaults.stale_after", g.stale_after(), absl::Seconds(1),
                                     absl::Hours(24));
  if (!stale.ok()) return stale.status();
  o.stale_after = *stale;

  const auto& a = c.agent();
  o.agent_listen = a.agent_listen();
  if (!o.agent_listen.empty()) {
    if (absl::Status s = ValidateListen("agent.agent_listen", o.agent_listen, false); !s.ok()) return s;
    if (a.agent_host_key_file().empty() || a.agent_host_key_file()[0] != '/') {
      return FieldError("agent.agent_host_key_file",
                        absl::StrCat("\"", a.agent_host_key_file(), "\" must be an absolute path"));
    }
  }
  o.agent_host_key_file = a.agent_host_key_file();
  if (absl::Status s = ResolveAgentTls(a, &o); !s.ok()) return s;
  auto agent_stale = ParsePositiveDuration("agent.agent_stale_after", a.agent_stale_after(), absl::Seconds(1),
                                           absl::Hours(1));
  if (!agent_stale.ok()) return agent_stale.status();
  o.agent_stale_after = *agent_stale;
  o.agent_channel_name = a.channel_name();
  for (char ch : o.agent_channel_name) {
    // The guest opens /dev/virtio-ports/NAME; QEMU and the kernel take any byte, we do not.
    if (!absl::ascii_isalnum(ch) && ch != '.' && ch != '_' && ch != '-') {
      return FieldError("agent.channel_name",
                        absl::StrCat("\"", o.agent_channel_name, "\" may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  if (!o.agent_channel_name.empty() && o.agent_channel_name[0] == '.') {
    return FieldError("agent.channel_name", absl::StrCat("\"", o.agent_channel_name, "\" must not start with '.'"));
  }
  o.agent_channel_autoattach = a.channel_autoattach();
  if (o.agent_channel_autoattach && o.agent_channel_name.empty()) {
    return FieldError("agent.channel_autoattach", "set, but agent.channel_name is empty (the channels are off)");
  }
  o.agent_reclaim_bounds = a.reclaim_bounds();
  o.agent_channel_socket_dir = a.channel_socket_dir();
  if (!o.agent_channel_socket_dir.empty()) {
    if (o.agent_channel_socket_dir[0] != '/') {
      return FieldError("agent.channel_socket_dir",
                        absl::StrCat("\"", o.agent_channel_socket_dir, "\" must be an absolute path"));
    }
    // DIR/UUID.sock must fit a unix socket address (107 bytes).
    if (o.agent_channel_socket_dir.size() + 1 + 36 + 5 > 107) {
      return FieldError("agent.channel_socket_dir",
                        absl::StrCat("\"", o.agent_channel_socket_dir, "\" is too long: DIR/UUID.sock must fit in 107 "
                                     "bytes, so at most 65"));
    }
  }
  o.agent_vsock_port = a.vsock_port();
  if (o.agent_vsock_port == 0xffffffffu) {
    return FieldError("agent.vsock_port", "4294967295 is VMADDR_PORT_ANY, not a port agents can dial");
  }
  const auto& line = c.line();
  o.line_new_guest_room_bytes = line.new_guest_room_bytes();
  if (o.line_new_guest_room_bytes < 0) {
    return FieldError("line.new_guest_room_bytes", absl::StrCat(o.line_new_guest_room_bytes, " is negative"));
  }
  o.line_burst_reserve_bytes = line.burst_reserve_bytes();
  if (o.line_burst_reserve_bytes < 0) {
    return FieldError("line.burst_reserve_bytes", absl::StrCat(o.line_burst_reserve_bytes, " is negative"));
  }
  auto hold = ParsePositiveDuration("line.offer_hold", line.offer_hold(), absl::ZeroDuration(), absl::Hours(24));
  if (!hold.ok()) return hold.status();
  o.line_offer_hold = *hold;
  if (o.stale_after < absl::Seconds(2 * o.stats_period_seconds)) {
    return FieldError("guest_defaults.stale_after",
                      absl::StrCat("\"", g.stale_after(), "\" must be at least twice stats_period_seconds (",
                                   o.stats_period_seconds, "s), or every guest looks stale"));
  }
  return o;
}

std::string ToText(const DaemonConfig& config) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(config, &out);
  return out;
}

}  // namespace plimsoll::server
