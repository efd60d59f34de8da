#include "server/config/config.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::plimsoll::v1::DaemonConfig;

absl::StatusOr<Options> ResolveText(const std::string& text) {
  auto parsed = ParseConfigText(text, "test.textproto");
  if (!parsed.ok()) return parsed.status();
  return Resolve(WithDefaults(*parsed));
}

TEST(ConfigTest, DefaultsAreValidAndDocumented) {
  auto o = Resolve(WithDefaults(DaemonConfig()));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->libvirt_uri, "qemu:///system");
  EXPECT_EQ(o->grpc_listen, "unix:/run/plimsoll/plimsolld.sock");
  EXPECT_EQ(o->metrics_listen, "127.0.0.1:9587");
  EXPECT_EQ(o->policy, "pagecache");
  EXPECT_EQ(o->tick, absl::Seconds(5));
  EXPECT_FALSE(o->dry_run);
  EXPECT_FALSE(o->log_every_decision);
  EXPECT_EQ(o->min_wake_interval, absl::Seconds(1));
  EXPECT_EQ(o->balloon_workers, 4);
  EXPECT_EQ(o->balloon_call_deadline, absl::Seconds(60));
  EXPECT_EQ(o->block_stats_interval, absl::Seconds(5));
  EXPECT_EQ(o->host_reserve_bytes, 1LL << 30);
  EXPECT_FALSE(o->guest_memory_budget_bytes.has_value());
  EXPECT_EQ(o->min_bytes, 256LL << 20);
  EXPECT_DOUBLE_EQ(o->min_fraction, 0.25);
  EXPECT_EQ(o->stats_period_seconds, 2);
  EXPECT_EQ(o->stale_after, absl::Seconds(30));
  EXPECT_EQ(o->line_new_guest_room_bytes, 512LL << 20);
  EXPECT_EQ(o->line_burst_reserve_bytes, 1LL << 30);
  EXPECT_EQ(o->line_offer_hold, absl::Minutes(5));
}

