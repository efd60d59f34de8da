#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

// GET /metrics over a real socket, so the exposer's path (not only Render) is covered.
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(MetricsTest, AgentStreamSeriesExistBeforeAnySource) {
  Metrics m;
  const std::string text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_active 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_refused_total 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"flood\"} 0")) << text;
}

TEST(MetricsTest, AgentStreamCountsAreReadAtEveryScrape) {
  Metrics m;
  Metrics::AgentCounts agent;
  Metrics::AgentStreamCounts& counts = agent.streams;
  counts.active = 3;
  counts.opened = 10;
  counts.refused = 4;
  counts.timed_out = 5;
  counts.superseded = 1;
  counts.denied = 2;
  counts.flooded = 7;
  std::atomic<int> calls{0};
  m.SetAgentSource([&] {
    calls.fetch_add(1);
    return agent;
  });
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_active 3")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_opened_total 10")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_refused_total 4")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"timeout\"} 5")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"superseded\"} 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"denied\"} 2")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"flood\"} 7")) << text;

  // No tick in between: the next scrape sees the new numbers.
  counts.active = 0;
  counts.refused = 1000;
  counts.flooded = 8;
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_active 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_refused_total 1000")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_streams_ended_total{reason=\"flood\"} 8")) << text;
  EXPECT_EQ(calls.load(), 2);
}

TEST(MetricsTest, CountersNeverGoBackwardsAndKeepTheirValueWhenDetached) {
  Metrics m;
  Metrics::AgentCounts counts;
  counts.streams.denied = 9;
  m.SetAgentSource([&] { return counts; });
  m.Render();
  counts.streams.denied = 2;  // a source that restarted from zero must not make a counter decrease
  EXPECT_TRUE(Has(m.Render(), "plimsoll_agent_streams_ended_total{reason=\"denied\"} 9"));
  m.SetAgentSource(nullptr);
  counts.streams.denied = 50;
  EXPECT_TRUE(Has(m.Render(), "plimsoll_agent_streams_ended_total{reason=\"denied\"} 9"));
}

TEST(MetricsTest, AgentChannelCountsAreReadAtScrapeTime) {
  Metrics m;
  Metrics::AgentCounts agent;
  Metrics::AgentChannelCounts& counts = agent.channels;
  counts.connected = 3;
  counts.without_channel = 2;  // of which one has no controller
  counts.without_controller = 1;
  counts.connects = 5;
  counts.connect_failures = 4;
  counts.closed_guest = 1;
  counts.closed_daemon = 2;
  counts.closed_domain_stopped = 6;
  counts.attached = 7;
  counts.attach_no_controller = 1;
  counts.guest_bytes = 1234;
  counts.throttled = 9;
  m.SetAgentSource([&] { return agent; });
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_channels{state=\"connected\"} 3")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channels{state=\"no_channel\"} 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channels{state=\"no_controller\"} 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_connects_total{result=\"connected\"} 5")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_connects_total{result=\"failed\"} 4")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_closed_total{reason=\"guest_closed\"} 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_closed_total{reason=\"daemon_closed\"} 2")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_closed_total{reason=\"error\"} 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_closed_total{reason=\"domain_stopped\"} 6")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_attach_total{result=\"attached\"} 7")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_attach_total{result=\"no_controller\"} 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_guest_bytes_total 1234")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_throttled_total 9")) << text;
  counts.connected = 0;
  counts.closed_guest = 2;
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_channels{state=\"connected\"} 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_channel_closed_total{reason=\"guest_closed\"} 2")) << text;
  m.SetAgentSource(nullptr);
}

TEST(MetricsTest, AgentVsockCountsAreReadAtScrapeTime) {
  Metrics m;
  std::string text = m.Render();
  // Declared before any source: a first refusal shows as an increase.
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_connections_total{result=\"unknown_cid\"} 0")) << text;
  Metrics::AgentCounts agent;
  Metrics::AgentVsockCounts& counts = agent.vsock;
  counts.domains_with_cid = 2;
  counts.accepted = 5;
  counts.unknown_cid = 3;
  counts.accept_errors = 1;
  m.SetAgentSource([&] { return agent; });
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_domains 2")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_connections_total{result=\"accepted\"} 5")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_connections_total{result=\"unknown_cid\"} 3")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_connections_total{result=\"accept_error\"} 1")) << text;
  counts.unknown_cid = 4;
  counts.domains_with_cid = 1;
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_connections_total{result=\"unknown_cid\"} 4")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_vsock_domains 1")) << text;
  m.SetAgentSource(nullptr);
}

