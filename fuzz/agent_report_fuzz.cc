// Fuzzes the daemon's agent report validator (server/agent/report_validator.h). The input is the
// bytes of one serialized AgentReport, as a guest's agent sends them in SignedAgentReport.report.
// It is validated as the daemon does, twice over: with a wrong proof (must be refused before
// anything else is believed) and with the proof of the uuid it claims (a guest speaking for
// itself, so the Check stage sees arbitrary content). Check then runs as a first report, as a
// replay of itself, unchanged 5 s later, and after a plausible earlier report of the same boot.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "fuzz/agent_fuzz_util.h"
#include "fuzz/fuzz_check.h"
#include "plimsoll/v1/agent.pb.h"
#include "protocol/report_proof.h"
#include "server/agent/report_validator.h"

namespace plimsoll::fuzz {
namespace {

using server::agent::GuestHistory;
using server::agent::GuestLimits;
using server::agent::RejectReason;
using server::agent::ReportValidator;
using server::agent::Verdict;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;
const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

// An earlier report of the same guest and boot, in the shape of a real 4 GiB guest's 60 s after
// boot: the fuzzed report is checked against it for monotonic counters and plausible rates.
v1::AgentReport Baseline(const v1::AgentReport& like) {
  v1::AgentReport r;
  r.set_guest_uuid(like.guest_uuid());
  r.set_boot_id(like.boot_id());
  r.set_sequence(1);
  r.set_boottime_ns(60'000'000'000);
  v1::GuestMeminfo* m = r.mutable_meminfo();
  m->set_mem_total_bytes(4000 * kMiB);
  m->set_mem_free_bytes(1000 * kMiB);
  m->set_mem_available_bytes(3000 * kMiB);
  m->set_cached_bytes(1500 * kMiB);
  v1::GuestVmstat* v = r.mutable_vmstat();
  v->set_workingset_refault_file(1000);
  v->set_pgmajfault(500);
  v->set_pgscan_total(20000);
  v->set_pgsteal_total(15000);
  v->set_oom_kill(0);
  v1::GuestPsi* p = r.mutable_memory_pressure();
  p->mutable_some()->set_avg10(2.5);
  p->mutable_some()->set_total_us(600'000);
  p->mutable_full()->set_total_us(60'000);
  return r;
}

// The monotonic promise of an accepted successor: no counter that both reports carry went down.
void CheckNothingWentBack(const v1::AgentReport& before, const v1::AgentReport& after) {
  FUZZ_CHECK(after.boottime_ns() > before.boottime_ns());
  const google::protobuf::Descriptor* d = v1::GuestVmstat::descriptor();
  const google::protobuf::Reflection* r = v1::GuestVmstat::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64) continue;
    if (!r->HasField(before.vmstat(), f) || !r->HasField(after.vmstat(), f)) continue;
    FUZZ_CHECK(r->GetUInt64(after.vmstat(), f) >= r->GetUInt64(before.vmstat(), f));
  }
  const v1::GuestPsi& a = before.memory_pressure();
  const v1::GuestPsi& b = after.memory_pressure();
  if (a.has_some() && b.has_some()) FUZZ_CHECK(b.some().total_us() >= a.some().total_us());
  if (a.has_full() && b.has_full()) FUZZ_CHECK(b.full().total_us() >= a.full().total_us());
}

void CheckReport(const std::string& bytes) {
  static const ReportValidator* validator = new ReportValidator(FuzzHostKey());
  const GuestLimits limits{8 * kGiB};

  // What the claimed identity is, if the bytes parse at all.
  v1::AgentReport claimed;
  const bool parses = claimed.ParseFromString(bytes);

  // 1. A proof made with another guest's token is never accepted, whatever the report says.
  {
    v1::SignedAgentReport forged =
        SignAs("22222222-2222-4222-8222-222222222222", bytes);
    if (parses && claimed.guest_uuid() == "22222222-2222-4222-8222-222222222222") {
      forged.set_proof(std::string(plimsoll::protocol::kProofBytes, '\0'));
    }
    v1::AgentReport out;
    const Verdict v = validator->Authenticate(forged, &out);
    CheckVerdict(v);
    FUZZ_CHECK(!v.ok());
    FUZZ_CHECK(*v.reject == RejectReason::kOversized || *v.reject == RejectReason::kMalformed ||
               *v.reject == RejectReason::kBadProof);
  }

  // 2. The guest's own proof: stage 1 refuses only what is too big, does not parse or has no
  // canonical uuid.
  v1::AgentReport report;
  const Verdict auth = validator->Authenticate(SignAs(claimed.guest_uuid(), bytes), &report);
  CheckVerdict(auth);
  if (bytes.size() > validator->options().max_report_bytes) {
    FUZZ_CHECK(!auth.ok() && *auth.reject == RejectReason::kOversized);
    return;
  }
  if (!parses || !plimsoll::protocol::IsCanonicalUuid(claimed.guest_uuid())) {
    FUZZ_CHECK(!auth.ok() && *auth.reject == RejectReason::kMalformed);
    return;
  }
  FUZZ_CHECK(auth.ok());

  // 3. Stage 2 for an unknown guest.
  GuestHistory next;
  Verdict v = validator->Check(report, nullptr, GuestHistory(), kNow, &next);
  CheckVerdict(v);
  FUZZ_CHECK(!v.ok() && *v.reject == RejectReason::kUnknownGuest);

  // 4. A first report.
  GuestHistory first;
  v = validator->Check(report, &limits, GuestHistory(), kNow, &first);
  CheckVerdict(v);
  if (v.ok()) {
    FUZZ_CHECK(first.last.has_value());
    FUZZ_CHECK(first.last->SerializeAsString() == report.SerializeAsString());
    FUZZ_CHECK(plimsoll::protocol::IsCanonicalUuid(report.boot_id()));
    FUZZ_CHECK(report.boottime_ns() > 0);
    FUZZ_CHECK(report.meminfo().mem_total_bytes() <= static_cast<uint64_t>(limits.max_bytes));
    // The same bytes again: a replay.
    GuestHistory again;
    v = validator->Check(report, &limits, first, kNow + absl::Seconds(1), &again);
    CheckVerdict(v);
    FUZZ_CHECK(!v.ok() && *v.reject == RejectReason::kReplay);
    // The same sample 5 s later: nothing moved, so it must be believed.
    v1::AgentReport later = report;
    if (later.boottime_ns() <= INT64_MAX - 5'000'000'000) {
      later.set_boottime_ns(later.boottime_ns() + 5'000'000'000);
      v = validator->Check(later, &limits, first, kNow + absl::Seconds(5), &again);
      CheckVerdict(v);
      FUZZ_CHECK(v.ok());
    }
  } else {
    FUZZ_CHECK(!first.last.has_value());
  }

  // 5. After a plausible earlier report of the same boot.
  GuestHistory history;
  history.last = Baseline(report);
  GuestHistory after;
  v = validator->Check(report, &limits, history, kNow, &after);
  CheckVerdict(v);
  if (v.ok()) {
    CheckNothingWentBack(*history.last, report);
  } else {
    FUZZ_CHECK(after.last->SerializeAsString() == history.last->SerializeAsString());
  }
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckReport(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