TEST(ConfigTest, TheLineBlock) {
  auto o = ResolveText(R"(line { new_guest_room_bytes: 0 burst_reserve_bytes: 2147483648 offer_hold: "0s" })");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->line_new_guest_room_bytes, 0);
  EXPECT_EQ(o->line_burst_reserve_bytes, 2LL << 30);
  EXPECT_EQ(o->line_offer_hold, absl::ZeroDuration()) << "0s: the offer follows the headroom";
  // Flags reach the block by leaf name, as every nested field.
  auto flags = ConfigFromFlags({{"offer_hold", "90s"}, {"line.burst_reserve_bytes", "0"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto f = Resolve(WithDefaults(*flags));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->line_offer_hold, absl::Seconds(90));
  EXPECT_EQ(f->line_burst_reserve_bytes, 0);
  EXPECT_EQ(f->line_new_guest_room_bytes, 512LL << 20);
  // --check_config prints the effective block.
  const std::string text = ToText(WithDefaults(DaemonConfig()));
  EXPECT_NE(text.find("line {\n  new_guest_room_bytes: 536870912\n  burst_reserve_bytes: 1073741824\n  "
                      "offer_hold: \"5m\"\n}"),
            std::string::npos)
      << text;
}

TEST(ConfigTest, ParsesAFullFile) {
  auto o = ResolveText(R"(
    libvirt_uri: "test:///default"
    grpc_listen: "127.0.0.1:0"
    policy: "static"
    tick: "500ms"
    dry_run: true
    balloon_workers: 8
    balloon_call_deadline: "2m"
    host { guest_memory_budget_bytes: 2147483648 host_reserve_bytes: 0 }
    guest_defaults { min_bytes: 134217728 min_fraction: 0.1 }
  )");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->libvirt_uri, "test:///default");
  EXPECT_EQ(o->policy, "static");
  EXPECT_EQ(o->tick, absl::Milliseconds(500));
  EXPECT_TRUE(o->dry_run);
  EXPECT_EQ(o->balloon_workers, 8);
  EXPECT_EQ(o->balloon_call_deadline, absl::Minutes(2));
  EXPECT_EQ(*o->guest_memory_budget_bytes, 2147483648);
  EXPECT_EQ(o->host_reserve_bytes, 0);
  EXPECT_EQ(o->min_bytes, 134217728);
}

// Every bad value is reported with the name of its field.
struct BadCase {
  std::string text;
  std::string must_mention;
};

TEST(ConfigTest, BadValuesNameTheField) {
  const std::vector<BadCase> cases = {
      {R"(tick: "soon")", "\"tick\""},
      {R"(tick: "10ms")", "\"tick\""},
      {R"(min_wake_interval: "10ms")", "\"min_wake_interval\""},
      {R"(min_wake_interval: "often")", "\"min_wake_interval\""},
      {R"(balloon_workers: 0)", "\"balloon_workers\""},
      {R"(balloon_workers: 65)", "\"balloon_workers\""},
      {R"(balloon_call_deadline: "500ms")", "\"balloon_call_deadline\""},
      {R"(balloon_call_deadline: "never")", "\"balloon_call_deadline\""},
      {R"(block_stats_interval: "-1s")", "\"block_stats_interval\""},
      {R"(block_stats_interval: "2h")", "\"block_stats_interval\""},
      {R"(block_stats_interval: "rarely")", "\"block_stats_interval\""},
      {R"(policy: "yolo")", "\"policy\""},
      {R"(policy: "pagecache:no_such_param=1")", "no_such_param"},
      {R"(policy: "pagecache_law:no_such_param=1")", "no_such_param"},
      {R"(grpc_listen: "unix:relative.sock")", "\"grpc_listen\""},
      {R"(grpc_listen: "localhost")", "\"grpc_listen\""},
      {R"(metrics_listen: "unix:/x")", "\"metrics_listen\""},
      {R"(libvirt_uri: "")", "\"libvirt_uri\""},
      {R"(host { host_reserve_bytes: -1 })", "host.host_reserve_bytes"},
      {R"(host { guest_memory_budget_bytes: 0 })", "host.guest_memory_budget_bytes"},
      {R"(host { proc_root: "relative" })", "host.proc_root"},
      {R"(guest_defaults { min_fraction: 1.5 })", "guest_defaults.min_fraction"},
      {R"(guest_defaults { min_fraction: nan })", "guest_defaults.min_fraction"},
      {R"(guest_defaults { min_bytes: -5 })", "guest_defaults.min_bytes"},
      {R"(guest_defaults { stats_period_seconds: 0 })", "guest_defaults.stats_period_seconds"},
      {R"(guest_defaults { stale_after: "3s" stats_period_seconds: 2 })", "guest_defaults.stale_after"},
      {R"(line { new_guest_room_bytes: -1 })", "line.new_guest_room_bytes"},
      {R"(line { burst_reserve_bytes: -1 })", "line.burst_reserve_bytes"},
      {R"(line { offer_hold: "-1s" })", "line.offer_hold"},
      {R"(line { offer_hold: "25h" })", "line.offer_hold"},
      {R"(line { offer_hold: "a while" })", "line.offer_hold"},
      {R"(line { offered_bytes: 5 })", "offered_bytes"},
  };
  for (const BadCase& c : cases) {
    auto o = ResolveText(c.text);
    ASSERT_FALSE(o.ok()) << c.text;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(o.status().message().find(c.must_mention), std::string::npos)
        << c.text << " -> " << o.status().message();
  }
}

TEST(ConfigTest, TakesAPagecacheVariant) {
  auto o = ResolveText(R"(policy: "pagecache:profile_ratio=1.5")");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->policy, "pagecache:profile_ratio=1.5");
  EXPECT_TRUE(o->warnings.empty());
}

