#include "server/config/config_reload.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::plimsoll::v1::DaemonConfig;

EffectiveConfig FromText(const std::string& text) {
  auto parsed = ParseConfigText(text, "test.textproto");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  EffectiveConfig e;
  e.config = WithDefaults(*parsed);
  auto o = Resolve(e.config);
  EXPECT_TRUE(o.ok()) << o.status();
  e.options = *o;
  auto c = ResolveControlApi(e.config);
  EXPECT_TRUE(c.ok()) << c.status();
  e.control = *c;
  return e;
}

std::vector<std::string> Fields(const std::vector<ConfigChange>& changes) {
  std::vector<std::string> out;
  for (const ConfigChange& c : changes) out.push_back(c.field);
  return out;
}

struct DiffCase {
  std::string name;
  std::string next;  // config text; the running one is the defaults
  std::vector<std::string> live;
  std::vector<std::string> restart;
  bool loop, policy, dry_run, roles;
};

TEST(ConfigReloadTest, DiffSortsEveryChangeIntoLiveOrRestart) {
  const std::vector<DiffCase> cases = {
      {"nothing", "", {}, {}, false, false, false, false},
      {"policy", R"(policy: "mom")", {"policy"}, {}, true, true, false, false},
      {"tick", R"(tick: "1s")", {"tick"}, {}, true, false, false, false},
      {"dry_run", "dry_run: true", {"dry_run"}, {}, true, false, true, false},
      {"log_every_decision", "log_every_decision: true", {"log_every_decision"}, {}, true, false, false, false},
      {"min_wake_interval", R"(min_wake_interval: "250ms")", {"min_wake_interval"}, {}, true, false, false, false},
      {"block_stats_interval", R"(block_stats_interval: "20s")", {"block_stats_interval"}, {}, true, false, false,
       false},
      {"balloon pool", R"(balloon_workers: 2 balloon_call_deadline: "20s")", {},
       {"balloon_workers", "balloon_call_deadline"}, false, false, false, false},
      {"host", "host { host_reserve_bytes: 0 guest_memory_budget_bytes: 1000 }",
       {"host.host_reserve_bytes", "host.guest_memory_budget_bytes"}, {}, true, false, false, false},
      {"guest defaults",
       R"(guest_defaults { min_bytes: 1 min_fraction: 0.5 stats_period_seconds: 5 stale_after: "60s" })",
       {"guest_defaults.min_bytes", "guest_defaults.min_fraction", "guest_defaults.stats_period_seconds",
        "guest_defaults.stale_after"},
       {}, true, false, false, false},
      {"line", R"(line { new_guest_room_bytes: 1 burst_reserve_bytes: 2 offer_hold: "1m" })",
       {"line.new_guest_room_bytes", "line.burst_reserve_bytes", "line.offer_hold"}, {}, true, false, false, false},
      {"roles", R"(control { admin_common_names: "ops" reader_organizational_units: "viewers" })",
       // Any role set replaces all the defaults, so the default admin OU goes too.
       {"control.admin_common_names", "control.admin_organizational_units", "control.reader_organizational_units"},
       {}, false, false, false, true},
      {"restart only",
       R"(libvirt_uri: "test:///default" metrics_listen: "127.0.0.1:1" host { proc_root: "/x" }
          agent { agent_listen: "127.0.0.1:2" agent_host_key_file: "/k" agent_stale_after: "5s" }
          control { state_file: "/s" })",
       {},
       {"libvirt_uri", "metrics_listen", "host.proc_root", "agent.agent_listen", "agent.agent_host_key_file",
        "agent.agent_stale_after", "control.state_file"},
       false, false, false, false},
      {"agent TLS files",
       // Readability is all Resolve checks; the PEMs are parsed when the listener starts.
       R"(agent { agent_tls_cert_file: "/proc/version" agent_tls_key_file: "/proc/version" })",
       {},
       {"agent.agent_tls_cert_file", "agent.agent_tls_key_file"},
       false, false, false, false},
      {"agent channels",
       R"(agent { channel_name: "org.other.0" channel_autoattach: true channel_socket_dir: "/run/x" })",
       {},
       {"agent.channel_name", "agent.channel_autoattach", "agent.channel_socket_dir"},
       false, false, false, false},
      {"agent vsock", R"(agent { vsock_port: 9588 })", {}, {"agent.vsock_port"}, false, false, false, false},
      {"grpc listen to TCP with TLS",
       R"(grpc_listen: "127.0.0.1:7000"
          control { tls { cert_file: "/c" key_file: "/k" client_ca_file: "/ca" } tls_reload_interval: "30s" })",
       {},
       {"grpc_listen", "control.tls.cert_file", "control.tls.key_file", "control.tls.client_ca_file",
        "control.tls_reload_interval"},
       false, false, false, false},
      {"both", R"(policy: "static" libvirt_uri: "test:///default")", {"policy"}, {"libvirt_uri"}, true, true,
       false, false},
  };
  const EffectiveConfig running = FromText("");
  for (const DiffCase& c : cases) {
    SCOPED_TRACE(c.name);
    const EffectiveConfig next = FromText(c.next);
    const ConfigChanges ch = DiffConfig(running.options, running.control, next.options, next.control);
    EXPECT_EQ(Fields(ch.live), c.live);
    EXPECT_EQ(Fields(ch.restart), c.restart);
    EXPECT_EQ(ch.loop, c.loop);
    EXPECT_EQ(ch.policy, c.policy);
    EXPECT_EQ(ch.dry_run, c.dry_run);
    EXPECT_EQ(ch.roles, c.roles);
  }
}

