// When LibvirtHypervisor reads a listed domain's live XML for its balloon device
// (virDomainGetXMLDesc, balloon_device_xml.h). The reads happen in the listing, under the
// hypervisor's mutex, so they are bounded:
//
// - Once per run. libvirt gives a domain a new id each time it starts; a run whose XML was read
//   is not read again (a restarted domain's definition may have changed, so a new run is).
// - A budget per listing. At most reads_per_listing reads per listing: after a reconnect (or
//   when thousands of guests start at once) the rest are read on the following listings, and
//   are unknown until then, never guessed.
// - A backoff per failure. A run whose read failed is read again after 1 listing, then 2, 4, ...
//   listings, at most max_backoff_listings: a domain whose XML cannot be read costs a call now
//   and then, not one every listing.
//
// Time is counted in listings (no clock): the daemon lists once a tick. Pure (no libvirt, no
// I/O) and thread-compatible: LibvirtHypervisor guards it with its mutex.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_READS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_READS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace plimsoll::hypervisor {

struct BalloonDeviceReadLimits {
  // XML reads one listing may make (>= 1).
  int reads_per_listing = 64;
  // The longest wait, in listings, before a failed run is read again (>= 1).
  int max_backoff_listings = 64;
};

class BalloonDeviceReads {
 public:
  explicit BalloonDeviceReads(BalloonDeviceReadLimits limits = {});

  // Starts a listing: the read budget is full again.
  void BeginListing();

  // What to do for one listed domain, run `id`: read its XML now (read: the budget is spent on
  // it, and the caller reports the outcome with Read or Failed), or answer `known` without a
  // read: the run's answer when it was read, else nullopt (backing off, or over the budget).
  struct Plan {
    bool read = false;
    std::optional<bool> known;
  };
  Plan Next(const std::string& uuid, unsigned int id);

  // The read of run `id` succeeded and said `reporting` (ParseFreePageReporting's answer).
  void Read(const std::string& uuid, unsigned int id, std::optional<bool> reporting);
  // The read of run `id` failed: it is tried again after the backoff. Returns the number of
  // listings until then, and sets *first when this was the run's first failure (worth a log line).
  int Failed(const std::string& uuid, unsigned int id, bool* first);

  // Forgets the domains `listed` (a set or map of uuids, with contains()) does not hold. Cheap
  // when none left: a listed domain has at most one entry.
  template <typename Listed>
  void KeepOnly(const Listed& listed) {
    if (runs_.size() <= listed.size()) return;
    absl::erase_if(runs_, [&listed](const auto& entry) { return !listed.contains(entry.first); });
  }
  // Forgets everything (a new connection: the libvirtd may be another).
  void Clear() { runs_.clear(); }

  size_t size() const { return runs_.size(); }
  int reads_left() const { return reads_left_; }

 private:
  struct Run {
    unsigned int id = 0;
    bool read = false;  // false: its reads failed so far
    std::optional<bool> reporting;
    int failures = 0;
    uint64_t retry_at = 0;  // the listing from which a failed run is read again
  };

  const BalloonDeviceReadLimits limits_;
  uint64_t listing_ = 0;
  int reads_left_ = 0;
  absl::flat_hash_map<std::string, Run> runs_;
};

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_BALLOON_DEVICE_READS_H_
