#include "server/agent/report_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "protocol/report_proof.h"

namespace plimsoll::server::agent {
namespace {

using ::plimsoll::protocol::DeriveGuestToken;
using ::plimsoll::protocol::IsCanonicalUuid;
using ::plimsoll::protocol::ProofMatches;
using ::plimsoll::protocol::ReportProver;

Verdict Reject(RejectReason reason, std::string detail) { return Verdict{reason, std::move(detail)}; }

bool ValidPercent(double v) { return std::isfinite(v) && v >= 0 && v <= 100; }

bool ValidPsiLine(const v1::PsiLine& line) {
  return ValidPercent(line.avg10()) && ValidPercent(line.avg60()) && ValidPercent(line.avg300());
}

// Compares every set field of two GuestVmstat messages. All of them are cumulative counters by
// contract (agent.proto), so fields added later are covered without touching this code.
Verdict CheckCounters(const v1::GuestVmstat& prev, const v1::GuestVmstat& cur, double seconds,
                      double max_rate) {
  const google::protobuf::Descriptor* d = v1::GuestVmstat::descriptor();
  const google::protobuf::Reflection* r = v1::GuestVmstat::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64 || f->is_repeated()) continue;
    if (!r->HasField(prev, f) || !r->HasField(cur, f)) continue;  // a counter may appear or vanish with an agent upgrade
    const uint64_t before = r->GetUInt64(prev, f);
    const uint64_t after = r->GetUInt64(cur, f);
    if (after < before) {
      return Reject(RejectReason::kCounterBackwards, absl::StrCat(f->name(), " ", before, " -> ", after));
    }
    const double rate = static_cast<double>(after - before) / seconds;
    if (rate > max_rate) {
      return Reject(RejectReason::kImplausibleRate,
                    absl::StrCat(f->name(), " grew ", after - before, " in ", seconds, "s"));
    }
  }
  return Verdict{};
}

Verdict CheckPsiTotal(const char* name, const v1::PsiLine& prev, const v1::PsiLine& cur, double seconds) {
  if (cur.total_us() < prev.total_us()) {
    return Reject(RejectReason::kCounterBackwards,
                  absl::StrCat("psi ", name, " total ", prev.total_us(), " -> ", cur.total_us()));
  }
  // Stall time cannot outrun wall time. 10% and 1 s of slack absorb the difference between the
  // clock PSI uses and CLOCK_BOOTTIME.
  const double grown_s = static_cast<double>(cur.total_us() - prev.total_us()) / 1e6;
  if (grown_s > seconds * 1.1 + 1.0) {
    return Reject(RejectReason::kImplausibleRate,
                  absl::StrCat("psi ", name, " total grew ", grown_s, "s in ", seconds, "s"));
  }
  return Verdict{};
}

Verdict CheckSizes(const v1::GuestMeminfo& m, int64_t max_bytes, uint64_t max_swap) {
  const uint64_t cap = static_cast<uint64_t>(std::max<int64_t>(max_bytes, 0));
  if (m.has_mem_total_bytes() && (m.mem_total_bytes() == 0 || m.mem_total_bytes() > cap)) {
    return Reject(RejectReason::kSizeOutOfRange,
                  absl::StrCat("MemTotal ", m.mem_total_bytes(), " outside (0, max ", cap, "]"));
  }
  // Fields that are parts of RAM: none can exceed MemTotal, nor the guest's ceiling.
  const uint64_t ram = m.has_mem_total_bytes() ? m.mem_total_bytes() : cap;
  struct Part {
    const char* name;
    bool has;
    uint64_t value;
  };
  const Part parts[] = {
      {"MemFree", m.has_mem_free_bytes(), m.mem_free_bytes()},
      {"MemAvailable", m.has_mem_available_bytes(), m.mem_available_bytes()},
      {"Buffers", m.has_buffers_bytes(), m.buffers_bytes()},
      {"Cached", m.has_cached_bytes(), m.cached_bytes()},
      {"Active(file)", m.has_active_file_bytes(), m.active_file_bytes()},
      {"Inactive(file)", m.has_inactive_file_bytes(), m.inactive_file_bytes()},
      {"AnonPages", m.has_anon_pages_bytes(), m.anon_pages_bytes()},
      {"Shmem", m.has_shmem_bytes(), m.shmem_bytes()},
      {"SReclaimable", m.has_sreclaimable_bytes(), m.sreclaimable_bytes()},
      {"SUnreclaim", m.has_sunreclaim_bytes(), m.sunreclaim_bytes()},
  };
  for (const Part& p : parts) {
    if (p.has && p.value > ram) {
      return Reject(RejectReason::kSizeOutOfRange, absl::StrCat(p.name, " ", p.value, " > ", ram));
    }
  }
  if (m.has_swap_total_bytes() && m.swap_total_bytes() > max_swap) {
    return Reject(RejectReason::kSizeOutOfRange, absl::StrCat("SwapTotal ", m.swap_total_bytes()));
  }
  if (m.has_swap_free_bytes() && m.swap_free_bytes() > (m.has_swap_total_bytes() ? m.swap_total_bytes() : max_swap)) {
    return Reject(RejectReason::kSizeOutOfRange, absl::StrCat("SwapFree ", m.swap_free_bytes(), " > SwapTotal"));
  }
  return Verdict{};
}

