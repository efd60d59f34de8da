// The agent channels in libvirt domain XML: finding a domain's virtio-serial channel by its target
// name and its vsock device's CID, and the device XML that hot-plugs a channel. Pure text functions (no libvirt, no I/O), so they
// are unit tested on captured `virsh dumpxml` output and fuzzed.
//
// The XML is read by xml_tags.h, which understands only what libvirt itself writes: a domain XML
// we misread yields "no channel" (the guest falls back to libvirt stats), never another domain's
// socket.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_AGENT_CHANNEL_XML_H_
#define PLIMSOLL_SERVER_HYPERVISOR_AGENT_CHANNEL_XML_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

// The channel of `domain_xml` whose <target type='virtio' name=...> is `name`, and whether the
// domain has a virtio-serial controller. A channel that is found but not a unix socket QEMU
// listens on (type='pty', mode='connect', no path) has an empty socket_path and a `problem`.
// Also fills `vsock` (ParseVsockDevice).
AgentChannelInfo ParseAgentChannel(absl::string_view domain_xml, absl::string_view name);

// The domain's first <vsock> device (QEMU takes one) and its <cid address=N/>. A CID that is
// missing, not a decimal number, or not a guest's (0-2 are reserved, 0xffffffff is "any") gives
// cid 0 and a `problem`: such a domain has no vsock identity, it never gets another's.
VsockDevice ParseVsockDevice(absl::string_view domain_xml);

// <channel type='unix'><source mode='bind' path=PATH/><target type='virtio' name=NAME/></channel>,
// with PATH and NAME escaped. An empty PATH leaves the attribute out, so libvirt chooses the
// socket's place (its per-domain channel directory), as it does for a channel defined without
// one: libvirt takes path='' for a path and fails the hot-plug with "cannot stat ''".
std::string AgentChannelDeviceXml(absl::string_view name, absl::string_view socket_path);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_AGENT_CHANNEL_XML_H_
