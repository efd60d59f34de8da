// Shared by the agent fuzz targets: one fixed host key, signing as the agent does, and the
// checks every validator verdict must pass (server/agent/report_validator.h).
#ifndef PLIMSOLL_FUZZ_AGENT_FUZZ_UTIL_H_
#define PLIMSOLL_FUZZ_AGENT_FUZZ_UTIL_H_

#include <string>

#include "fuzz/fuzz_check.h"
#include "plimsoll/v1/agent.pb.h"
#include "protocol/report_proof.h"
#include "server/agent/report_validator.h"

namespace plimsoll::fuzz {

inline const std::string& FuzzHostKey() {
  static const std::string* key = new std::string(32, '\x5a');
  return *key;
}

// A frame as the guest's agent would send it: `report_bytes` proven with `uuid`'s own token.
inline v1::SignedAgentReport SignAs(const std::string& uuid, const std::string& report_bytes) {
  v1::SignedAgentReport frame;
  frame.set_report(report_bytes);
  frame.set_proof(
      plimsoll::protocol::ComputeProof(plimsoll::protocol::DeriveGuestToken(FuzzHostKey(), uuid), report_bytes));
  return frame;
}

// Every verdict: a rejection names a known reason; its detail goes to logs verbatim, so it is
// short and printable whatever the report held.
inline void CheckVerdict(const server::agent::Verdict& v) {
  if (v.ok()) return;
  FUZZ_CHECK(server::agent::RejectReasonName(*v.reject) != "unknown");
  FUZZ_CHECK(v.detail.size() <= 512);
  FUZZ_CHECK(IsPrintableAscii(v.detail.data(), v.detail.size()));
}

}  // namespace plimsoll::fuzz

#endif  // PLIMSOLL_FUZZ_AGENT_FUZZ_UTIL_H_
