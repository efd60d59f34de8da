// What the host sees a guest read from its disks: the sum over its disks of the bulk stats'
// block.<n>.rd.bytes and block.<n>.rd.reqs (VIR_DOMAIN_STATS_BLOCK). QEMU counts them, not the
// guest, so they exist without the agent and without balloon stats. A page-cache refault in the
// guest is a disk read seen from here (policy/pressure_profile.h reads them so).
//
// Only top-level disks are in a record (plimsolld never asks for backing chains), so each <n> is
// one disk and the sum counts every read once. Plain strings in, no libvirt types: libvirt stays
// inside libvirt_hypervisor.cc.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

class BlockReadSum {
 public:
  // One field of a bulk record with its value; fields other than block.<digits>.rd.bytes and
  // block.<digits>.rd.reqs are ignored.
  void Add(absl::string_view field, uint64_t value);
  // Sets out->disk_read_bytes and out->disk_read_requests when the record had at least one
  // block.<n>.rd.bytes (a guest without disks, or a driver without block stats, leaves both
  // absent: no reads is not the same as not knowing).
  void StoreInto(BalloonStats* out) const;

 private:
  uint64_t bytes_ = 0;
  uint64_t requests_ = 0;
  bool seen_bytes_ = false;
  bool seen_requests_ = false;
};

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_
