#include "server/hypervisor/balloon_device_xml.h"

#include <string>
#include <vector>

#include "server/hypervisor/xml_tags.h"

namespace plimsoll::hypervisor {

std::optional<bool> ParseFreePageReporting(absl::string_view domain_xml) {
  const std::vector<XmlTag> tags = ReadXmlTags(domain_xml);
  // The names of the open elements, outermost first: the balloon counts only as a child of the
  // domain's own <devices> (<domain><devices><memballoon>), never one in <metadata>, where any
  // application may write any XML, nor anywhere else.
  std::vector<const std::string*> open;
  auto in_domain_devices = [&open] {
    return open.size() == 2 && *open[0] == "domain" && *open[1] == "devices";
  };
  for (const XmlTag& tag : tags) {
    if (tag.kind == XmlTag::Kind::kClose) {
      // A close that does not match the open element: not what libvirt writes, read no further.
      if (open.empty() || *open.back() != tag.name) return std::nullopt;
      open.pop_back();
      // The whole device list was read: the domain has no balloon.
      if (tag.name == "devices" && open.size() == 1 && *open[0] == "domain") return false;
      continue;
    }
    if (tag.name == "devices" && tag.kind == XmlTag::Kind::kSelfClosing && open.size() == 1 &&
        *open[0] == "domain") {
      return false;  // an empty device list
    }
    if (tag.name == "memballoon" && in_domain_devices()) {
      // QEMU takes one balloon device; the first is the one.
      if (tag.Is("model", "none")) return false;
      const std::string* reporting = tag.Attribute("freePageReporting");
      if (reporting == nullptr || *reporting == "off") return false;
      if (*reporting == "on") return true;
      return std::nullopt;
    }
    if (tag.kind == XmlTag::Kind::kOpen) open.push_back(&tag.name);
  }
  return std::nullopt;
}

}  // namespace plimsoll::hypervisor
