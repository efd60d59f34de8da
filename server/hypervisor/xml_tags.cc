#include "server/hypervisor/xml_tags.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

namespace plimsoll::hypervisor {
namespace {

std::string Unescape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"&apos;", "'"}, {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}});
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == ':' || c == '.'; }

}  // namespace

const std::string* XmlTag::Attribute(absl::string_view key) const {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool XmlTag::Is(absl::string_view key, absl::string_view value) const {
  const std::string* v = Attribute(key);
  return v != nullptr && *v == value;
}

std::vector<XmlTag> ReadXmlTags(absl::string_view xml) {
  std::vector<XmlTag> tags;
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
    XmlTag tag;
    ++i;
    if (i < n && xml[i] == '/') {
      tag.kind = XmlTag::Kind::kClose;
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
        if (tag.kind == XmlTag::Kind::kOpen) tag.kind = XmlTag::Kind::kSelfClosing;
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

}  // namespace plimsoll::hypervisor