// A config written for an earlier plimsolld names the pagecache policy "pagecache_law": it runs
// "pagecache", and the warning says which field, what was taken and what to write.
TEST(ConfigTest, ThePagecachePolicysOldNameRunsItWithAWarning) {
  auto o = ResolveText(R"(policy: "pagecache_law")");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->policy, "pagecache");
  ASSERT_EQ(o->warnings.size(), 1u);
  EXPECT_EQ(o->warnings[0],
            "config field \"policy\": \"pagecache_law\" is a deprecated name of \"pagecache\" (the same "
            "policy), which runs; write policy: \"pagecache\"");
  auto variant = ResolveText(R"(policy: "pagecache_law:profile_ratio=1.5")");
  ASSERT_TRUE(variant.ok()) << variant.status();
  EXPECT_EQ(variant->policy, "pagecache:profile_ratio=1.5");
  ASSERT_EQ(variant->warnings.size(), 1u);
  EXPECT_NE(variant->warnings[0].find("write policy: \"pagecache:profile_ratio=1.5\""), std::string::npos)
      << variant->warnings[0];
  // Through the flag, as --check_config --policy=pagecache_law sees it.
  auto flags = ConfigFromFlags({{"policy", "pagecache_law"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto f = Resolve(WithDefaults(*flags));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->policy, "pagecache");
  EXPECT_EQ(f->warnings.size(), 1u);
  // Every current name, and the default, is taken as it is, without a warning.
  for (const char* name : {"mom", "static", "pagecache", "proxmox"}) {
    auto current = ResolveText(absl::StrCat("policy: \"", name, "\""));
    ASSERT_TRUE(current.ok()) << current.status();
    EXPECT_EQ(current->policy, name);
    EXPECT_TRUE(current->warnings.empty()) << name;
  }
  EXPECT_TRUE(Resolve(WithDefaults(DaemonConfig()))->warnings.empty());
}

// An unknown policy names the field and lists the policies there are.
TEST(ConfigTest, AnUnknownPolicyListsThePolicies) {
  for (const char* name : {"yolo", "pagecache_laws", "rule_heap", ""}) {
    auto o = ResolveText(absl::StrCat("policy: \"", name, "\""));
    ASSERT_FALSE(o.ok()) << name;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(o.status().message(),
              absl::StrCat("config field \"policy\": unknown policy \"", name,
                           "\"; known policies: mom, static, pagecache, proxmox"));
  }
}

TEST(ConfigTest, UnknownFieldsAndSyntaxErrorsGivePosition) {
  auto unknown = ParseConfigText("tick: \"5s\"\ntickk: \"5s\"\n", "my.textproto");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("my.textproto:2:"), std::string::npos) << unknown.status();
  EXPECT_NE(unknown.status().message().find("tickk"), std::string::npos) << unknown.status();
  auto syntax = ParseConfigText("host { host_reserve_bytes: 1", "s.textproto");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("s.textproto:1:"), std::string::npos) << syntax.status();
}

