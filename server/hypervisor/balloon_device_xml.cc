#include "server/hypervisor/balloon_device_xml.h"

#include <string>
#include <vector>

#include "server/hypervisor/xml_tags.h"

namespace plimsoll::hypervisor {

std::optional<bool> ParseFreePageReporting(absl::string_view domain_xml) {
  const std::vector<XmlTag> tags = ReadXmlTags(domain_xml);
  for (const XmlTag& tag : tags) {
    if (tag.name == "devices" && tag.kind == XmlTag::Kind::kClose) {
      return false;  // the whole device list was read: the domain has no balloon
    }
    if (tag.name != "memballoon" || tag.kind == XmlTag::Kind::kClose) continue;
    // QEMU takes one balloon device; the first is the one.
    if (tag.Is("model", "none")) return false;
    const std::string* reporting = tag.Attribute("freePageReporting");
    if (reporting == nullptr || *reporting == "off") return false;
    if (*reporting == "on") return true;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace plimsoll::hypervisor
