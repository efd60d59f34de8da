// protocol/: what the agent and the daemon must compute alike. Pure functions over bytes; nothing
// here may depend on agent/ or server/.
//
// The identity proof both ends of the agent channel compute (docs/security.md):
//
//   guest token = HMAC-SHA256(host key, "plimsoll-agent-token-v1\0" || guest uuid)
//   proof       = HMAC-SHA256(guest token, "plimsoll-agent-report-v1\0" || report bytes)
//
// The host derives each guest's token from one secret host key and injects it into that guest
// only; the agent proves every report with it; the daemon re-derives the token from the uuid the
// report claims and compares proofs in constant time. Knowing one guest's token therefore lets a
// guest speak for itself and for nobody else, and the token itself never crosses the wire.
//
// Pure functions over byte strings, thread-safe. Keys and tokens are raw bytes; their text form
// (files, fw_cfg, the kernel command line) is lower-case hex.
#ifndef PLIMSOLL_PROTOCOL_REPORT_PROOF_H_
#define PLIMSOLL_PROTOCOL_REPORT_PROOF_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plimsoll::protocol {

// Sizes in bytes: tokens and proofs are SHA-256 outputs; host keys must be at least as long.
inline constexpr size_t kTokenBytes = 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kMinHostKeyBytes = 32;

// True for a canonical lower-case UUID "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex digits). Only
// this spelling is accepted on the wire, so one guest has exactly one identity.
bool IsCanonicalUuid(absl::string_view text);

// Trims ASCII whitespace, lower-cases, and checks the canonical form. INVALID_ARGUMENT otherwise.
// SMBIOS product_uuid files may print upper case; libvirt prints lower case.
absl::StatusOr<std::string> NormalizeUuid(absl::string_view text);

// The guest token for `uuid` (canonical form) under `host_key` (raw bytes).
std::string DeriveGuestToken(absl::string_view host_key, absl::string_view uuid);

// The proof of `report_bytes` (a serialized AgentReport) under `token` (raw bytes).
std::string ComputeProof(absl::string_view token, absl::string_view report_bytes);

// Recomputes the proof and compares it with `proof` in constant time (no early exit on the
// first differing byte). False also when `proof` has the wrong length.
bool ProofMatches(absl::string_view token, absl::string_view report_bytes, absl::string_view proof);

// A guest token made ready to prove or check many reports: the HMAC key schedule is computed
// once, so each report then costs one pass over its bytes (the one-shot functions above also
// look the algorithm up and key it afresh every call, 3x the work for a report). Gives exactly
// ComputeProof's and ProofMatches' answers. Not thread-safe: one per stream or per agent.
class ReportProver {
 public:
  explicit ReportProver(absl::string_view token);
  ~ReportProver();
  ReportProver(const ReportProver&) = delete;
  ReportProver& operator=(const ReportProver&) = delete;

  // ComputeProof(token, report_bytes).
  std::string Prove(absl::string_view report_bytes);
  // ProofMatches(token, report_bytes, proof), in constant time.
  bool Matches(absl::string_view report_bytes, absl::string_view proof);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Lower-case hex of `bytes`.
std::string ToHex(absl::string_view bytes);

// Parses hex text (surrounding ASCII whitespace ignored) into raw bytes. INVALID_ARGUMENT on an
// odd length, a non-hex character, or a result shorter than `min_bytes`. The message never
// echoes the text, which may be a secret.
absl::StatusOr<std::string> ParseHexSecret(absl::string_view text, size_t min_bytes);

}  // namespace plimsoll::protocol

#endif  // PLIMSOLL_PROTOCOL_REPORT_PROOF_H_