TEST(ConfigTest, FlagsUseFieldNamesAndOverrideTheFile) {
  auto file = ParseConfigText(R"(tick: "5s" policy: "static" host { host_reserve_bytes: 7 })", "f");
  ASSERT_TRUE(file.ok());
  auto flags = ConfigFromFlags({{"tick", "2s"},
                                {"dry_run", ""},
                                {"guest_memory_budget_bytes", "1073741824"},
                                {"host.proc_root", "/tmp/x"},
                                {"libvirt_uri", "qemu:///system?socket=/tmp/a \"b\""}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto o = Resolve(WithDefaults(Overlay(*file, *flags)));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tick, absl::Seconds(2));
  EXPECT_EQ(o->policy, "static");  // from the file, no flag given
  EXPECT_TRUE(o->dry_run);
  EXPECT_EQ(*o->guest_memory_budget_bytes, 1073741824);
  EXPECT_EQ(o->host_reserve_bytes, 7);
  EXPECT_EQ(o->proc_root, "/tmp/x");
  EXPECT_EQ(o->libvirt_uri, "qemu:///system?socket=/tmp/a \"b\"");
}

TEST(ConfigTest, BadFlagsAreNamed) {
  auto unknown = ConfigFromFlags({{"tik", "2s"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--tik"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("--tick"), std::string::npos);  // lists the known ones
  auto bad_number = ConfigFromFlags({{"guest_memory_budget_bytes", "2G"}});
  ASSERT_FALSE(bad_number.ok());
  EXPECT_NE(bad_number.status().message().find("--guest_memory_budget_bytes"), std::string::npos)
      << bad_number.status();
}

// Caught by fuzz/config_flags_fuzz's check that a flag sets exactly its own field: values were
// spliced into text format, so a non-string value could carry text format that set other fields.
TEST(ConfigTest, AFlagValueSetsOnlyItsOwnField) {
  const std::vector<std::pair<std::string, std::string>> injections = {
      {"dry_run", "true policy: \"static\""},
      {"host_reserve_bytes", "1 proc_root: \"/x\""},
      {"host_reserve_bytes", "1 } guest_defaults { min_bytes: 3"},
      {"guest_defaults.min_fraction", "0.5 min_bytes: 1"},
  };
  for (const auto& [name, value] : injections) {
    auto c = ConfigFromFlags({{name, value}});
    ASSERT_FALSE(c.ok()) << "--" << name << "=" << value << " set:\n" << ToText(*c);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("--" + name), std::string::npos) << c.status();
  }
  // Values that merely contain text-format punctuation are still fine where the field is a string.
  auto uri = ConfigFromFlags({{"libvirt_uri", "qemu:///system policy: \"static\" }"}});
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ(uri->libvirt_uri(), "qemu:///system policy: \"static\" }");
  EXPECT_FALSE(uri->has_policy());
}

TEST(ConfigTest, EffectiveConfigRoundTrips) {
  const DaemonConfig effective = WithDefaults(DaemonConfig());
  auto again = ParseConfigText(ToText(effective), "printed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), effective.SerializeAsString());
}

// The agent listener's transport: plaintext only on a loopback IP literal; TLS files both or
// neither, readable when given.
TEST(ConfigTest, AgentListenerOffLoopbackNeedsTls) {
  const std::string dir = ::testing::TempDir();
  const std::string cert = dir + "/agent-cert.pem";
  const std::string key = dir + "/agent-key.pem";
  std::ofstream(cert) << "not parsed here\n";
  std::ofstream(key) << "not parsed here\n";
  const std::string tls = absl::StrCat("agent_tls_cert_file: \"", cert, "\" agent_tls_key_file: \"", key, "\"");
  struct Row {
    std::string agent;         // inside agent { }
    std::string must_mention;  // empty: valid
  };
  const std::vector<Row> rows = {
      // Loopback (QEMU user networking): plaintext is fine.
      {R"(agent_listen: "127.0.0.1:9588")", ""},
      {R"(agent_listen: "127.3.4.5:0")", ""},
      {R"(agent_listen: "[::1]:9588")", ""},
      {R"(agent_listen: "[::ffff:127.0.0.1]:9588")", ""},
      {R"(agent_listen: "")", ""},  // agent channel off
      // Anything else needs TLS, and the error names the field.
      {R"(agent_listen: "0.0.0.0:9588")", "\"agent.agent_tls_cert_file\": required"},
      {R"(agent_listen: "[::]:9588")", "\"agent.agent_tls_cert_file\": required"},
      {R"(agent_listen: "192.168.122.1:9588")", "\"agent.agent_tls_cert_file\": required"},
      {R"(agent_listen: "128.0.0.1:9588")", "\"agent.agent_tls_cert_file\": required"},
      {R"(agent_listen: "localhost:9588")", "\"agent.agent_tls_cert_file\": required"},
      // With TLS files: anywhere.
      {absl::StrCat(R"(agent_listen: "192.168.122.1:9588" )", tls), ""},
      {absl::StrCat(R"(agent_listen: "0.0.0.0:9588" )", tls), ""},
      {absl::StrCat(R"(agent_listen: "127.0.0.1:9588" )", tls), ""},
      // Half a pair, unreadable or relative files, files without a listener.
      {absl::StrCat(R"(agent_listen: "192.168.122.1:9588" agent_tls_cert_file: ")", cert, "\""),
       "\"agent.agent_tls_key_file\": required"},
      {absl::StrCat(R"(agent_listen: "127.0.0.1:9588" agent_tls_key_file: ")", key, "\""),
       "\"agent.agent_tls_cert_file\": required"},
      {absl::StrCat(R"(agent_listen: "192.168.122.1:9588" agent_tls_cert_file: ")", dir,
                    R"(/missing.pem" agent_tls_key_file: ")", key, "\""),
       "\"agent.agent_tls_cert_file\": cannot read"},
      {absl::StrCat(R"(agent_listen: "192.168.122.1:9588" agent_tls_cert_file: ")", cert,
                    R"(" agent_tls_key_file: "key.pem")"),
       "\"agent.agent_tls_key_file\""},
      {absl::StrCat(R"(agent_listen: "" )", tls), "\"agent.agent_tls_cert_file\""},
  };
  for (const Row& r : rows) {
    const std::string text = absl::StrCat("agent { ", r.agent, " }");
    auto o = ResolveText(text);
    if (r.must_mention.empty()) {
      EXPECT_TRUE(o.ok()) << text << " -> " << o.status();
      continue;
    }
    ASSERT_FALSE(o.ok()) << text;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(o.status().message().find(r.must_mention), std::string::npos) << text << " -> " << o.status();
  }
  auto with_tls = ResolveText(absl::StrCat(R"(agent { agent_listen: "192.168.122.1:9588" )", tls, " }"));
  ASSERT_TRUE(with_tls.ok()) << with_tls.status();
  EXPECT_EQ(with_tls->agent_tls_cert_file, cert);
  EXPECT_EQ(with_tls->agent_tls_key_file, key);
  auto plain = ResolveText(R"(agent { agent_listen: "127.0.0.1:9588" })");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->agent_tls_cert_file, "");
  // The same rule through flags (what --check_config sees).
  auto flags = ConfigFromFlags({{"agent_listen", "10.0.0.1:9588"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto resolved = Resolve(WithDefaults(*flags));
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("agent.agent_tls_cert_file"), std::string::npos) << resolved.status();
}

}  // namespace
}  // namespace plimsoll::server

