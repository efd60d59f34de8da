// The only way a balloon target leaves the daemon. Every actuator has a dry-run
// twin that says what it would do and touches nothing.
#ifndef PLIMSOLL_SERVER_LOOP_ACTUATOR_H_
#define PLIMSOLL_SERVER_LOOP_ACTUATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::server {

class Actuator {
 public:
  virtual ~Actuator() = default;
  // Sets a guest's live balloon target. The caller has already clamped and
  // safety-checked `bytes`; an error means nothing was changed. ABORTED means
  // the domain is busy (a libvirt job) and the call was not made: try later.
  // May block as long as libvirt does: the loop calls it from its BalloonCalls pool.
  virtual absl::Status SetTarget(const std::string& uuid, const std::string& name, int64_t bytes) = 0;
  // True when SetTarget never changes anything.
  virtual bool dry_run() const = 0;
};

// Applies targets through the hypervisor seam (virDomainSetMemoryFlags, LIVE), after asking
// whether the domain has an active job (Hypervisor::ActiveJob): a migration or a save would
// make the call wait for it (libvirt waits 30 s for the job, then fails), so such a domain is
// ABORTED at once and tried again at a later tick.
class HypervisorActuator : public Actuator {
 public:
  explicit HypervisorActuator(hypervisor::Hypervisor* hv) : hv_(hv) {}
  absl::Status SetTarget(const std::string& uuid, const std::string& name, int64_t bytes) override;
  bool dry_run() const override { return false; }

 private:
  hypervisor::Hypervisor* hv_;
};

// Logs "dry-run: would set" and succeeds without acting.
class DryRunActuator : public Actuator {
 public:
  absl::Status SetTarget(const std::string& uuid, const std::string& name, int64_t bytes) override;
  bool dry_run() const override { return true; }
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_ACTUATOR_H_
