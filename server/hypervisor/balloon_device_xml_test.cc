#include "server/hypervisor/balloon_device_xml.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

// A running guest's live XML with `balloon` last among its devices (libvirt 9.0's order,
// shortened; fuzz/corpus/balloon_device_xml_fuzz/ has a whole one).
std::string LiveXml(const std::string& balloon) {
  return absl::StrCat(R"(<domain type='kvm' id='7'>
  <name>lab-anon</name>
  <currentMemory unit='KiB'>786432</currentMemory>
  <devices>
    <controller type='pci' index='0' model='pci-root'><alias name='pci.0'/></controller>
    <serial type='file'>
      <source path='/tmp/lab-anon.console' append='off'/>
      <target type='isa-serial' port='0'><model name='isa-serial'/></target>
    </serial>
    <audio id='1' type='none'/>
)",
                      balloon, R"(
  </devices>
</domain>
)");
}

struct Case {
  const char* what;
  std::string xml;
  std::optional<bool> want;
};

TEST(BalloonDeviceXml, FreePageReporting) {
  const std::string kOn = LiveXml("<memballoon model='virtio' freePageReporting='on'/>");
  const Case cases[] = {
      // What the lab's guests are defined with, as the live XML shows it.
      {"on, with stats and an alias",
       LiveXml("    <memballoon model='virtio' autodeflate='on' freePageReporting='on'>\n"
               "      <stats period='1'/>\n      <alias name='balloon0'/>\n    </memballoon>"),
       true},
      {"on, self-closing, double quotes", LiveXml(R"(<memballoon model="virtio" freePageReporting="on"/>)"), true},
      {"on, transitional model", LiveXml("<memballoon model='virtio-transitional' freePageReporting='on'/>"), true},
      {"off", LiveXml("<memballoon model='virtio' freePageReporting='off'><stats period='5'/></memballoon>"), false},
      {"attribute absent: QEMU's default", LiveXml("<memballoon model='virtio'><stats period='5'/></memballoon>"),
       false},
      {"model none", LiveXml("<memballoon model='none'/>"), false},
      {"no balloon in the whole device list", LiveXml(""), false},
      {"a commented-out balloon is no balloon",
       LiveXml("<!-- <memballoon model='virtio' freePageReporting='on'/> -->\n"
               "<memballoon model='virtio'/>"),
       false},
      {"the first balloon is the one",
       LiveXml("<memballoon model='virtio' freePageReporting='on'/><memballoon model='virtio'/>"), true},
      {"a value libvirt never writes", LiveXml("<memballoon model='virtio' freePageReporting='yes'/>"), std::nullopt},
      {"malformed: the balloon's tag cannot be read",
       LiveXml("<memballoon model='virtio' freePageReporting='on/>"), std::nullopt},
      {"malformed: cut before the balloon", kOn.substr(0, kOn.find("<memballoon")), std::nullopt},
      {"cut after the balloon: what was read stands", kOn.substr(0, kOn.find("/>", kOn.find("<memballoon")) + 2),
       true},
      {"empty", "", std::nullopt},
      // Only the domain's own <devices> holds its balloon.
      {"a balloon in <metadata> only is no balloon",
       absl::StrCat("<domain type='kvm'><metadata><app:x xmlns:app='urn:x'>"
                    "<memballoon model='virtio' freePageReporting='on'/></app:x></metadata>",
                    LiveXml("").substr(LiveXml("").find("<devices>"))),
       false},
      {"a balloon in <metadata> says nothing of the device's",
       absl::StrCat("<domain type='kvm'><metadata><memballoon model='virtio' freePageReporting='on'/></metadata>",
                    "<devices><memballoon model='virtio' freePageReporting='off'/></devices></domain>"),
       false},
      {"a balloon in <metadata>, the XML cut before <devices> ends",
       "<domain type='kvm'><metadata><memballoon model='virtio' freePageReporting='on'/></metadata><devices>",
       std::nullopt},
      {"a </devices> in <metadata> does not end the device list",
       "<domain><metadata><devices></devices></metadata><devices>"
       "<memballoon model='virtio' freePageReporting='on'/></devices></domain>",
       true},
      {"a balloon nested in another device is not the balloon",
       "<domain><devices><hostdev><memballoon model='virtio' freePageReporting='on'/></hostdev>"
       "</devices></domain>",
       false},
      {"a balloon outside any <domain>", "<devices><memballoon model='virtio' freePageReporting='on'/></devices>",
       std::nullopt},
      {"an empty device list", "<domain><devices/></domain>", false},
      {"a mismatched closing tag", "<domain><devices><serial></console>"
       "<memballoon model='virtio' freePageReporting='on'/></devices></domain>", std::nullopt},
      {"not XML", "freePageReporting='on'", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseFreePageReporting(c.xml), c.want) << c.what << "\n" << c.xml;
  }
}

}  // namespace
}  // namespace plimsoll::hypervisor