TEST(MetricsTest, TheHttpEndpointServesTheScrapeTimeCounts) {
  Metrics m;
  ASSERT_TRUE(m.Serve("127.0.0.1:0").ok());
  ASSERT_GT(m.bound_port(), 0);
  Metrics::AgentCounts counts;
  counts.streams.refused = 77;
  m.SetAgentSource([&] { return counts; });
  const std::string body = Scrape(m.bound_port());
  EXPECT_NE(body.find("plimsoll_agent_streams_refused_total 77\n"), std::string::npos) << body;
  EXPECT_NE(body.find("plimsoll_agent_reports_total"), std::string::npos) << body;
  m.SetAgentSource(nullptr);
}

std::shared_ptr<const v1::ListGuestsResponse> View(const std::string& text) {
  auto v = std::make_shared<v1::ListGuestsResponse>();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, v.get())) << text;
  return v;
}

// A scrape makes the guest series from the last published view: what is
// exported must still follow the published view exactly.
TEST(MetricsTest, GuestSeriesFollowTheViewAcrossPublishes) {
  Metrics m;
  m.Publish(View(R"(
    guests { name: "web" uuid: "u1" management_state: MANAGEMENT_STATE_MANAGED target_bytes: 100
             stats { usable { bytes: 40 } stats_fresh: true } balloon_state: "ok" }
    guests { name: "db" uuid: "u2" management_state: MANAGEMENT_STATE_STALE_STATS target_bytes: 200 })"));
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_balloon_target_bytes{domain="web",uuid="u1"} 100)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_usable_bytes{domain="web",uuid="u1"} 40)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_managed{domain="web",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_managed{domain="db",uuid="u2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_state{domain="web",state="ok",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_state{domain="web",state="stuck",uuid="u1"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guests{state="managed"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guests{state="stale_stats"} 1)")) << text;
  EXPECT_EQ(text.find(R"(plimsoll_guest_usable_bytes{domain="db")"), std::string::npos) << "db reports no usable";

  // web stops reporting usable and changes state; db is renamed; a guest appears.
  m.Publish(View(R"(
    guests { name: "web" uuid: "u1" management_state: MANAGEMENT_STATE_MANAGED target_bytes: 90
             balloon_state: "stuck" }
    guests { name: "db2" uuid: "u2" management_state: MANAGEMENT_STATE_MANAGED target_bytes: 200 }
    guests { name: "new" uuid: "u3" management_state: MANAGEMENT_STATE_MANAGED })"));
  text = m.Render();
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_balloon_target_bytes{domain="web",uuid="u1"} 90)")) << text;
  EXPECT_EQ(text.find("plimsoll_guest_usable_bytes{"), std::string::npos) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_state{domain="web",state="stuck",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_state{domain="web",state="ok",uuid="u1"} 0)")) << text;
  EXPECT_EQ(text.find(R"(domain="db")"), std::string::npos) << "the old name's series are gone: " << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_max_bytes{domain="db2",uuid="u2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_managed{domain="new",uuid="u3"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guests{state="managed"} 3)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guests{state="stale_stats"} 0)")) << text;

  // Every guest gone: no guest series left at all.
  m.Publish(View(""));
  text = m.Render();
  EXPECT_EQ(text.find("plimsoll_guest_balloon_target_bytes{"), std::string::npos) << text;
  EXPECT_EQ(text.find("plimsoll_guest_state{"), std::string::npos) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guests{state="managed"} 0)")) << text;
}

