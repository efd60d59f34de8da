// A simulated host: the scenario's guests (guest_model.h), the host's own memory over time, and
// the part of plimsolld between them: building the policy's Snapshot the way the daemon's
// tracker does, and applying decisions the way its control loop does (clamped to [min, max]; no
// move without stats; no shrink on stale stats).
//
// Host model: MemAvailable = total - other - sum of what the guests cost the host
// (GuestModel::HostRss: a guest's QEMU holds what its balloon leaves it, less, with in-guest
// reclaim on, the free pages its balloon reports back). Host PSI some: stalls grow linearly as
// MemAvailable falls under 2% of total, averaged over 10 s like avg10.
//
// Not thread-safe.
#ifndef PLIMSOLL_SIM_SIMULATION_H_
#define PLIMSOLL_SIM_SIMULATION_H_

#include <optional>
#include <string>
#include <vector>

#include "policy/history_deriver.h"
#include "policy/policy.h"
#include "sim/guest_model.h"
#include "sim/scenario.h"

namespace plimsoll::sim {

class Simulation {
 public:
  explicit Simulation(const Scenario& scenario);

  // Advances every guest and the host by `dt` seconds.
  void Step(double dt);

  // What plimsolld would hand its policy now. Not const: the guests' disk reads are read when
  // due (set_block_stats_interval), and the last ones are handed on in between, as plimsolld
  // does; and each guest's history (policy/history_deriver.h) is derived from the snapshot
  // before, as plimsolld's collect step does once per tick: call it once per decision.
  policy::Snapshot MakeSnapshot();

  // Applies decisions as plimsolld's control loop does; returns how many targets changed.
  int Apply(const policy::Decisions& decisions);

  // True when an agent reported a pressure spike during the last Step.
  bool AnySpike() const;

  // Leave PSI's cumulative total out of snapshots (policies then only see avg10), as a daemon
  // that does not forward it would.
  void set_omit_psi_total(bool omit) { omit_psi_total_ = omit; }

  // Read the guests' disk reads at most every `seconds` (default 5), with a tenth of it as
  // slack (plimsolld's block_stats_interval, server/loop/control_loop.h); 0: at every snapshot.
  void set_block_stats_interval(double seconds) { block_stats_interval_ = seconds; }

  // In-guest reclaim for every guest (GuestModel::set_in_guest_reclaim), and
  // HostView::in_guest_reclaim in the snapshots: plimsolld sends the agents reclaim bounds.
  void set_in_guest_reclaim(bool on);
  // The keep of guest i's reclaim bounds (GuestModel::SetReclaimKeep).
  void SetReclaimKeep(size_t i, std::optional<double> keep);

  double now() const { return now_; }
  const Scenario& scenario() const { return scenario_; }
  const std::vector<GuestModel>& guests() const { return guests_; }
  double SumActual() const;
  // The sum of the guests' GuestModel::HostRss: SumActual without in-guest reclaim.
  double SumHostRss() const;
  double HostOther() const;
  double HostAvailable() const;
  double host_psi_avg10() const { return host_psi_avg10_; }

 private:
  const Scenario& scenario_;
  std::vector<GuestModel> guests_;
  std::vector<std::string> uuids_;
  double now_ = 0;
  int64_t tick_ = 0;
  double host_psi_avg10_ = 0;
  bool omit_psi_total_ = false;
  bool in_guest_reclaim_ = false;
  double block_stats_interval_ = 5;  // plimsolld's default
  // The last disk reads per guest and when they were read (sim seconds).
  struct DiskRead {
    std::optional<uint64_t> bytes, requests;
  };
  std::vector<DiskRead> disk_reads_;
  std::vector<policy::HistoryMemory> histories_;  // per guest, what DeriveHistory keeps
  double disk_read_at_ = -1e18;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_SIMULATION_H_
