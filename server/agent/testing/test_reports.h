// Test helpers: literal agent reports and their signed frames.
#ifndef PLIMSOLL_SERVER_AGENT_TESTING_TEST_REPORTS_H_
#define PLIMSOLL_SERVER_AGENT_TESTING_TEST_REPORTS_H_

#include <cstdint>
#include <string>

#include "plimsoll/v1/agent.pb.h"
#include "protocol/report_proof.h"

namespace plimsoll::server::agent::testing {

inline constexpr char kVictim[] = "11111111-1111-4111-8111-111111111111";
inline constexpr char kAttacker[] = "22222222-2222-4222-8222-222222222222";
inline constexpr char kStranger[] = "33333333-3333-4333-8333-333333333333";
inline constexpr char kBootA[] = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
inline constexpr char kBootB[] = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb";
inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kMiB = int64_t{1} << 20;

inline std::string TestHostKey() { return std::string(32, '\x5a'); }

inline std::string TokenFor(const std::string& uuid) {
  return plimsoll::protocol::DeriveGuestToken(TestHostKey(), uuid);
}

// A plausible report of a 1 GiB guest at `seconds` after boot; counters grow with time.
inline v1::AgentReport MakeReport(const std::string& uuid, const std::string& boot, double seconds,
                                  uint64_t sequence = 1) {
  v1::AgentReport r;
  r.set_guest_uuid(uuid);
  r.set_boot_id(boot);
  r.set_sequence(sequence);
  r.set_boottime_ns(static_cast<int64_t>(seconds * 1e9));
  v1::GuestMeminfo* m = r.mutable_meminfo();
  m->set_mem_total_bytes(1000 * kMiB);
  m->set_mem_free_bytes(100 * kMiB);
  m->set_mem_available_bytes(600 * kMiB);
  m->set_cached_bytes(500 * kMiB);
  m->set_active_file_bytes(200 * kMiB);
  m->set_inactive_file_bytes(300 * kMiB);
  m->set_anon_pages_bytes(250 * kMiB);
  m->set_swap_total_bytes(0);
  m->set_swap_free_bytes(0);
  v1::GuestVmstat* v = r.mutable_vmstat();
  const uint64_t t = static_cast<uint64_t>(seconds);
  v->set_workingset_refault_file(1000 + 100 * t);
  v->set_workingset_refault_anon(10 * t);
  v->set_pgmajfault(50 + 5 * t);
  v->set_pgscan_total(2000 + 300 * t);
  v->set_pgsteal_total(1500 + 200 * t);
  v->set_oom_kill(0);
  v->set_balloon_inflate(0);
  v->set_balloon_deflate(0);
  v1::GuestPsi* p = r.mutable_memory_pressure();
  p->mutable_some()->set_avg10(2.5);
  p->mutable_some()->set_avg60(1.0);
  p->mutable_some()->set_total_us(static_cast<uint64_t>(seconds * 1e4));  // 1% stalled
  p->mutable_full()->set_avg10(0.5);
  p->mutable_full()->set_total_us(static_cast<uint64_t>(seconds * 1e3));
  return r;
}

// Signs `report` with `token` (the claimed uuid's own token unless a test says otherwise).
inline v1::SignedAgentReport Sign(const v1::AgentReport& report, const std::string& token) {
  v1::SignedAgentReport frame;
  report.SerializeToString(frame.mutable_report());
  frame.set_proof(plimsoll::protocol::ComputeProof(token, frame.report()));
  return frame;
}

inline v1::SignedAgentReport SignAsSelf(const v1::AgentReport& report) {
  return Sign(report, TokenFor(report.guest_uuid()));
}

}  // namespace plimsoll::server::agent::testing

#endif  // PLIMSOLL_SERVER_AGENT_TESTING_TEST_REPORTS_H_