// What each guest costs the host: its QEMU RSS and whether it reports free pages, each without a
// series where the view does not know it (never a 0 that would read as "nothing" or "off"), and
// the host's sum of the RSS.
TEST(MetricsTest, WhatGuestsCostTheHostHasItsSeries) {
  Metrics m;
  m.Publish(View(R"(
    host { guests_rss_bytes: 3000 }
    guests { name: "on" uuid: "u1" free_page_reporting: true stats { rss { bytes: 1000 } } }
    guests { name: "off" uuid: "u2" free_page_reporting: false stats { rss { bytes: 2000 } } }
    guests { name: "unknown" uuid: "u3" })"));
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_host_rss_bytes{domain="on",uuid="u1"} 1000)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_host_rss_bytes{domain="off",uuid="u2"} 2000)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_free_page_reporting{domain="on",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_free_page_reporting{domain="off",uuid="u2"} 0)")) << text;
  EXPECT_EQ(text.find(R"(plimsoll_guest_free_page_reporting{domain="unknown")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(plimsoll_guest_host_rss_bytes{domain="unknown")"), std::string::npos) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_guests_rss_bytes 3000")) << text;

  // Nobody knows any more: the guest families go, and so does the host's sum (no guest's RSS
  // adds up to no sum, not to 0).
  m.Publish(View(R"(guests { name: "unknown" uuid: "u3" })"));
  text = m.Render();
  EXPECT_EQ(text.find("plimsoll_guest_free_page_reporting"), std::string::npos) << text;
  EXPECT_EQ(text.find("plimsoll_guest_host_rss_bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nplimsoll_host_guests_rss_bytes "), std::string::npos) << text;

  // A guest reports its RSS again: the sum is back.
  m.Publish(View(R"(
    host { guests_rss_bytes: 1000 }
    guests { name: "on" uuid: "u1" stats { rss { bytes: 1000 } } })"));
  EXPECT_TRUE(Has(m.Render(), "plimsoll_host_guests_rss_bytes 1000")) << m.Render();
}

// Before any guest has reported its RSS (no guests at all, or none with the stat), the host's sum
// has no series: 0 would say the guests cost the host nothing.
TEST(MetricsTest, GuestsRssHasNoSeriesUntilAGuestReportsIt) {
  Metrics m;
  EXPECT_EQ(m.Render().find("\nplimsoll_host_guests_rss_bytes "), std::string::npos) << m.Render();
  m.Publish(View(""));
  EXPECT_EQ(m.Render().find("\nplimsoll_host_guests_rss_bytes "), std::string::npos) << m.Render();
  m.Publish(View(R"(guests { name: "quiet" uuid: "u1" stats { usable { bytes: 5 } } })"));
  EXPECT_EQ(m.Render().find("\nplimsoll_host_guests_rss_bytes "), std::string::npos) << m.Render();
}

TEST(MetricsTest, AnAgentsReclaimHasItsSeriesAndAGuestWithoutOneHasNone) {
  Metrics m;
  m.Publish(View(R"(
    guests { name: "r" uuid: "u1" agent { connected: true reclaim {
      state: "active" reason: "step" bounds_enabled: true bounds_keep_bytes: 300
      claimed_bytes: 5000 confirmed_bytes: 1000 unconfirmed_bytes: 3000 unconfirmed_claims: 2
      compactions: 7 failed_compactions: 1 } } }
    guests { name: "off" uuid: "u2" agent { connected: true reclaim { state: "idle" bounds_enabled: false } } }
    guests { name: "none" uuid: "u3" agent { connected: true } })"));
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_keep_bytes{domain="r",uuid="u1"} 300)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_claimed_bytes_total{domain="r",uuid="u1"} 5000)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_confirmed_bytes_total{domain="r",uuid="u1"} 1000)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_unconfirmed_bytes_total{domain="r",uuid="u1"} 3000)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_unconfirmed_claims_total{domain="r",uuid="u1"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_compactions_total{domain="r",uuid="u1"} 7)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_failed_compactions_total{domain="r",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_state{domain="r",state="active",uuid="u1"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_state{domain="r",state="idle",uuid="u1"} 0)")) << text;
  EXPECT_NE(text.find("# TYPE plimsoll_guest_reclaim_claimed_bytes_total counter"), std::string::npos) << text;
  // Bounds with enabled = false: no keep; the counters at 0 all the same.
  EXPECT_EQ(text.find(R"(plimsoll_guest_reclaim_keep_bytes{domain="off")"), std::string::npos) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_unconfirmed_claims_total{domain="off",uuid="u2"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_guest_reclaim_state{domain="off",state="idle",uuid="u2"} 1)")) << text;
  // An agent without a reclaimer: no series, not zeros.
  EXPECT_EQ(text.find(R"(plimsoll_guest_reclaim_state{domain="none")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(plimsoll_guest_reclaim_claimed_bytes_total{domain="none")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(plimsoll_guest_reclaim_unconfirmed_claims_total{domain="none")"), std::string::npos) << text;

  m.Publish(View(R"(guests { name: "none" uuid: "u3" })"));
  text = m.Render();
  EXPECT_EQ(text.find("plimsoll_guest_reclaim"), std::string::npos) << text;
}

