// Reads the balloon's pressure counters (hypervisor.h BalloonPressure: the guest's OOM kills,
// allocation stalls, direct and background scans and reclaims, which Linux >= 6.12 sends and
// QEMU >= 9.2 keeps) into the survey's records, so the tracker merges them with the rest of each
// record. libvirt's memory stats do not carry them: each read is a QEMU monitor command through
// libvirt (docs/operations.md "Balloon pressure counters" says what that costs, and that libvirt
// marks such domains tainted).
//
// When a guest is asked:
//  - only when its record is full (has last_update) and that last_update differs from the last
//    one asked at: QEMU's counters change only when the guest sends stats, so otherwise the last
//    answer is repeated;
//  - not again for `retry_after` once an answer had no counter (QEMU < 9.2, a guest kernel
//    < 6.12: neither changes while the domain runs, short of a guest reboot) or said the domain
//    has no balloon device;
//  - not at all once the connection's driver answered it has no QEMU monitor (the test driver),
//    until Reset() (a new connection).
// A failed read leaves the guest's counters absent this tick, and is counted.
//
// Thread-compatible: the control loop's thread only.
#ifndef PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_
#define PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server {

class BalloonPressureReader {
 public:
  struct Options {
    bool enabled = true;  // config balloon_pressure_stats
    absl::Duration retry_after = absl::Minutes(5);
  };
  // Monitor commands sent, by outcome, for /metrics (plimsoll_balloon_pressure_reads_total).
  struct Counts {
    uint64_t read = 0;       // an answer with counters
    uint64_t lacking = 0;    // an answer without any (old QEMU or guest kernel), or no balloon
    uint64_t failed = 0;     // any other error
  };

  BalloonPressureReader(hypervisor::Hypervisor* hypervisor, Options options)
      : hypervisor_(hypervisor), options_(options) {}

  // Fills survey->stats[uuid].pressure for the running domains it may ask (see above).
  void Read(absl::Time now, hypervisor::DomainSurvey* survey);
  // A domain gone: its memo goes too.
  void Forget(const std::string& uuid) { memo_.erase(uuid); }
  // A new connection: the driver may be another, and every domain is asked again.
  void Reset();
  void set_enabled(bool enabled) { options_.enabled = enabled; }
  // False once the driver answered it has no QEMU monitor.
  bool monitor_available() const { return monitor_available_; }
  const Counts& counts() const { return counts_; }

 private:
  struct Memo {
    std::optional<int64_t> asked_at_update;  // the record's last_update when last asked
    hypervisor::BalloonPressure pressure;   // the last answer with counters
    absl::Time retry_at = absl::InfinitePast();
  };

  hypervisor::Hypervisor* const hypervisor_;
  Options options_;
  bool monitor_available_ = true;
  absl::flat_hash_map<std::string, Memo> memo_;
  Counts counts_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_BALLOON_PRESSURE_READER_H_
