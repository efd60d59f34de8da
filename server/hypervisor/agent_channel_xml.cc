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

namespace plimsoll::hypervisor {
namespace {

struct Tag {
  enum class Kind { kOpen, kClose, kSelfClosing };
  Kind kind = Kind::kOpen;
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;

  const std::string* Attribute(absl::string_view key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  bool Is(absl::string_view key, absl::string_view value) const {
    const std::string* v = Attribute(key);
    return v != nullptr && *v == value;
  }
};

std::string Unescape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"&apos;", "'"}, {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}});
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == ':' || c == '.'; }

// Splits `xml` into its tags, in order. Text between tags is skipped; so are comments,
// processing instructions and CDATA. Stops at the first tag it cannot read (what came before
// stands).
std::vector<Tag> Tags(absl::string_view xml) {
  std::vector<Tag> tags;
  size_t i = 0;
  const size_t n = xml.size();
  while (true) {
    i = xml.find('<', i);
    if (i == absl::string_view::npos) break;
    if (xml.substr(i, 4) == "<!--") {
      const size_t end = xml.find("-->", i + 4);
      if (end == absl::string_view::npos) break;
      i = end + 3;
      continue;
    }
    if (xml.substr(i, 9) == "<![CDATA[") {
      const size_t end = xml.find("]]>", i + 9);
      if (end == absl::string_view::npos) break;
      i = end + 3;
      continue;
    }
    if (i + 1 < n && (xml[i + 1] == '?' || xml[i + 1] == '!')) {
      const size_t end = xml.find('>', i + 2);
      if (end == absl::string_view::npos) break;
      i = end + 1;
      continue;
    }
    Tag tag;
    ++i;
    if (i < n && xml[i] == '/') {
      tag.kind = Tag::Kind::kClose;
      ++i;
    }
    const size_t name_start = i;
    while (i < n && IsNameChar(xml[i])) ++i;
    tag.name = std::string(xml.substr(name_start, i - name_start));
    if (tag.name.empty()) break;
    bool ok = false;
    while (i < n) {
      while (i < n && absl::ascii_isspace(xml[i])) ++i;
      if (i >= n) break;
      if (xml[i] == '>') {
        ok = true;
        ++i;
        break;
      }
      if (xml[i] == '/' && i + 1 < n && xml[i + 1] == '>') {
        if (tag.kind == Tag::Kind::kOpen) tag.kind = Tag::Kind::kSelfClosing;
        ok = true;
        i += 2;
        break;
      }
      const size_t key_start = i;
      while (i < n && IsNameChar(xml[i])) ++i;
      if (i == key_start) break;
      std::string key(xml.substr(key_start, i - key_start));
      while (i < n && absl::ascii_isspace(xml[i])) ++i;
      if (i >= n || xml[i] != '=') break;
      ++i;
      while (i < n && absl::ascii_isspace(xml[i])) ++i;
      if (i >= n || (xml[i] != '\'' && xml[i] != '"')) break;
      const char quote = xml[i++];
      const size_t end = xml.find(quote, i);
      if (end == absl::string_view::npos) break;
      tag.attributes.emplace_back(std::move(key), Unescape(xml.substr(i, end - i)));
      i = end + 1;
    }
    if (!ok) break;
    tags.push_back(std::move(tag));
  }
  return tags;
}

std::string Escape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"'", "&apos;"}, {"\"", "&quot;"}});
}

}  // namespace

AgentChannelInfo ParseAgentChannel(absl::string_view domain_xml, absl::string_view name) {
  AgentChannelInfo info;
  const std::vector<Tag> tags = Tags(domain_xml);
  for (size_t i = 0; i < tags.size(); ++i) {
    const Tag& tag = tags[i];
    if (tag.name == "controller" && tag.kind != Tag::Kind::kClose && tag.Is("type", "virtio-serial")) {
      info.has_virtio_serial_controller = true;
      continue;
    }
    if (tag.name != "channel" || tag.kind != Tag::Kind::kOpen || info.found) continue;
    // The channel's own children, up to its </channel>.
    const Tag* source = nullptr;
    const Tag* target = nullptr;
    size_t j = i + 1;
    for (; j < tags.size() && !(tags[j].name == "channel" && tags[j].kind == Tag::Kind::kClose); ++j) {
      if (tags[j].kind == Tag::Kind::kClose) continue;
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
  const std::vector<Tag> tags = Tags(domain_xml);
  for (size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].name != "vsock" || tags[i].kind == Tag::Kind::kClose) continue;
    device.found = true;
    const Tag* cid = nullptr;
    if (tags[i].kind == Tag::Kind::kOpen) {
      for (size_t j = i + 1; j < tags.size() && !(tags[j].name == "vsock" && tags[j].kind == Tag::Kind::kClose); ++j) {
        if (tags[j].name == "cid" && tags[j].kind != Tag::Kind::kClose && cid == nullptr) cid = &tags[j];
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