// Prometheus' increase() only sees increments of a series that already exists: a counter born
// at its first failure hides that failure from the PlimsollLibvirtErrors alert. Every counter
// family whose label values are known up front is therefore scraped at 0 before anything happened.
TEST(MetricsTest, CountersWithKnownLabelsExistAtZeroBeforeAnyEvent) {
  Metrics m;
  m.DeclareAgentRejectReasons({"bad_proof", "flood"});
  const std::string text = m.Render();
  for (const char* op : {"connect", "list_domains", "enable_stats", "balloon_stats", "set_target"}) {
    EXPECT_TRUE(Has(text, absl::StrCat("plimsoll_libvirt_errors_total{operation=\"", op, "\"} 0"))) << op << text;
  }
  for (const char* d : {"inflate", "deflate", "hold"}) {
    EXPECT_TRUE(Has(text, absl::StrCat("plimsoll_decisions_total{direction=\"", d, "\"} 0"))) << d;
  }
  EXPECT_TRUE(Has(text, R"(plimsoll_config_reloads_total{result="failure"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_agent_reports_rejected_total{reason="bad_proof"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_agent_reports_rejected_total{reason="flood"} 0)")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_agent_reports_total 0")) << text;
  for (const char* r : {"in_flight", "job", "pool_full"}) {
    EXPECT_TRUE(Has(text, absl::StrCat("plimsoll_balloon_busy_skips_total{reason=\"", r, "\"} 0"))) << r << text;
  }
  EXPECT_TRUE(Has(text, "plimsoll_balloon_call_timeouts_total 0")) << text;

  // The first failure is then an increase from 0 to 1, on the series that was there.
  m.CountLibvirtError(LibvirtOperation::kSetTarget);
  EXPECT_TRUE(Has(m.Render(), R"(plimsoll_libvirt_errors_total{operation="set_target"} 1)"));
}

TEST(MetricsTest, DecisionsAreCountedByDirection) {
  Metrics m;
  m.CountDecision(v1::DIRECTION_INFLATE);
  m.CountDecision(v1::DIRECTION_HOLD);
  m.CountDecision(v1::DIRECTION_HOLD);
  m.CountDecision(v1::DIRECTION_UNSPECIFIED);
  const std::string text = m.Render();
  EXPECT_TRUE(Has(text, R"(plimsoll_decisions_total{direction="inflate"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_decisions_total{direction="deflate"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(plimsoll_decisions_total{direction="hold"} 3)")) << text;
}

TEST(MetricsTest, EveryEnvelopeRuleHasItsSeriesFromTheStart) {
  Metrics m;
  m.CountEnvelopeRule(EnvelopeRule::kPinStep);
  m.CountEnvelopeRule(EnvelopeRule::kPinStep);
  const std::string text = m.Render();
  for (EnvelopeRule rule : kAllEnvelopeRules) {
    const int want = rule == EnvelopeRule::kPinStep ? 2 : 0;
    EXPECT_TRUE(Has(text, absl::StrCat("plimsoll_envelope_rules_total{rule=\"", EnvelopeRuleName(rule), "\"} ", want)))
        << EnvelopeRuleName(rule) << "\n" << text;
  }
}

TEST(MetricsTest, TheLineIsStaleUntilAViewPublishesIt) {
  Metrics m;
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_host_line_stale 1")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_line_offered_bytes 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_over_line 0")) << text;
  v1::ListGuestsResponse view;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
    host_line { capacity_bytes: 8589934592 committed_bytes: 9663676416 headroom_bytes: -1610612736
                offered_bytes: 0 over_line: true tick: 4 })",
                                                          &view));
  m.Publish(std::make_shared<const v1::ListGuestsResponse>(view));
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_host_line_stale 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_line_capacity_bytes 8589934592")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_line_committed_bytes 9663676416")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_line_headroom_bytes -1610612736")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_host_over_line 1")) << text;
}

// The reclaim pool's figures follow the view: the members, what they lend, the reserve and
// whether it covers; an empty pool reads 0.
TEST(MetricsTest, ReclaimPoolFollowsTheView) {
  Metrics m;
  m.Publish(View(R"(
    host { reclaim_pool { members: 2 lent_bytes: 4096 reserve_bytes: 1024 covers: true } })"));
  std::string text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_members 2")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_lent_bytes 4096")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_reserve_bytes 1024")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_covers 1")) << text;
  m.Publish(View(""));
  text = m.Render();
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_members 0")) << text;
  EXPECT_TRUE(Has(text, "plimsoll_reclaim_pool_covers 0")) << text;
}

}  // namespace
}  // namespace plimsoll::server
