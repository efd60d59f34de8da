// plimsoll-agent-token: host-side helper for the agent identity (docs/security.md).
//   plimsoll-agent-token --uuid=<domain uuid>    # prints the token, from plimsolld's own key
//   plimsoll-agent-token --key_file=KEY --generate_key
// --key_file defaults to plimsolld's default agent.agent_host_key_file (server/config/default_paths.h),
// so a token minted without it is one the daemon with the default configuration accepts.
// The printed token is what the host injects into that guest (fw_cfg or kernel command line).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "protocol/report_proof.h"
#include "server/agent/host_key.h"
#include "server/config/default_paths.h"

ABSL_FLAG(std::string, key_file, plimsoll::server::kDefaultAgentHostKeyFile,
          "the host key (hex, mode 0600); plimsolld's agent.agent_host_key_file");
ABSL_FLAG(bool, generate_key, false, "create a new random key at --key_file (never overwrites)");
ABSL_FLAG(std::string, uuid, "", "print the token of the guest with this SMBIOS/domain UUID");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("plimsoll-agent-token: create the host key, print a guest's token");
  absl::ParseCommandLine(argc, argv);
  const std::string key_file = absl::GetFlag(FLAGS_key_file);
  if (absl::GetFlag(FLAGS_generate_key)) {
    if (absl::Status s = plimsoll::server::agent::GenerateHostKey(key_file); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "created %s\n", key_file.c_str());
  }
  if (absl::GetFlag(FLAGS_uuid).empty()) return 0;
  absl::StatusOr<std::string> uuid = plimsoll::protocol::NormalizeUuid(absl::GetFlag(FLAGS_uuid));
  if (!uuid.ok()) {
    std::fprintf(stderr, "--uuid: %s\n", uuid.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::string> key = plimsoll::server::agent::LoadHostKey(key_file);
  if (!key.ok()) {
    std::fprintf(stderr, "%s\n", key.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", plimsoll::protocol::ToHex(plimsoll::protocol::DeriveGuestToken(*key, *uuid)).c_str());
  return 0;
}
