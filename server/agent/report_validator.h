// Decides whether one agent report may be believed. Pure: the verdict depends only on the
// arguments (the report, the guest's limits, what was accepted from that guest before, and the
// time given); no I/O, no clock reads, no logging. AgentStore keeps the per-guest history and
// calls it; tests call it with literal tables.
//
// Two stages, so the expensive, stateless part runs outside the store's lock:
//   Authenticate  frame size, parse, uuid form, identity proof           (stateless)
//     (Parse is its first half: what a report on a domain's own channel needs, where the
//     hypervisor, not a proof, says who sent it)
//   Check         known guest, per-guest rate, sizes, boot/replay,       (needs history)
//                 counter monotonicity and plausibility
// Every rejection names one RejectReason from a fixed set, the label of
// plimsoll_agent_reports_rejected_total{reason}.
//
// The reclaim part (ReclaimReport) is a claim about what the guest gave back; the daemon bounds
// it, never believes it: within one series (one agent process within one boot: same boot id and
// counters_since_boottime_ns) the counters never go backwards (kCounterBackwards); achieved never
// exceeds requested; requested grows by at most max_reclaim_bytes_per_second * (seconds + 1) plus
// one step (a step is at most the guest's MemTotal, so its ceiling) between two reports, and a
// series' first report by at most that since counters_since_boottime_ns; a new series within a
// boot must start at or after the last accepted report (an agent restarts after its predecessor
// stopped), so restarting series cannot multiply the claim (kImplausibleReclaim).
#ifndef PLIMSOLL_SERVER_AGENT_REPORT_VALIDATOR_H_
#define PLIMSOLL_SERVER_AGENT_REPORT_VALIDATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "plimsoll/v1/agent.pb.h"
#include "protocol/report_proof.h"

namespace plimsoll::server::agent {

enum class RejectReason : int {
  kOversized = 0,         // frame or report larger than the limit
  kMalformed,             // unparsable, bad uuid/boot id form, missing fields, PSI out of range
  kBadProof,              // the proof does not match the claimed uuid: spoofing or a wrong token
  kUnknownGuest,          // proven, but not a guest this daemon manages (yet)
  kRateLimited,           // more reports than the per-guest budget allows
  kSizeOutOfRange,        // a byte count above the guest's max or inconsistent with MemTotal
  kReplay,                // same boot, boottime not after the last accepted report; or
                          // another stream's nonce (checked by the store)
  kCounterBackwards,      // a cumulative counter decreased within one boot
  kImplausibleRate,       // a counter grew faster than any real guest can
  kFlood,                 // the stream sent frames faster than its budget (counted by the service)
  kStreamIdentityChanged, // a stream switched to another guest's uuid (checked by the store)
  kChannelIdentityMismatch,  // a report on a domain's own channel (virtio-serial) names another
                             // guest's uuid (checked by the store)
  kImplausibleReclaim,    // the reclaim part claims more than the agent can have done: achieved
                          // above requested, requests faster than max_reclaim_bytes_per_second,
                          // or a new series of counters that does not start after the last report
};
inline constexpr int kNumRejectReasons = 13;

// The metric label and ack text of a reason: "oversized", "malformed", "bad_proof", ...
absl::string_view RejectReasonName(RejectReason reason);
// Every reason, in enum order, so metrics can create all label values up front.
const std::array<RejectReason, kNumRejectReasons>& AllRejectReasons();

struct ValidatorOptions {
  // Reports above this many bytes are "oversized". A real report is ~400 bytes; the gRPC
  // server's own cap (kAgentMaxReceiveMessageBytes) is above this so oversized frames are still
  // counted rather than dropped by the transport.
  size_t max_report_bytes = 4096;
  // Per-guest token bucket: sustained reports per second and burst. An agent at the default 5 s
  // interval plus one PSI spike per second stays far inside it.
  double reports_per_second = 2.0;
  double burst = 10.0;
  // A vmstat counter growing faster than this (events per second of guest time) is not real.
  double max_counter_rate = 1e8;
  // Swap sizes are not bounded by guest RAM; this only catches absurd values.
  uint64_t max_swap_bytes = uint64_t{1} << 50;
  // The fastest an agent may say it asked memory.reclaim for bytes, per second of guest time.
  // Honest agents stay under the rate in the bounds the host sent them (and their own), and the
  // ingest never sends a rate above this (reclaim_bounds_provider.h), so a claim over it is a lie.
  double max_reclaim_bytes_per_second = 256.0 * (1 << 20);
};

// What the daemon knows about a guest from libvirt; the validator's yardstick.
struct GuestLimits {
  int64_t max_bytes = 0;  // balloon ceiling (<memory>)
};

// Per-guest state carried between reports (kept by AgentStore).
struct GuestHistory {
  // The last accepted report (its boot id, boottime and counters are the comparison base).
  std::optional<v1::AgentReport> last;
  // Rate-limit bucket.
  double tokens = 0;
  absl::Time refilled = absl::InfinitePast();
};

struct Verdict {
  std::optional<RejectReason> reject;  // nullopt: accepted
  std::string detail;                  // for logs, with numbers; never sent to the guest
  bool ok() const { return !reject.has_value(); }
};

class ReportValidator;

// What one stream keeps between its reports so that checking the next proof costs one HMAC pass
// instead of two and a key schedule: the token of the guest the stream last proved, prepared.
// Used only for a report claiming that same uuid, with the validator that filled it; any other
// claim derives its token afresh, so the cache changes the cost of a check, never its answer.
// Owned by one stream, used by one thread at a time (not thread-safe).
struct ProofCache {
  const ReportValidator* validator = nullptr;
  std::string uuid;
  std::unique_ptr<plimsoll::protocol::ReportProver> prover;
};

// Immutable after construction; thread-safe (a ProofCache passed in belongs to the caller).
class ReportValidator {
 public:
  // `host_key`: the raw secret from which guest tokens derive (report_proof.h).
  ReportValidator(std::string host_key, ValidatorOptions options = {});

