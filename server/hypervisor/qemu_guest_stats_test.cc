#include "server/hypervisor/qemu_guest_stats.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

// A 6.12 guest on QEMU 10.0, as the lab's backports flavour answers (trimmed of stats this parser
// does not read).
constexpr char kModern[] =
    R"({"return":{"stats":{"stat-htlb-pgalloc":0,"stat-alloc-stalls":7,"stat-direct-reclaims":1536,)"
    R"("stat-direct-scans":2048,"stat-oom-kills":2,"stat-async-reclaims":40960,"stat-swap-in":0,)"
    R"("stat-async-scans":51200,"stat-disk-caches":7962624},"last-update":1796560306},"id":"libvirt-485"})";

TEST(QemuGuestStatsTest, ReadsEveryCounterOfAModernGuest) {
  absl::StatusOr<BalloonPressure> p = ParseQemuGuestStats(kModern);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->oom_kills, 2u);
  EXPECT_EQ(p->alloc_stalls, 7u);
  EXPECT_EQ(p->direct_scans, 2048u);
  EXPECT_EQ(p->direct_reclaims, 1536u);
  EXPECT_EQ(p->async_scans, 51200u);
  EXPECT_EQ(p->async_reclaims, 40960u);
  EXPECT_EQ(p->last_update, 1796560306);
  EXPECT_TRUE(p->any());
}

struct Case {
  const char* name;
  std::string reply;
  bool ok;
  bool any;  // a counter is present
  std::optional<uint64_t> oom_kills;
};

class QemuGuestStatsTable : public testing::TestWithParam<Case> {};

TEST_P(QemuGuestStatsTable, Reads) {
  const Case& c = GetParam();
  absl::StatusOr<BalloonPressure> p = ParseQemuGuestStats(c.reply);
  ASSERT_EQ(p.ok(), c.ok) << p.status();
  if (!p.ok()) return;
  EXPECT_EQ(p->any(), c.any);
  EXPECT_EQ(p->oom_kills, c.oom_kills);
}

INSTANTIATE_TEST_SUITE_P(
    Replies, QemuGuestStatsTable,
    testing::Values(
        // QEMU 7.2 does not know the counters: absent, not zero.
        Case{"old_qemu",
             R"({"return":{"stats":{"stat-swap-in":0,"stat-major-faults":443},"last-update":17},"id":"x"})", true,
             false, std::nullopt},
        // QEMU >= 9.2 with a guest kernel that never sends them: 2^64-1.
        Case{"old_kernel",
             R"({"return":{"stats":{"stat-oom-kills":18446744073709551615,"stat-alloc-stalls":18446744073709551615}},"id":"x"})",
             true, false, std::nullopt},
        // Stats not yet enabled: no stats object at all.
        Case{"no_stats", R"({"return":{"last-update":0},"id":"x"})", true, false, std::nullopt},
        Case{"zero", R"({"return":{"stats":{"stat-oom-kills":0}},"id":"x"})", true, true, 0},
        // Impossible values are absent, never wrapped or clamped.
        Case{"negative", R"({"return":{"stats":{"stat-oom-kills":-1}},"id":"x"})", true, false, std::nullopt},
        Case{"fraction", R"({"return":{"stats":{"stat-oom-kills":1.5}},"id":"x"})", true, false, std::nullopt},
        Case{"string", R"({"return":{"stats":{"stat-oom-kills":"3"}},"id":"x"})", true, false, std::nullopt},
        Case{"stats_not_object", R"({"return":{"stats":[1,2]},"id":"x"})", true, false, std::nullopt},
        // QEMU's error: no balloon at that path.
        Case{"qmp_error",
             R"({"id":"x","error":{"class":"DeviceNotFound","desc":"Device '/machine/peripheral/balloon0' not found"}})",
             false, false, std::nullopt},
        Case{"not_json", "Property 'guest-stats' not found", false, false, std::nullopt},
        Case{"no_return", R"({"id":"x"})", false, false, std::nullopt},
        Case{"return_not_object", R"({"return":3})", false, false, std::nullopt},
        Case{"empty", "", false, false, std::nullopt}),
    [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(QemuGuestStatsTest, ErrorCarriesQemusDescription) {
  absl::StatusOr<BalloonPressure> p = ParseQemuGuestStats(
      R"({"error":{"class":"DeviceNotFound","desc":"Device 'balloon0' not found"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("Device 'balloon0' not found"), std::string::npos);
}

}  // namespace
}  // namespace plimsoll::hypervisor
