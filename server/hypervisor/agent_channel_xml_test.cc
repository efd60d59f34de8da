#include "server/hypervisor/agent_channel_xml.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

constexpr char kName[] = "org.plimsoll.agent.0";

// The shape of libvirt 9.0's live XML for a running guest with qemu-guest-agent's channel and
// ours (the channel path libvirt chose because the definition named none).
constexpr char kLiveXml[] = R"(<domain type='qemu' id='3'>
  <name>g1</name>
  <uuid>8f4c1a52-3d6e-4b8a-9c1f-2a7b3c4d5e6f</uuid>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <source file='/tmp/data.img' index='1'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <controller type='usb' index='0' model='none'><alias name='usb'/></controller>
    <controller type='virtio-serial' index='0'>
      <alias name='virtio-serial0'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/>
    </controller>
    <!-- <channel type='unix'><source mode='bind' path='/commented/out'/>
         <target type='virtio' name='org.plimsoll.agent.0'/></channel> -->
    <channel type='unix'>
      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-3-g1/org.qemu.guest_agent.0'/>
      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>
      <alias name='channel0'/>
      <address type='virtio-serial' controller='0' bus='0' port='1'/>
    </channel>
    <channel type='unix'>
      <source mode='bind' path='/run/plimsoll/channels/a&amp;b&apos;s.sock'/>
      <target type='virtio' name='org.plimsoll.agent.0' state='connected'/>
      <alias name='channel1'/>
      <address type='virtio-serial' controller='0' bus='0' port='2'/>
    </channel>
  </devices>
</domain>
)";

TEST(AgentChannelXml, FindsOurChannelAmongOthers) {
  AgentChannelInfo info = ParseAgentChannel(kLiveXml, kName);
  EXPECT_TRUE(info.found);
  EXPECT_EQ(info.socket_path, "/run/plimsoll/channels/a&b's.sock");
  EXPECT_EQ(info.problem, "");
  EXPECT_TRUE(info.has_virtio_serial_controller);
}

TEST(AgentChannelXml, OtherNameIsNotOurs) {
  AgentChannelInfo info = ParseAgentChannel(kLiveXml, "org.plimsoll.agent.1");
  EXPECT_FALSE(info.found);
  EXPECT_EQ(info.socket_path, "");
  EXPECT_TRUE(info.has_virtio_serial_controller);
  AgentChannelInfo qga = ParseAgentChannel(kLiveXml, "org.qemu.guest_agent.0");
  EXPECT_EQ(qga.socket_path, "/var/lib/libvirt/qemu/channel/target/domain-3-g1/org.qemu.guest_agent.0");
}

TEST(AgentChannelXml, NoControllerNoChannel) {
  AgentChannelInfo info = ParseAgentChannel(
      "<domain><devices><controller type='usb' model='none'/><disk type='file'><source file='/x'/>"
      "<target dev='vda' bus='virtio'/></disk></devices></domain>",
      kName);
  EXPECT_FALSE(info.found);
  EXPECT_FALSE(info.has_virtio_serial_controller);
}

TEST(AgentChannelXml, UnusableChannelsSayWhy) {
  AgentChannelInfo pty = ParseAgentChannel(
      "<channel type='pty'><target type='virtio' name='org.plimsoll.agent.0'/></channel>", kName);
  EXPECT_TRUE(pty.found);
  EXPECT_EQ(pty.socket_path, "");
  EXPECT_NE(pty.problem.find("'pty'"), std::string::npos) << pty.problem;

  AgentChannelInfo connect = ParseAgentChannel(
      "<channel type=\"unix\"><source mode=\"connect\" path=\"/x.sock\"/>"
      "<target type=\"virtio\" name=\"org.plimsoll.agent.0\"/></channel>",
      kName);
  EXPECT_TRUE(connect.found);
  EXPECT_EQ(connect.socket_path, "");
  EXPECT_NE(connect.problem.find("mode='bind'"), std::string::npos) << connect.problem;

  AgentChannelInfo no_path = ParseAgentChannel(
      "<channel type='unix'><source mode='bind'/><target type='virtio' name='org.plimsoll.agent.0'/></channel>",
      kName);
  EXPECT_TRUE(no_path.found);
  EXPECT_EQ(no_path.socket_path, "");
  EXPECT_NE(no_path.problem.find("no source path"), std::string::npos);
}

TEST(AgentChannelXml, GuestfwdAndXenTargetsAreNotVirtio) {
  // A channel whose target is not virtio (guestfwd, xen) never counts, whatever its name.
  AgentChannelInfo info = ParseAgentChannel(
      "<channel type='unix'><source mode='bind' path='/x.sock'/>"
      "<target type='guestfwd' name='org.plimsoll.agent.0'/></channel>",
      kName);
  EXPECT_FALSE(info.found);
}

TEST(AgentChannelXml, GarbageAndTruncatedInputFindNothing) {
  for (const char* xml : {"", "<", "<channel", "<channel type='unix'><source mode='bind' path='/x",
                          "<<<>>>", "<channel type='unix'><source path='/x.sock'/><target type='virtio' name="}) {
    AgentChannelInfo info = ParseAgentChannel(xml, kName);
    EXPECT_FALSE(info.found) << xml;
    EXPECT_EQ(info.socket_path, "") << xml;
  }
}

