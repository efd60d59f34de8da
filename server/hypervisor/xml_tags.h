// The tags of libvirt's domain XML, in document order: the one reader behind the parsers of
// agent_channel_xml.h and balloon_device_xml.h. A pure text function (no libvirt, no I/O).
//
// Only what libvirt itself writes is understood: elements and attributes in single or double
// quotes, the five predefined entities, comments. Not a general XML parser: libvirt's live XML is
// the only input. Reading stops at the first tag it cannot read, so a parser that needs the whole
// of an element checks that its closing tag was read.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_XML_TAGS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_XML_TAGS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace plimsoll::hypervisor {

// One tag: <name a='1'>, </name> or <name a='1'/>, its attribute values unescaped.
struct XmlTag {
  enum class Kind { kOpen, kClose, kSelfClosing };
  Kind kind = Kind::kOpen;
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;

  // The value of attribute `key`, or nullptr when the tag has none.
  const std::string* Attribute(absl::string_view key) const;
  // Whether attribute `key` is there and is `value`.
  bool Is(absl::string_view key, absl::string_view value) const;
};

// The tags of `xml`, in order. Text between tags is skipped; so are comments, processing
// instructions and CDATA. Stops at the first tag it cannot read: what came before stands.
std::vector<XmlTag> ReadXmlTags(absl::string_view xml);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_XML_TAGS_H_