TEST(ConfigReloadTest, ChangesReadOldToNew) {
  const EffectiveConfig a = FromText("");
  const EffectiveConfig b = FromText(R"(policy: "mom" tick: "1s" libvirt_uri: "test:///default")");
  const ConfigChanges ch = DiffConfig(a.options, a.control, b.options, b.control);
  EXPECT_EQ(ch.LiveSummary(), R"(policy "pagecache" -> "mom", tick 5s -> 1s)");
  ASSERT_EQ(ch.restart.size(), 1u);
  EXPECT_EQ(ch.restart[0].from, "\"qemu:///system\"");
  EXPECT_EQ(ch.restart[0].to, "\"test:///default\"");
  EXPECT_EQ(DiffConfig(a.options, a.control, a.options, a.control).LiveSummary(), "nothing");
}

TEST(ConfigReloadTest, MergeTakesLiveSettingsAndKeepsRestartOnes) {
  const EffectiveConfig a = FromText("");
  const EffectiveConfig b = FromText(R"(
    policy: "mom" tick: "1s" dry_run: true libvirt_uri: "test:///default" metrics_listen: "127.0.0.1:1"
    log_every_decision: true min_wake_interval: "250ms" block_stats_interval: "20s"
    host { host_reserve_bytes: 5 guest_memory_budget_bytes: 6 proc_root: "/x" }
    guest_defaults { min_bytes: 7 min_fraction: 0.5 stats_period_seconds: 3 stale_after: "9s" }
    line { new_guest_room_bytes: 10 burst_reserve_bytes: 11 offer_hold: "12s" }
    agent { agent_listen: "127.0.0.1:2" }
    control { admin_common_names: "ops" state_file: "/s" })");
  const Options o = MergeReloadable(a.options, b.options);
  EXPECT_EQ(o.policy, "mom");
  EXPECT_EQ(o.tick, absl::Seconds(1));
  EXPECT_TRUE(o.dry_run);
  EXPECT_TRUE(o.log_every_decision);
  EXPECT_EQ(o.min_wake_interval, absl::Milliseconds(250));
  EXPECT_EQ(o.block_stats_interval, absl::Seconds(20));
  EXPECT_EQ(o.host_reserve_bytes, 5);
  EXPECT_EQ(o.guest_memory_budget_bytes, 6);
  EXPECT_EQ(o.min_bytes, 7);
  EXPECT_DOUBLE_EQ(o.min_fraction, 0.5);
  EXPECT_EQ(o.stats_period_seconds, 3);
  EXPECT_EQ(o.stale_after, absl::Seconds(9));
  EXPECT_EQ(o.line_new_guest_room_bytes, 10);
  EXPECT_EQ(o.line_burst_reserve_bytes, 11);
  EXPECT_EQ(o.line_offer_hold, absl::Seconds(12));
  EXPECT_EQ(o.libvirt_uri, a.options.libvirt_uri);
  EXPECT_EQ(o.metrics_listen, a.options.metrics_listen);
  EXPECT_EQ(o.proc_root, a.options.proc_root);
  EXPECT_EQ(o.agent_listen, a.options.agent_listen);
  // Merged with itself the diff is only the live part: nothing needs a restart.
  EXPECT_TRUE(DiffConfig(o, a.control, b.options, a.control).live.empty());
  const ControlApiOptions c = MergeReloadable(a.control, b.control);
  EXPECT_EQ(c.roles.admin_common_names, std::vector<std::string>{"ops"});
  EXPECT_EQ(c.state_file, a.control.state_file);
}

std::string WriteTemp(const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  static int n = 0;
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/reload" + std::to_string(++n) + ".textproto";
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigReloadTest, LoadEffectiveConfigOverlaysFlagsOnTheFile) {
  const std::string path = WriteTemp("policy: \"mom\"\ntick: \"2s\"\n");
  auto flags = ConfigFromFlags({{"tick", "300ms"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto e = LoadEffectiveConfig(path, *flags);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->options.policy, "mom");            // from the file
  EXPECT_EQ(e->options.tick, absl::Milliseconds(300));  // the flag wins
  EXPECT_EQ(e->options.libvirt_uri, "qemu:///system");   // default
  EXPECT_EQ(e->control.state_file, kDefaultStateFile);
}

// A file that names the pagecache policy as an earlier plimsolld did loads, and the effective
// configuration (what --check_config prints) names the policy that runs.
TEST(ConfigReloadTest, LoadEffectiveConfigRunsADeprecatedPolicyNameUnderItsCurrentOne) {
  auto e = LoadEffectiveConfig(WriteTemp("policy: \"pagecache_law\"\n"), {});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->options.policy, "pagecache");
  EXPECT_EQ(e->config.policy(), "pagecache");
  EXPECT_NE(ToText(e->config).find("policy: \"pagecache\"\n"), std::string::npos) << ToText(e->config);
  ASSERT_EQ(e->options.warnings.size(), 1u);
  EXPECT_NE(e->options.warnings[0].find("\"pagecache_law\" is a deprecated name"), std::string::npos)
      << e->options.warnings[0];
  // Reloading it over a daemon that runs "pagecache" changes nothing.
  auto current = LoadEffectiveConfig(WriteTemp("policy: \"pagecache\"\n"), {});
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_TRUE(DiffConfig(current->options, current->control, e->options, e->control).live.empty());
}

TEST(ConfigReloadTest, LoadEffectiveConfigErrorsNameTheLineOrTheField) {
  const std::string unknown = WriteTemp("policy: \"mom\"\n  bogus_field: 1\n");
  auto e = LoadEffectiveConfig(unknown, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(unknown + ":2:"), std::string::npos) << e.status();
  EXPECT_NE(e.status().message().find("bogus_field"), std::string::npos) << e.status();

  e = LoadEffectiveConfig(WriteTemp("tick: \"fast\"\n"), {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("config field \"tick\""), std::string::npos) << e.status();

  e = LoadEffectiveConfig(WriteTemp("grpc_listen: \"127.0.0.1:1\"\n"), {});  // TCP without TLS files
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("control"), std::string::npos) << e.status();

  e = LoadEffectiveConfig("/nonexistent/plimsolld.textproto", {});
  EXPECT_TRUE(absl::IsNotFound(e.status())) << e.status();
}

}  // namespace
}  // namespace plimsoll::server
