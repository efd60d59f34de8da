#include "server/hypervisor/agent_channel_xml.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/hypervisor/xml_tags.h"

namespace plimsoll::hypervisor {
namespace {

std::string Escape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"'", "&apos;"}, {"\"", "&quot;"}});
}

}  // namespace

AgentChannelInfo ParseAgentChannel(absl::string_view domain_xml, absl::string_view name) {
  AgentChannelInfo info;
  const std::vector<XmlTag> tags = ReadXmlTags(domain_xml);
  for (size_t i = 0; i < tags.size(); ++i) {
    const XmlTag& tag = tags[i];
    if (tag.name == "controller" && tag.kind != XmlTag::Kind::kClose && tag.Is("type", "virtio-serial")) {
      info.has_virtio_serial_controller = true;
      continue;
    }
    if (tag.name != "channel" || tag.kind != XmlTag::Kind::kOpen || info.found) continue;
    // The channel's own children, up to its </channel>.
    const XmlTag* source = nullptr;
    const XmlTag* target = nullptr;
    size_t j = i + 1;
    for (; j < tags.size() && !(tags[j].name == "channel" && tags[j].kind == XmlTag::Kind::kClose); ++j) {
      if (tags[j].kind == XmlTag::Kind::kClose) continue;
      if (tags[j].name == "source" && source == nullptr) source = &tags[j];
      if (tags[j].name == "target" && target == nullptr) target = &tags[j];
    }
    if (target == nullptr || !target->Is("type", "virtio") || !target->Is("name", name)) {
      i = j;
      continue;
    }
    info.found = true;
    const std::string* type = tag.Attribute("type");
    const std::string* path = source != nullptr ? source->Attribute("path") : nullptr;
    const std::string* mode = source != nullptr ? source->Attribute("mode") : nullptr;
    if (type == nullptr || *type != "unix") {
      info.problem = absl::StrCat("channel type is '", type == nullptr ? "" : *type, "', not 'unix'");
    } else if (mode != nullptr && *mode != "bind") {
      info.problem = absl::StrCat("channel source mode is '", *mode,
                                  "': QEMU would connect out; plimsolld needs mode='bind' (QEMU listens)");
    } else if (path == nullptr || path->empty()) {
      info.problem = "channel has no source path (the domain is not running, or libvirt did not say where)";
    } else {
      info.socket_path = *path;
    }
    i = j;
  }
  info.vsock = ParseVsockDevice(domain_xml);
  return info;
}

VsockDevice ParseVsockDevice(absl::string_view domain_xml) {
  VsockDevice device;
  const std::vector<XmlTag> tags = ReadXmlTags(domain_xml);
  for (size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].name != "vsock" || tags[i].kind == XmlTag::Kind::kClose) continue;
    device.found = true;
    const XmlTag* cid = nullptr;
    if (tags[i].kind == XmlTag::Kind::kOpen) {
      for (size_t j = i + 1; j < tags.size() && !(tags[j].name == "vsock" && tags[j].kind == XmlTag::Kind::kClose); ++j) {
        if (tags[j].name == "cid" && tags[j].kind != XmlTag::Kind::kClose && cid == nullptr) cid = &tags[j];
      }
    }
    const std::string* model = tags[i].Attribute("model");
    const std::string* address = cid != nullptr ? cid->Attribute("address") : nullptr;
    uint64_t value = 0;
    if (model != nullptr && *model != "virtio" && *model != "virtio-transitional" &&
        *model != "virtio-non-transitional") {
      device.problem = absl::StrCat("vsock model is '", *model, "', not 'virtio'");
    } else if (address == nullptr || address->empty()) {
      device.problem = "vsock has no <cid address=.../> (the domain is not running, or libvirt did not say)";
    } else if (address->size() > 10 || !std::all_of(address->begin(), address->end(), absl::ascii_isdigit) ||
               !absl::SimpleAtoi(*address, &value)) {
      device.problem = absl::StrCat("vsock cid address '", *address, "' is not a decimal number");
    } else if (value < 3 || value >= 0xffffffffULL) {
      device.problem = absl::StrCat("vsock cid ", value, " is not a guest's (0-2 are reserved, 4294967295 is 'any')");
    } else {
      device.cid = static_cast<uint32_t>(value);
    }
    return device;  // QEMU takes one vsock device; the first is the one
  }
  return device;
}

std::string AgentChannelDeviceXml(absl::string_view name, absl::string_view socket_path) {
  const std::string path = socket_path.empty() ? std::string() : absl::StrCat(" path='", Escape(socket_path), "'");
  return absl::StrCat("<channel type='unix'><source mode='bind'", path, "/><target type='virtio' name='",
                      Escape(name), "'/></channel>");
}

}  // namespace plimsoll::hypervisor