TEST(AgentChannelXml, DeviceXmlRoundTrips) {
  const std::string device = AgentChannelDeviceXml(kName, "/run/plimsoll/channels/<u>'1.sock");
  EXPECT_EQ(device.find("<u>"), std::string::npos) << device;
  AgentChannelInfo info = ParseAgentChannel(device, kName);
  EXPECT_TRUE(info.found);
  EXPECT_EQ(info.socket_path, "/run/plimsoll/channels/<u>'1.sock");
}

TEST(AgentChannelXmlTest, WithoutADirectoryLibvirtChoosesThePath) {
  EXPECT_EQ(AgentChannelDeviceXml(kName, ""),
            absl::StrCat("<channel type='unix'><source mode='bind'/><target type='virtio' name='", kName,
                         "'/></channel>"));
}

// libvirt 9.0's live XML of a running domain with a vsock device whose CID it assigned
// (auto='yes' in the definition; the live XML names the address).
constexpr char kLiveVsockXml[] = R"(<domain type='kvm' id='7'>
  <name>g2</name>
  <devices>
    <!-- <vsock model='virtio'><cid auto='no' address='99'/></vsock> -->
    <controller type='virtio-serial' index='0'/>
    <vsock model='virtio'>
      <cid auto='yes' address='42'/>
      <alias name='vsock0'/>
      <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/>
    </vsock>
  </devices>
</domain>
)";

TEST(VsockXml, FindsTheCidAndParseAgentChannelCarriesIt) {
  VsockDevice vsock = ParseVsockDevice(kLiveVsockXml);
  EXPECT_TRUE(vsock.found);
  EXPECT_EQ(vsock.cid, 42u);
  EXPECT_EQ(vsock.problem, "");
  AgentChannelInfo info = ParseAgentChannel(kLiveVsockXml, kName);
  EXPECT_FALSE(info.found);  // no virtio-serial channel in this one
  EXPECT_EQ(info.vsock.cid, 42u);
  // The first test's domain has no vsock.
  EXPECT_FALSE(ParseAgentChannel(kLiveXml, kName).vsock.found);
  EXPECT_EQ(ParseAgentChannel(kLiveXml, kName).vsock.cid, 0u);
}

TEST(VsockXml, FixedCidAndSelfClosingCid) {
  VsockDevice vsock = ParseVsockDevice("<devices><vsock model=\"virtio\"><cid auto=\"no\" address=\"3\"/></vsock></devices>");
  EXPECT_EQ(vsock.cid, 3u);
  EXPECT_EQ(ParseVsockDevice("<vsock><cid address='4294967294'/></vsock>").cid, 4294967294u);
}

TEST(VsockXml, UnusableCidsGiveNoIdentityAndSayWhy) {
  struct Case {
    const char* xml;
    const char* problem;
  };
  for (const Case& c : {
           Case{"<vsock model='virtio'/>", "no <cid"},
           Case{"<vsock model='virtio'><cid auto='yes'/></vsock>", "no <cid"},
           Case{"<vsock model='virtio'><cid address=''/></vsock>", "no <cid"},
           Case{"<vsock model='virtio'><cid address='0x10'/></vsock>", "not a decimal"},
           Case{"<vsock model='virtio'><cid address='-5'/></vsock>", "not a decimal"},
           Case{"<vsock model='virtio'><cid address='99999999999'/></vsock>", "not a decimal"},
           Case{"<vsock model='virtio'><cid address='2'/></vsock>", "not a guest's"},
           Case{"<vsock model='virtio'><cid address='4294967295'/></vsock>", "not a guest's"},
           Case{"<vsock model='vhost-user'><cid address='5'/></vsock>", "not 'virtio'"},
       }) {
    VsockDevice vsock = ParseVsockDevice(c.xml);
    EXPECT_TRUE(vsock.found) << c.xml;
    EXPECT_EQ(vsock.cid, 0u) << c.xml;
    EXPECT_NE(vsock.problem.find(c.problem), std::string::npos) << c.xml << ": " << vsock.problem;
  }
}

TEST(VsockXml, OnlyTheFirstDeviceAndOnlyItsOwnCid) {
  // A <cid> after the device's end is not its CID.
  VsockDevice vsock = ParseVsockDevice("<vsock model='virtio'></vsock><cid address='9'/>");
  EXPECT_TRUE(vsock.found);
  EXPECT_EQ(vsock.cid, 0u);
  EXPECT_EQ(ParseVsockDevice("<vsock><cid address='5'/></vsock><vsock><cid address='6'/></vsock>").cid, 5u);
  for (const char* xml : {"", "<vsock", "<vsock model='virtio'><cid address='5", "<devices></devices>"}) {
    EXPECT_EQ(ParseVsockDevice(xml).cid, 0u) << xml;
  }
}

}  // namespace
}  // namespace plimsoll::hypervisor