// The reclaim part against the previous accepted report of the same guest (null: none, or
// another boot). See the header for the rules.
Verdict CheckReclaim(const v1::AgentReport& report, const v1::AgentReport* previous, int64_t max_bytes,
                     double max_rate) {
  if (!report.has_reclaim()) return Verdict{};
  const v1::ReclaimReport& r = report.reclaim();
  if (r.counters_since_boottime_ns() <= 0 || r.counters_since_boottime_ns() > report.boottime_ns()) {
    return Reject(RejectReason::kMalformed, absl::StrCat("reclaim counters_since_boottime_ns ",
                                                         r.counters_since_boottime_ns(), " outside (0, boottime]"));
  }
  if (r.achieved_bytes() > r.requested_bytes()) {
    return Reject(RejectReason::kImplausibleReclaim,
                  absl::StrCat("reclaim achieved ", r.achieved_bytes(), " > requested ", r.requested_bytes()));
  }
  // Compared without the sum, which a hostile agent could wrap around.
  if (r.failed_steps() > r.steps() || r.partial_steps() > r.steps() - r.failed_steps()) {
    return Reject(RejectReason::kImplausibleReclaim,
                  absl::StrCat("reclaim partial ", r.partial_steps(), " + failed ", r.failed_steps(), " > steps ",
                               r.steps()));
  }
  const bool same = previous != nullptr && ReportValidator::SameReclaimSeries(report, *previous);
  if (!same && previous != nullptr && r.counters_since_boottime_ns() < previous->boottime_ns()) {
    return Reject(RejectReason::kImplausibleReclaim,
                  absl::StrCat("a new reclaim series since ", r.counters_since_boottime_ns(),
                               " starts before the last accepted report at ", previous->boottime_ns()));
  }
  uint64_t grown = r.requested_bytes();
  int64_t from_ns = r.counters_since_boottime_ns();
  if (same) {
    const v1::ReclaimReport& p = previous->reclaim();
    struct Counter {
      const char* name;
      uint64_t before, after;
    };
    const Counter counters[] = {
        {"requested_bytes", p.requested_bytes(), r.requested_bytes()},
        {"achieved_bytes", p.achieved_bytes(), r.achieved_bytes()},
        {"steps", p.steps(), r.steps()},
        {"partial_steps", p.partial_steps(), r.partial_steps()},
        {"failed_steps", p.failed_steps(), r.failed_steps()},
        {"compactions", p.compactions(), r.compactions()},
        {"failed_compactions", p.failed_compactions(), r.failed_compactions()},
    };
    for (const Counter& c : counters) {
      if (c.after < c.before) {
        return Reject(RejectReason::kCounterBackwards, absl::StrCat("reclaim ", c.name, " ", c.before, " -> ", c.after));
      }
    }
    grown = r.requested_bytes() - p.requested_bytes();
    from_ns = previous->boottime_ns();
  }
  const double seconds = static_cast<double>(report.boottime_ns() - from_ns) / 1e9;
  const double allowed = max_rate * (seconds + 1.0) + static_cast<double>(std::max<int64_t>(max_bytes, 0));
  if (static_cast<double>(grown) > allowed) {
    return Reject(RejectReason::kImplausibleReclaim,
                  absl::StrCat("reclaim requested grew ", grown, " bytes in ", seconds, "s (at most ",
                               static_cast<uint64_t>(allowed), ")"));
  }
  return Verdict{};
}

}  // namespace

