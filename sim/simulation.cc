#include "sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "policy/guest_safety.h"

namespace plimsoll::sim {
namespace {

// The simulation's clock starts here, so policies see ordinary wall times.
constexpr int64_t kEpochSeconds = 1'700'000'000;

}  // namespace

Simulation::Simulation(const Scenario& scenario) : scenario_(scenario) {
  guests_.reserve(scenario.guests.size());
  for (size_t i = 0; i < scenario.guests.size(); ++i) {
    guests_.emplace_back(scenario.guests[i]);
    uuids_.push_back(absl::StrFormat("00000000-0000-4000-8000-%012d", i));
  }
}

double Simulation::SumActual() const {
  double sum = 0;
  for (const GuestModel& g : guests_) sum += g.actual();
  return sum;
}

double Simulation::SumHostRss() const {
  double sum = 0;
  for (const GuestModel& g : guests_) sum += g.HostRss();
  return sum;
}

void Simulation::set_in_guest_reclaim(bool on) {
  in_guest_reclaim_ = on;
  for (GuestModel& g : guests_) g.set_in_guest_reclaim(on);
}

void Simulation::SetReclaimKeep(size_t i, std::optional<double> keep) {
  if (i < guests_.size()) guests_[i].SetReclaimKeep(keep);
}

double Simulation::HostOther() const {
  double other = 0;
  for (const HostEvent& e : scenario_.host.events) {
    if (e.at <= now_) other = e.other;
  }
  return other;
}

double Simulation::HostAvailable() const {
  return std::max(0.0, scenario_.host.total - HostOther() - SumHostRss());
}

void Simulation::Step(double dt) {
  now_ += dt;
  for (GuestModel& g : guests_) g.Step(now_, dt);
  const double low = 0.02 * scenario_.host.total;
  const double stall = std::clamp((low - HostAvailable()) / low, 0.0, 1.0);
  const double decay = std::exp(-dt / 10);
  host_psi_avg10_ = host_psi_avg10_ * decay + 100 * stall * (1 - decay);
}

bool Simulation::AnySpike() const {
  for (const GuestModel& g : guests_) {
    if (g.last().spike) return true;
  }
  return false;
}

policy::Snapshot Simulation::MakeSnapshot() {
  policy::Snapshot s;
  s.now = absl::FromUnixSeconds(kEpochSeconds) + absl::Seconds(now_);
  s.tick = tick_;
  const double available = HostAvailable();
  s.host.mem_total_bytes = static_cast<int64_t>(scenario_.host.total);
  s.host.mem_free_bytes = static_cast<int64_t>(available);
  s.host.mem_available_bytes = static_cast<int64_t>(available);
  s.host.host_reserve_bytes = static_cast<int64_t>(scenario_.host.reserve);
  s.host.guest_budget_bytes = static_cast<int64_t>(scenario_.GuestBudget());
  s.host.psi_some_avg10 = host_psi_avg10_;
  s.host.psi_full_avg10 = 0;
  s.host.in_guest_reclaim = in_guest_reclaim_;
  s.guests.reserve(guests_.size());
  const bool read_disks = now_ - disk_read_at_ >= 0.9 * block_stats_interval_;
  if (read_disks) disk_read_at_ = now_;
  disk_reads_.resize(guests_.size());
  histories_.resize(guests_.size());
  for (size_t i = 0; i < guests_.size(); ++i) {
    const GuestModel& g = guests_[i];
    policy::GuestView v;
    v.name = g.spec().name;
    v.uuid = uuids_[i];
    v.max_bytes = static_cast<int64_t>(g.spec().max);
    v.min_bytes = static_cast<int64_t>(g.spec().min);
    v.actual_bytes = static_cast<int64_t>(g.actual());
    v.target_bytes = static_cast<int64_t>(g.target());
    v.shares = static_cast<int64_t>(g.spec().shares);
    g.FillStats(now_, scenario_.stale_after, &v);
    if (omit_psi_total_) v.psi_some_total_us.reset();
    if (read_disks) {
      disk_reads_[i] = {v.disk_read_bytes, v.disk_read_requests};
    } else {
      v.disk_read_bytes = disk_reads_[i].bytes;
      v.disk_read_requests = disk_reads_[i].requests;
    }
    if (v.disk_read_bytes.has_value()) v.disk_read_age_seconds = now_ - disk_read_at_;
    v.history = policy::DeriveHistory(v, absl::ToDoubleSeconds(s.now - absl::UnixEpoch()), &histories_[i]);
    s.guests.push_back(std::move(v));
  }
  return s;
}

int Simulation::Apply(const policy::Decisions& decisions) {
  ++tick_;
  int changed = 0;
  const size_t n = std::min(decisions.guests.size(), guests_.size());
  for (size_t i = 0; i < n; ++i) {
    GuestModel& g = guests_[i];
    const policy::GuestDecision& d = decisions.guests[i];
    if (d.uuid != uuids_[i]) continue;  // a policy must not reorder guests
    const double previous = g.target();
    double target = std::clamp(static_cast<double>(d.target_bytes), g.spec().min, g.spec().max);
    policy::GuestView v;
    g.FillStats(now_, scenario_.stale_after, &v);
    // plimsolld's safety net (server/loop/envelope.h): never shrink without fresh stats; growing
    // needs none.
    if (!policy::MayShrink(v) && target < previous) target = previous;
    if (target != previous) {
      g.SetTarget(target);
      ++changed;
    }
  }
  return changed;
}

}  // namespace plimsoll::sim
