// What the host sees a guest read from its disks: the sum over its disks of the bulk stats'
// block.<n>.rd.bytes and block.<n>.rd.reqs (VIR_DOMAIN_STATS_BLOCK). QEMU counts them, not the
// guest, so they exist without the agent and without balloon stats. A page-cache refault in the
// guest is a disk read seen from here (policy/pressure_profile.h reads them so).
//
// Only top-level disks are in a record (plimsolld never asks for backing chains), so each <n> is
// one disk and the sum counts every read once: a disk's field that comes twice (libvirt never
// sends that) counts once, with its last value, as a duplicated balloon field does (bulk_stats.h).
// Plain strings in, no libvirt types: libvirt stays inside libvirt_hypervisor.cc.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

class BlockReadSum {
 public:
  // One field of a bulk record with its value; fields other than block.<digits>.rd.bytes and
  // block.<digits>.rd.reqs are ignored. The same disk's field again replaces its value.
  void Add(absl::string_view field, uint64_t value);
  // Sets out->disk_read_bytes and out->disk_read_requests when the record had at least one
  // block.<n>.rd.bytes (a guest without disks, or a driver without block stats, leaves both
  // absent: no reads is not the same as not knowing). A sum that would pass 2^64 - 1 stays
  // there (a wrapped sum would read as a counter that went backwards).
  void StoreInto(BalloonStats* out) const;

 private:
  struct Disk {
    uint64_t bytes = 0;
    uint64_t requests = 0;
  };
  // By the disk's <n>, as written (libvirt writes it in decimal without leading zeros).
  absl::flat_hash_map<std::string, Disk> disks_;
  bool seen_bytes_ = false;
  bool seen_requests_ = false;
};

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_BLOCK_READS_H_
