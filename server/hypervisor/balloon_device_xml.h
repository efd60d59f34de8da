// The balloon device in libvirt domain XML: whether it returns the pages the guest frees to the
// host (virtio-balloon free page reporting, libvirt >= 6.9):
// <devices><memballoon model='virtio' freePageReporting='on'>. A pure text function (no libvirt,
// no I/O), unit tested and fuzzed; the XML is read by xml_tags.h.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_XML_H_
#define PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_XML_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace plimsoll::hypervisor {

// Whether `domain_xml`'s balloon device has free page reporting on. The balloon device is the
// first <memballoon> child of the domain's own <devices> (<domain><devices><memballoon>); a
// <memballoon> anywhere else (in <metadata>, which any application may fill, or deeper) is not
// one.
//   true:    that <memballoon> says freePageReporting='on'.
//   false:   it says 'off', or says nothing (libvirt then asks QEMU for nothing, and QEMU's
//            free-page-reporting is off by default), or the domain has no balloon
//            (model='none', or no <memballoon> in a <devices> read to its end).
//   nullopt: not known: the XML could not be read as far as the balloon or the end of
//            <devices> (also: its root is not <domain>, or a closing tag does not match the
//            element it closes), or the attribute holds what libvirt never writes.
// A caller must not read nullopt as either answer.
std::optional<bool> ParseFreePageReporting(absl::string_view domain_xml);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_XML_H_