absl::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kOversized: return "oversized";
    case RejectReason::kMalformed: return "malformed";
    case RejectReason::kBadProof: return "bad_proof";
    case RejectReason::kUnknownGuest: return "unknown_guest";
    case RejectReason::kRateLimited: return "rate_limited";
    case RejectReason::kSizeOutOfRange: return "size_out_of_range";
    case RejectReason::kReplay: return "replay";
    case RejectReason::kCounterBackwards: return "counter_backwards";
    case RejectReason::kImplausibleRate: return "implausible_rate";
    case RejectReason::kFlood: return "flood";
    case RejectReason::kStreamIdentityChanged: return "stream_identity_changed";
    case RejectReason::kChannelIdentityMismatch: return "channel_identity_mismatch";
    case RejectReason::kImplausibleReclaim: return "implausible_reclaim";
  }
  return "unknown";
}

const std::array<RejectReason, kNumRejectReasons>& AllRejectReasons() {
  static constexpr std::array<RejectReason, kNumRejectReasons> kAll = {
      RejectReason::kOversized,      RejectReason::kMalformed,        RejectReason::kBadProof,
      RejectReason::kUnknownGuest,   RejectReason::kRateLimited,      RejectReason::kSizeOutOfRange,
      RejectReason::kReplay,         RejectReason::kCounterBackwards, RejectReason::kImplausibleRate,
      RejectReason::kFlood,          RejectReason::kStreamIdentityChanged, RejectReason::kChannelIdentityMismatch,
      RejectReason::kImplausibleReclaim,
  };
  return kAll;
}

ReportValidator::ReportValidator(std::string host_key, ValidatorOptions options)
    : host_key_(std::move(host_key)), options_(options) {}

Verdict ReportValidator::Parse(const v1::SignedAgentReport& frame, v1::AgentReport* report) const {
  if (frame.report().size() > options_.max_report_bytes) {
    return Reject(RejectReason::kOversized,
                  absl::StrCat("report is ", frame.report().size(), " bytes, limit ", options_.max_report_bytes));
  }
  if (!report->ParseFromString(frame.report())) return Reject(RejectReason::kMalformed, "report does not parse");
  if (!IsCanonicalUuid(report->guest_uuid())) {
    return Reject(RejectReason::kMalformed, "guest_uuid is not a canonical lower-case UUID");
  }
  return Verdict{};
}

Verdict ReportValidator::Authenticate(const v1::SignedAgentReport& frame, v1::AgentReport* report,
                                      ProofCache* cache) const {
  if (Verdict v = Parse(frame, report); !v.ok()) return v;
  // The token of the guest the report claims to be; only that guest (and the host) can produce a
  // matching proof. A stream's cache holds it already when the stream proved this uuid before.
  const std::string& uuid = report->guest_uuid();
  bool matches = false;
  if (cache != nullptr && cache->validator == this && cache->prover != nullptr && cache->uuid == uuid) {
    matches = cache->prover->Matches(frame.report(), frame.proof());
  } else if (cache != nullptr) {
    auto prover = std::make_unique<ReportProver>(DeriveGuestToken(host_key_, uuid));
    matches = prover->Matches(frame.report(), frame.proof());
    if (matches) {  // only a proven identity is remembered
      cache->validator = this;
      cache->uuid = uuid;
      cache->prover = std::move(prover);
    }
  } else {
    matches = ProofMatches(DeriveGuestToken(host_key_, uuid), frame.report(), frame.proof());
  }
  if (!matches) return Reject(RejectReason::kBadProof, absl::StrCat("proof does not match uuid ", uuid));
  return Verdict{};
}

