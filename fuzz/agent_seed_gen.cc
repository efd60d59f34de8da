// Writes a seed for agent_report_fuzz: the serialized AgentReport the agent builds from real
// /proc texts (agent::FillSample), as guest 11111111-... in boot aaaaaaaa-..., 65 s after boot.
//   agent_seed_gen OUT MEMINFO VMSTAT [PRESSURE_MEMORY]
// docs/fuzzing.md has the command that regenerated fuzz/corpus/agent_report_fuzz/.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "agent/guest_reader.h"
#include "plimsoll/v1/agent.pb.h"

namespace {

bool Read(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: %s OUT MEMINFO VMSTAT [PRESSURE_MEMORY]\n", argv[0]);
    return 2;
  }
  plimsoll::agent::ProcTexts texts;
  std::string psi;
  if (!Read(argv[2], &texts.meminfo) || !Read(argv[3], &texts.vmstat) ||
      (argc == 5 && !Read(argv[4], &psi))) {
    std::fprintf(stderr, "cannot read an input file\n");
    return 1;
  }
  if (argc == 5) texts.psi_memory = psi;
  plimsoll::v1::AgentReport report;
  report.set_guest_uuid("11111111-1111-4111-8111-111111111111");
  report.set_boot_id("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa");
  report.set_sequence(2);
  report.set_boottime_ns(65'000'000'000);
  if (absl::Status s = plimsoll::agent::FillSample(texts, &report); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary);
  if (!report.SerializeToOstream(&out)) return 1;
  return 0;
}
