#include "sim/report.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

std::string Converge(double s) {
  if (s < 0) return "never";
  return absl::StrFormat("%.0f", s);
}

}  // namespace

std::string FormatRunsTable(const std::vector<const RunResult*>& runs) {
  std::string out =
      "| scenario | policy | reclaimed GiB·s | mean reclaimed GiB | stall s | refaults GiB | "
      "OOM kills | self-deflates | churn GiB | reversals | converge s | over budget GiB·s |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RunResult* r : runs) {
    absl::StrAppend(
        &out,
        absl::StrFormat("| %s | %s | %.0f | %.2f | %.1f | %.2f | %d | %d | %.1f | %d | %s | %.0f |\n",
                        r->scenario, r->policy, r->reclaimed_byte_s / kGib,
                        r->reclaimed_byte_s / kGib / r->duration, r->stall_s,
                        r->refault_bytes / kGib, r->oom_kills, r->self_deflates,
                        r->churn_bytes / kGib, r->reversals, Converge(r->converge_s),
                        r->over_budget_byte_s / kGib));
  }
  return out;
}

std::string FormatGuestsTable(const RunResult& r) {
  std::string out = absl::StrCat(
      "| ", r.policy,
      " guest | stall s | refaults GiB | OOM | self-deflates | max thrash s | traffic | "
      "disk reads | min actual | mean actual | final actual | final target | states |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const GuestResult& g : r.guests) {
    std::string states;
    for (const auto& [state, at] : g.first_state_s) {
      absl::StrAppend(&states, states.empty() ? "" : " ", state, "@", absl::StrFormat("%.0f", at));
    }
    absl::StrAppend(&out, absl::StrFormat("| %s | %.1f | %.2f | %d | %d | %.0f | %s | %s | %s | %s | %s | %s | %s |\n",
                                          g.name, g.stall_s, g.refault_bytes / kGib, g.oom_kills,
                                          g.self_deflates, g.max_thrash_s,
                                          FormatBytes(g.traffic_bytes),
                                          FormatBytes(g.disk_read_bytes),
                                          FormatBytes(g.min_actual), FormatBytes(g.mean_actual),
                                          FormatBytes(g.final_actual), FormatBytes(g.final_target),
                                          states.empty() ? "-" : states));
  }
  return out;
}

std::string RunsJson(const std::vector<const RunResult*>& runs) {
  std::string out = "{\"runs\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = *runs[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "{\"scenario\": \"", r.scenario,
                    "\", \"policy\": \"", r.policy, "\", \"duration_s\": ",
                    FormatJsonNumber(r.duration, 0),
                    ", \"reclaimed_gib_s\": ", FormatJsonNumber(r.reclaimed_byte_s / kGib, 3),
                    ", \"stall_s\": ", FormatJsonNumber(r.stall_s, 3),
                    ", \"refault_gib\": ", FormatJsonNumber(r.refault_bytes / kGib, 4),
                    ", \"oom_kills\": ", r.oom_kills,
                    ", \"traffic_gib\": ", FormatJsonNumber(r.churn_bytes / kGib, 4),
                    ", \"reversals\": ", r.reversals, ", \"guests\": {");
    for (size_t k = 0; k < r.guests.size(); ++k) {
      const GuestResult& g = r.guests[k];
      absl::StrAppend(&out, k == 0 ? "" : ", ", "\"", g.name, "\": {\"stall_s\": ",
                      FormatJsonNumber(g.stall_s, 3),
                      ", \"refault_mib\": ", FormatJsonNumber(g.refault_bytes / kMib, 2),
                      ", \"oom_kills\": ", g.oom_kills,
                      ", \"traffic_mib\": ", FormatJsonNumber(g.traffic_bytes / kMib, 2),
                      ", \"disk_read_mib\": ", FormatJsonNumber(g.disk_read_bytes / kMib, 2),
                      ", \"disk_read_requests\": ", FormatJsonNumber(g.disk_read_requests, 0),
                      ", \"reclaimed_gib_s\": ", FormatJsonNumber(g.reclaimed_byte_s / kGib, 3),
                      ", \"final_actual_mib\": ", FormatJsonNumber(g.final_actual / kMib, 1),
                      "}");
    }
    absl::StrAppend(&out, "}}");
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace plimsoll::sim