bool ReportValidator::IsReboot(const v1::AgentReport& report, const GuestHistory& previous) {
  return previous.last.has_value() && previous.last->boot_id() != report.boot_id();
}

bool ReportValidator::SameReclaimSeries(const v1::AgentReport& report, const v1::AgentReport& previous) {
  return report.boot_id() == previous.boot_id() && report.has_reclaim() && previous.has_reclaim() &&
         report.reclaim().counters_since_boottime_ns() == previous.reclaim().counters_since_boottime_ns();
}

Verdict ReportValidator::Check(const v1::AgentReport& report, const GuestLimits* limits,
                               const GuestHistory& previous, absl::Time now, GuestHistory* next) const {
  *next = previous;
  Verdict v = CheckInPlace(report, limits, next, now);
  if (v.ok()) next->last = report;
  return v;
}

Verdict ReportValidator::CheckInPlace(const v1::AgentReport& report, const GuestLimits* limits,
                                      GuestHistory* history, absl::Time now) const {
  if (limits == nullptr) {
    return Reject(RejectReason::kUnknownGuest, absl::StrCat("uuid ", report.guest_uuid(), " is not a managed guest"));
  }

  // Token bucket. A clock that went backwards refills nothing.
  double tokens = options_.burst;
  if (history->refilled != absl::InfinitePast()) {
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - history->refilled));
    tokens = std::min(options_.burst, history->tokens + elapsed * options_.reports_per_second);
  }
  history->refilled = std::max(now, history->refilled);
  if (tokens < 1.0) {
    history->tokens = tokens;
    return Reject(RejectReason::kRateLimited,
                  absl::StrCat("over ", options_.reports_per_second, "/s burst ", options_.burst));
  }
  history->tokens = tokens - 1.0;

  if (!IsCanonicalUuid(report.boot_id())) return Reject(RejectReason::kMalformed, "boot_id is not a canonical UUID");
  if (report.boottime_ns() <= 0) return Reject(RejectReason::kMalformed, "boottime_ns is not positive");
  if (report.has_memory_pressure()) {
    const v1::GuestPsi& psi = report.memory_pressure();
    if ((psi.has_some() && !ValidPsiLine(psi.some())) || (psi.has_full() && !ValidPsiLine(psi.full()))) {
      return Reject(RejectReason::kMalformed, "psi average outside [0, 100]");
    }
  }
  if (Verdict v = CheckSizes(report.meminfo(), limits->max_bytes, options_.max_swap_bytes); !v.ok()) return v;

  const bool same_boot = history->last.has_value() && !IsReboot(report, *history);
  if (same_boot && report.boottime_ns() <= history->last->boottime_ns()) {
    return Reject(RejectReason::kReplay, absl::StrCat("boottime ", report.boottime_ns(), " <= last accepted ",
                                                      history->last->boottime_ns()));
  }
  if (Verdict v = CheckReclaim(report, same_boot ? &*history->last : nullptr, limits->max_bytes,
                               options_.max_reclaim_bytes_per_second);
      !v.ok()) {
    return v;
  }

  if (same_boot) {
    const v1::AgentReport& last = *history->last;
    const double seconds = static_cast<double>(report.boottime_ns() - last.boottime_ns()) / 1e9;
    if (Verdict v = CheckCounters(last.vmstat(), report.vmstat(), seconds, options_.max_counter_rate); !v.ok()) {
      return v;
    }
    const v1::GuestPsi& a = last.memory_pressure();
    const v1::GuestPsi& b = report.memory_pressure();
    if (a.has_some() && b.has_some()) {
      if (Verdict v = CheckPsiTotal("some", a.some(), b.some(), seconds); !v.ok()) return v;
    }
    if (a.has_full() && b.has_full()) {
      if (Verdict v = CheckPsiTotal("full", a.full(), b.full(), seconds); !v.ok()) return v;
    }
  }
  return Verdict{};
}

}  // namespace plimsoll::server::agent
