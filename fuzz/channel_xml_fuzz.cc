// Fuzzes ParseAgentChannel (server/hypervisor/agent_channel_xml.h) with arbitrary bytes as domain
// XML: no crash, no UB, no leak; a usable channel is a found one without a problem, and its
// socket path, written back as hot-plug XML, parses to the same path. A vsock CID is a guest's
// (3 .. 2^32-2) or 0 with a problem, and ParseAgentChannel carries what ParseVsockDevice finds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "server/hypervisor/agent_channel_xml.h"

namespace plimsoll::fuzz {
namespace {

constexpr char kName[] = "org.plimsoll.agent.0";

void CheckChannel(absl::string_view xml) {
  const hypervisor::AgentChannelInfo info = hypervisor::ParseAgentChannel(xml, kName);
  const hypervisor::VsockDevice vsock = hypervisor::ParseVsockDevice(xml);
  FUZZ_CHECK(vsock.cid == info.vsock.cid && vsock.found == info.vsock.found);
  FUZZ_CHECK(vsock.cid == 0 || (vsock.cid >= 3 && vsock.cid != 0xffffffffu));
  FUZZ_CHECK(vsock.found || vsock.cid == 0);
  if (vsock.found) FUZZ_CHECK((vsock.cid == 0) != vsock.problem.empty());
  if (!info.found) {
    FUZZ_CHECK(info.socket_path.empty());
    return;
  }
  FUZZ_CHECK(info.socket_path.empty() != info.problem.empty());
  if (info.socket_path.empty()) return;
  const hypervisor::AgentChannelInfo again =
      hypervisor::ParseAgentChannel(hypervisor::AgentChannelDeviceXml(kName, info.socket_path), kName);
  FUZZ_CHECK(again.found);
  FUZZ_CHECK(again.socket_path == info.socket_path);
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckChannel(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
