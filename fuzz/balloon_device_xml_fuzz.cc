// Fuzzes ParseFreePageReporting (server/hypervisor/balloon_device_xml.h) with arbitrary bytes as
// domain XML. Seeds: live domain XML in libvirt 9.0's shape with reporting on (the lab's balloon),
// without a balloon (model='none'), and a test-driver node file (fuzz/corpus/balloon_device_xml_fuzz/).
//
// Beyond no crash, no UB: "on" is only ever read from a text that says freePageReporting; the
// answer is deterministic; and what was read stands: a prefix of the text that gives an answer
// gives the whole text's answer (reading more never changes a known answer).
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "server/hypervisor/balloon_device_xml.h"

namespace plimsoll::fuzz {
namespace {

// Prefixes checked per input, cut after a '>': enough to cross a balloon and a </devices> in
// the seeds, few enough to keep an input fast.
constexpr int kMaxPrefixes = 64;

void CheckBalloon(absl::string_view xml) {
  const std::optional<bool> whole = hypervisor::ParseFreePageReporting(xml);
  FUZZ_CHECK(hypervisor::ParseFreePageReporting(xml) == whole);
  if (whole == std::optional<bool>(true)) FUZZ_CHECK(absl::StrContains(xml, "freePageReporting"));
  size_t at = 0;
  for (int i = 0; i < kMaxPrefixes; ++i) {
    at = xml.find('>', at);
    if (at == absl::string_view::npos) break;
    ++at;
    const std::optional<bool> prefix = hypervisor::ParseFreePageReporting(xml.substr(0, at));
    if (prefix.has_value()) FUZZ_CHECK(prefix == whole);
  }
}

}  // namespace
}  // namespace plimsoll::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  plimsoll::fuzz::CheckBalloon(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