namespace plimsoll::server {
namespace {

// In-guest reclaim bounds are sent only when the operator asks for them.
TEST(ConfigTest, ReclaimBoundsAreOffByDefault) {
  auto defaults = ResolveText("");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_FALSE(defaults->agent_reclaim_bounds);
  auto on = ResolveText("agent { reclaim_bounds: true }");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->agent_reclaim_bounds);
}

// The virtio-serial channel block: defaults, and bad values named by their field.
TEST(ConfigTest, AgentChannelFields) {
  auto defaults = ResolveText("");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->agent_channel_name, "org.plimsoll.agent.0");
  EXPECT_FALSE(defaults->agent_channel_autoattach);
  EXPECT_EQ(defaults->agent_channel_socket_dir, "");
  auto on = ResolveText(R"(agent { channel_autoattach: true channel_socket_dir: "/run/plimsoll/channels" })");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->agent_channel_autoattach);
  EXPECT_EQ(on->agent_channel_socket_dir, "/run/plimsoll/channels");
  auto off = ResolveText(R"(agent { channel_name: "" })");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->agent_channel_name, "");
  struct Row {
    std::string agent;
    std::string must_mention;
  };
  const std::vector<Row> rows = {
      {R"(channel_name: "org/plimsoll")", "\"agent.channel_name\""},
      {R"(channel_name: "a b")", "\"agent.channel_name\""},
      {R"(channel_name: "..")", "\"agent.channel_name\""},
      {R"(channel_name: "" channel_autoattach: true)", "\"agent.channel_autoattach\""},
      {R"(channel_socket_dir: "relative/dir")", "\"agent.channel_socket_dir\""},
      {absl::StrCat(R"(channel_socket_dir: "/)", std::string(80, 'd'), "\""), "\"agent.channel_socket_dir\""},
  };
  for (const Row& r : rows) {
    const std::string text = absl::StrCat("agent { ", r.agent, " }");
    auto o = ResolveText(text);
    ASSERT_FALSE(o.ok()) << text;
    EXPECT_NE(o.status().message().find(r.must_mention), std::string::npos) << text << " -> " << o.status();
  }
  // Through flags, as --check_config sees them.
  auto flags = ConfigFromFlags({{"channel_name", "bad name"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto resolved = Resolve(WithDefaults(*flags));
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("agent.channel_name"), std::string::npos) << resolved.status();
}

// vsock is off unless a port is given; VMADDR_PORT_ANY is no port an agent can dial.
TEST(ConfigTest, AgentVsockPort) {
  auto defaults = ResolveText("");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->agent_vsock_port, 0u);
  auto on = ResolveText(R"(agent { vsock_port: 9588 })");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->agent_vsock_port, 9588u);
  // Alone: no TCP listener and no virtio-serial channels.
  auto alone = ResolveText(R"(agent { agent_listen: "" channel_name: "" vsock_port: 1024 })");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->agent_vsock_port, 1024u);
  auto any = ResolveText(R"(agent { vsock_port: 4294967295 })");
  ASSERT_FALSE(any.ok());
  EXPECT_NE(any.status().message().find("\"agent.vsock_port\""), std::string::npos) << any.status();
  auto flags = ConfigFromFlags({{"vsock_port", "9600"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto resolved = Resolve(WithDefaults(*flags));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->agent_vsock_port, 9600u);
  EXPECT_FALSE(ConfigFromFlags({{"vsock_port", "-1"}}).ok());
}

}  // namespace
}  // namespace plimsoll::server
