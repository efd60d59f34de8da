// The balloon's guest-stats property as QEMU's monitor answers it, read into BalloonPressure
// (hypervisor.h). libvirt_hypervisor.cc sends kQemuGuestStatsCommand through libvirt and hands
// the reply text here, so the parsing is pure, table tested (qemu_guest_stats_test.cc) and fuzzed
// (fuzz/qemu_guest_stats_fuzz.cc).
//
// A reply looks like {"return":{"stats":{"stat-oom-kills":0,"stat-alloc-stalls":3,...},
// "last-update":1796560306},"id":"libvirt-485"}. QEMU lists every stat it knows and gives the
// ones the guest never sent as 2^64-1: those, like names QEMU < 9.2 does not send, are absent.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_QEMU_GUEST_STATS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_QEMU_GUEST_STATS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

// libvirt names a domain's balloon device "balloon0" (its alias), so QEMU holds it at
// /machine/peripheral/balloon0.
inline constexpr char kQemuGuestStatsCommand[] =
    R"({"execute":"qom-get","arguments":{"path":"/machine/peripheral/balloon0","property":"guest-stats"}})";

// Reads a reply to kQemuGuestStatsCommand. INVALID_ARGUMENT when it is not JSON or not shaped
// like a reply; NOT_FOUND when QEMU answered an error (no balloon device at that path), with
// QEMU's description. A counter that is not a non-negative integer below 2^63 is absent, as is
// a negative or non-integer last-update. Never fails on a well-formed reply lacking counters.
absl::StatusOr<BalloonPressure> ParseQemuGuestStats(absl::string_view reply);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_QEMU_GUEST_STATS_H_
