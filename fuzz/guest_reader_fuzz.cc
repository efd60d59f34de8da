// Fuzzes the agent's guest-side reader (agent/guest_reader.h): FillSample turns a guest's
// /proc/meminfo, /proc/vmstat and /proc/pressure/memory texts into a report's samples. The input
// is the three texts separated by NUL bytes, "meminfo\0vmstat\0psi" ("meminfo\0vmstat": a kernel
// without PSI); the kernel never writes a NUL, so the real files are seeds as they are.
//
// Beyond no crash: a refusal clears the three samples; an accepted sample is what the daemon's
// validator believes from a guest speaking for itself (never "malformed", sizes in range when
// the guest's ceiling is its MemTotal), with sums no smaller than their parts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/guest_reader.h"
#include "fuzz/agent_fuzz_util.h"
#include "fuzz/fuzz_check.h"
#include "plimsoll/v1/agent.pb.h"
#include "server/agent/report_validator.h"

namespace plimsoll::fuzz {
namespace {

using server::agent::GuestHistory;
using server::agent::GuestLimits;
using server::agent::RejectReason;
using server::agent::ReportValidator;
using server::agent::Verdict;

constexpr char kUuid[] = "11111111-1111-4111-8111-111111111111";
constexpr char kBoot[] = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa";

void CheckSample(absl::string_view input) {
  std::vector<absl::string_view> parts = absl::StrSplit(input, absl::MaxSplits('\0', 2));
  agent::ProcTexts texts;
  texts.meminfo = std::string(parts[0]);
  if (parts.size() > 1) texts.vmstat = std::string(parts[1]);
  if (parts.size() > 2) texts.psi_memory = std::string(parts[2]);

  v1::AgentReport report;
  report.set_guest_uuid(kUuid);
  report.set_boot_id(kBoot);
  report.set_sequence(7);
  report.set_boottime_ns(65'000'000'000);
  // Stale samples from an earlier read must not survive a failed one.
  report.mutable_meminfo()->set_mem_total_bytes(1);
  report.mutable_vmstat()->set_oom_kill(1);
  report.mutable_memory_pressure()->mutable_some()->set_total_us(1);

  const absl::Status status = agent::FillSample(texts, &report);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!report.has_meminfo() && !report.has_vmstat() && !report.has_memory_pressure());
    return;
  }
  const v1::GuestMeminfo& m = report.meminfo();
  FUZZ_CHECK(m.has_mem_total_bytes());
  FUZZ_CHECK(m.mem_total_bytes() % 1024 == 0);
  const v1::GuestVmstat& v = report.vmstat();
  if (v.has_pgscan_total()) {
    FUZZ_CHECK(v.pgscan_total() >= v.pgscan_kswapd() && v.pgscan_total() >= v.pgscan_direct());
  }
  if (v.has_pgsteal_total()) {
    FUZZ_CHECK(v.pgsteal_total() >= v.pgsteal_kswapd() && v.pgsteal_total() >= v.pgsteal_direct());
  }
  FUZZ_CHECK(!v.has_pgscan_kswapd() || v.has_pgscan_total());
  FUZZ_CHECK(!v.has_pgsteal_direct() || v.has_pgsteal_total());
  if (!texts.psi_memory.has_value()) FUZZ_CHECK(!report.has_memory_pressure());

  // What the daemon makes of it, signed by the guest itself, on a guest whose ceiling is its
  // MemTotal: never malformed. (Sizes may still be refused: a hostile meminfo can claim
  // MemFree > MemTotal, and MemTotal 0 is no guest.)
  static const ReportValidator* validator = new ReportValidator(FuzzHostKey());
  std::string bytes;
  FUZZ_CHECK(report.SerializeToString(&bytes));
  v1::AgentReport parsed;
  Verdict verdict = validator->Authenticate(SignAs(kUuid, bytes), &parsed);
  CheckVerdict(verdict);
  if (bytes.size() > validator->options().max_report_bytes) {
    FUZZ_CHECK(*verdict.reject == RejectReason::kOversized);
    return;
  }
  FUZZ_CHECK(verdict.ok());
  const GuestLimits limits{static_cast<int64_t>(
      std::min<uint64_t>(m.mem_total_bytes(), uint64_t{INT64_MAX}))};
  GuestHistory next;
  verdict = validator->Check(parsed, &limits, GuestHistory(), absl::FromUnixSeconds(1'700'000'000),
                             &next);
  CheckVerdict(verdict);
  FUZZ_CHECK(verdict.ok() || *verdict.reject == RejectReason::kSizeOutOfRange);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckSample(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
