#include "policy/idle_tax.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace plimsoll::policy {
namespace {

// The size a candidate settles at when the common ratio is `rho` (before clamping to
// [lowest, size]): the inverse of rho(P) = S / (a + k * (P - a)) above the active part a,
// S / P below it.
double SizeAtRatio(double shares, double active, double k, double rho) {
  const double weighted = shares / rho;  // the "page cost" the candidate can afford
  if (weighted >= active) return active + (weighted - active) / k;
  return weighted;
}

double TaxRate(double idle_tax) {
  return std::clamp(std::isnan(idle_tax) ? 0.0 : idle_tax, 0.0, 0.99);
}

}  // namespace

double ShareRatio(const ReclaimCandidate& c, double size, double idle_tax) {
  const double k = 1.0 / (1.0 - TaxRate(idle_tax));
  const double shares = c.shares > 0 ? c.shares : 1.0;
  const double p = std::max(size, 1.0);
  const double active = std::clamp(c.active, 0.0, p);
  return shares / (active + k * (p - active));
}

std::vector<double> DistributeReclaim(const std::vector<ReclaimCandidate>& candidates,
                                      double deficit, double idle_tax, double ratio_cap) {
  std::vector<double> take(candidates.size(), 0.0);
  if (!(deficit > 0) || !(ratio_cap > 0)) return take;
  const double k = 1.0 / (1.0 - TaxRate(idle_tax));

  struct Prepared {
    double shares, active, lowest, size;
  };
  std::vector<Prepared> prepared(candidates.size());
  double room = 0;
  double rho_lo = HUGE_VAL;
  double rho_hi = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ReclaimCandidate& c = candidates[i];
    Prepared& p = prepared[i];
    p.size = std::max(0.0, c.size);
    p.lowest = std::clamp(c.lowest, 0.0, p.size);
    p.active = std::clamp(c.active, 0.0, p.size);
    p.shares = c.shares > 0 ? c.shares : 1.0;
    if (p.size - p.lowest <= 0) continue;
    room += p.size - p.lowest;
    // rho at the current size (nobody gives at or below it) and at the lowest size (everybody
    // is at its lowest at or above it).
    const double at_size = p.shares / (p.active + k * (p.size - p.active));
    const double low = std::max(p.lowest, 1.0);
    const double at_lowest =
        low >= p.active ? p.shares / (p.active + k * (low - p.active)) : p.shares / low;
    rho_lo = std::min(rho_lo, at_size);
    rho_hi = std::max(rho_hi, at_lowest);
  }
  if (room <= 0 || rho_lo >= ratio_cap) return take;
  const bool capped = rho_hi > ratio_cap;
  rho_hi = std::min(rho_hi, ratio_cap);
  const auto take_at = [&](double rho, std::vector<double>* out) {
    double sum = 0;
    for (size_t i = 0; i < prepared.size(); ++i) {
      const Prepared& p = prepared[i];
      double t = 0;
      if (p.size - p.lowest > 0) {
        const double settled =
            std::clamp(SizeAtRatio(p.shares, p.active, k, rho), p.lowest, p.size);
        t = p.size - settled;
      }
      if (out != nullptr) (*out)[i] = t;
      sum += t;
    }
    return sum;
  };
  if (capped && take_at(rho_hi, nullptr) <= deficit) {
    take_at(rho_hi, &take);
    return take;
  }
  if (!capped && deficit >= room) {
    for (size_t i = 0; i < prepared.size(); ++i) {
      take[i] = std::max(0.0, prepared[i].size - prepared[i].lowest);
    }
    return take;
  }
  // Bisect on log(rho): the amount taken grows with rho from 0 (at rho_lo) to room (at rho_hi).
  double lo = std::log(rho_lo);
  double hi = std::log(rho_hi) + (capped ? 0.0 : 1e-9);
  for (int iteration = 0; iteration < 64 && hi - lo > 1e-12; ++iteration) {
    const double mid = 0.5 * (lo + hi);
    if (take_at(std::exp(mid), nullptr) < deficit) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double taken = take_at(std::exp(hi), &take);
  // `taken` is within bisection precision above the deficit: trim the excess pro rata so the
  // sum is exact.
  if (taken > deficit && taken > 0) {
    const double scale = deficit / taken;
    for (double& t : take) t *= scale;
  }
  return take;
}

}  // namespace plimsoll::policy