  // Stage 1. On success fills `report` with the parsed AgentReport. Rejections: kOversized,
  // kMalformed, kBadProof. `cache` (optional, the stream's own) is used and refilled as its
  // comment says; the proof is checked over the exact bytes of every report either way.
  Verdict Authenticate(const v1::SignedAgentReport& frame, v1::AgentReport* report,
                       ProofCache* cache = nullptr) const;

  // Stage 1 without the proof: frame size, parse, uuid form (kOversized, kMalformed). For
  // frames on a channel the hypervisor binds to one domain (virtio-serial), whose identity is
  // the channel's; the caller compares the parsed uuid with it. The proof field is ignored.
  Verdict Parse(const v1::SignedAgentReport& frame, v1::AgentReport* report) const;

  // Stage 2, for an authenticated report. `limits` null: the guest is unknown. `previous` is the
  // guest's history (default-constructed for a first report). `next` is overwritten with
  // `previous`, its rate bucket updated (a rejected report still spends a token), and `last`
  // replaced by `report` when accepted. Rejections: kUnknownGuest,
  // kRateLimited, kMalformed, kSizeOutOfRange, kReplay, kCounterBackwards, kImplausibleRate.
  Verdict Check(const v1::AgentReport& report, const GuestLimits* limits, const GuestHistory& previous,
                absl::Time now, GuestHistory* next) const;

  // Check without the copies, for AgentStore: the same checks against `history`, whose rate
  // bucket it updates; it leaves `history->last` alone, and on acceptance the caller makes
  // `report` the new `last` (Check's `next->last = report`).
  Verdict CheckInPlace(const v1::AgentReport& report, const GuestLimits* limits, GuestHistory* history,
                       absl::Time now) const;

  // True when `report` starts a new boot relative to `previous` (a different boot id).
  static bool IsReboot(const v1::AgentReport& report, const GuestHistory& previous);

  // True when `report`'s reclaim counters continue those of `previous` (same boot, both have a
  // reclaim part with the same counters_since_boottime_ns): their difference is new reclaim.
  static bool SameReclaimSeries(const v1::AgentReport& report, const v1::AgentReport& previous);

  const ValidatorOptions& options() const { return options_; }

 private:
  const std::string host_key_;
  const ValidatorOptions options_;
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_REPORT_VALIDATOR_H_
