#include "server/agent/agent_sink_line.h"

#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace plimsoll::server::agent {
namespace {

std::string Opt(const std::optional<double>& v) { return v ? absl::StrCat(*v) : "-"; }
std::string OptMiB(const std::optional<int64_t>& v) { return v ? absl::StrCat(*v >> 20) : "-"; }
std::string OptMiB(const std::optional<uint64_t>& v) { return v ? absl::StrCat(*v >> 20) : "-"; }

}  // namespace

std::string GuestWord(absl::string_view untrusted) {
  if (untrusted.empty()) return "-";
  std::string out = absl::StrReplaceAll(absl::CHexEscape(untrusted.substr(0, kMaxGuestWordBytes)), {{" ", "\\x20"}});
  if (untrusted.size() > kMaxGuestWordBytes) out += "...";
  return out;
}

std::string SinkLine(const AgentSignals& s) {
  return absl::StrFormat(
      "uuid=%s connected=%d fresh=%d age=%.1fs seq=%u spike=%d psi_some_avg10=%s refaults_per_s=%s "
      "majfault_per_s=%s active_file_mib=%s inactive_file_mib=%s avail_mib=%s reclaim_state=%s "
      "reclaim_reason=%s reclaim_requested_mib=%u reclaim_achieved_mib=%u reclaim_keep_mib=%s last_reject=%s",
      s.uuid, s.connected, s.fresh, s.age_seconds, s.sequence, s.spike, Opt(s.psi_some_avg10),
      Opt(s.refaults_per_second), Opt(s.major_faults_per_second), OptMiB(s.active_file_bytes),
      OptMiB(s.inactive_file_bytes), OptMiB(s.mem_available_bytes),
      s.reclaim_state ? v1::ReclaimState_Name(*s.reclaim_state) : "-", GuestWord(s.reclaim_reason),
      s.reclaim_requested_total_bytes >> 20, s.reclaim_achieved_total_bytes >> 20, OptMiB(s.reclaim_keep_bytes),
      s.last_reject_reason.empty() ? "-" : s.last_reject_reason);
}

}  // namespace plimsoll::server::agent
