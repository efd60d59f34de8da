#include "sim/scenario_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/rng.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

// Every size is a whole number of MiB and every time a whole number of 10 s, so that a printed
// case is short to read and exact (FormatScenario).
double Mib(double bytes) { return std::round(bytes / kMib) * kMib; }
double Time10(double seconds) { return std::round(seconds / 10) * 10; }

const std::vector<double>& GuestSizes() {
  static const std::vector<double> sizes = {0.5 * kGib, 1 * kGib,  2 * kGib,  3 * kGib,  4 * kGib,
                                            6 * kGib,   8 * kGib,  12 * kGib, 16 * kGib, 24 * kGib,
                                            32 * kGib,  48 * kGib, 64 * kGib};
  return sizes;
}

std::vector<double> MibPerSecond(std::vector<double> values) {
  for (double& v : values) v *= kMib;
  return values;
}

enum class Workload { kStream, kHot, kGrow, kSpike, kBursty, kLoop, kIdle };
constexpr int kWorkloads = 7;

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kStream:
      return "stream";
    case Workload::kHot:
      return "hot";
    case Workload::kGrow:
      return "grow";
    case Workload::kSpike:
      return "spike";
    case Workload::kBursty:
      return "bursty";
    case Workload::kLoop:
      return "loop";
    case Workload::kIdle:
      return "idle";
  }
  return "idle";
}

// How likely each workload is, in enum order: the page-cache cases (streams, hot sets, bursts,
// loops) make a little over half, anonymous growth and spikes a quarter, idle the rest.
const std::vector<double>& WorkloadWeights() {
  static const std::vector<double> weights = {18, 22, 12, 12, 12, 8, 16};
  return weights;
}

// The most anonymous memory a phase may ask for: 85% of max less what the kernel keeps, so
// that the workload fits in the guest at its max (an OOM kill is then a policy's doing).
double AnonCap(const GuestSpec& g) {
  const double kernel = g.kernel.value_or(48 * kMib + 0.02 * g.max);
  return Mib(std::max(32 * kMib, 0.85 * g.max - kernel - g.unreclaimable));
}

// Phases as changes at times: sorted, one per time (the last written wins), all before the end.
std::vector<Phase> Normalise(std::vector<Phase> phases, double duration) {
  std::stable_sort(phases.begin(), phases.end(),
                   [](const Phase& a, const Phase& b) { return a.at < b.at; });
  std::vector<Phase> out;
  for (const Phase& p : phases) {
    if (p.at >= duration) continue;
    if (!out.empty() && out.back().at == p.at) {
      out.back() = p;
    } else {
      out.push_back(p);
    }
  }
  return out;
}

// The phases of one workload, from `base` (anon set; reads off) over `duration` seconds.
std::vector<Phase> WorkloadPhases(Workload w, const GuestSpec& g, Phase base, double duration,
                                  Rng& rng) {
  const double cap = AnonCap(g);
  std::vector<Phase> phases;
  switch (w) {
    case Workload::kStream: {
      base.stream_rate = rng.Pick(MibPerSecond({1, 2, 5, 10, 20, 40, 80, 160}));
      phases.push_back(base);
      if (rng.Chance(0.3)) {  // the reader changes pace once
        Phase p = base;
        p.at = Time10(rng.Uniform(0.2, 0.8) * duration);
        p.stream_rate = rng.Pick(MibPerSecond({1, 2, 5, 10, 20, 40, 80, 160}));
        phases.push_back(p);
      }
      break;
    }
    case Workload::kHot: {
      base.hot = Mib(g.max * rng.Uniform(kGeneratedMinHotShare, kGeneratedMaxHotShare));
      base.hot_rate = rng.Pick(MibPerSecond({5, 10, 20, 50, 100, 200}));
      phases.push_back(base);
      if (rng.Chance(0.25)) {  // the hot set changes size once
        Phase p = base;
        p.at = Time10(rng.Uniform(0.2, 0.8) * duration);
        p.hot = Mib(g.max * rng.Uniform(kGeneratedMinHotShare, kGeneratedMaxHotShare));
        phases.push_back(p);
      }
      break;
    }
    case Workload::kGrow: {
      phases.push_back(base);
      const double to = rng.Uniform(std::min(cap, base.anon + 0.15 * g.max), cap);
      const int steps = static_cast<int>(rng.Int(2, 4));
      for (int i = 1; i <= steps; ++i) {
        Phase p = base;
        // Evenly spread over 10-90% of the run, each step jittered within its slot.
        const double slot = 0.8 * duration / steps;
        p.at = Time10(0.1 * duration + slot * (i - 1) + rng.Uniform(0, 0.5) * slot);
        p.anon = Mib(base.anon + (to - base.anon) * i / steps);
        phases.push_back(p);
      }
      break;
    }
    case Workload::kSpike: {
      phases.push_back(base);
      const int spikes = static_cast<int>(rng.Int(1, 3));
      const double slot = 0.8 * duration / spikes;
      for (int i = 0; i < spikes; ++i) {
        Phase up = base;
        up.at = Time10(0.1 * duration + slot * i + rng.Uniform(0, 0.5) * slot);
        up.anon = Mib(std::min(cap, base.anon + rng.Uniform(0.15, 0.5) * g.max));
        Phase down = base;
        down.at =
            up.at + std::min(Time10(0.45 * slot), rng.Pick(std::vector<double>{30, 60, 120, 300}));
        phases.push_back(up);
        phases.push_back(down);
      }
      break;
    }
    case Workload::kBursty: {
      // Reads on, reads off: a hot set, a stream or both, read in bursts of 1-5 minutes; a
      // little more anonymous memory while a burst lasts.
      const bool hot = rng.Chance(0.7);
      const bool stream = !hot || rng.Chance(0.4);
      base.hot = hot ? Mib(g.max * rng.Uniform(kGeneratedMinHotShare, 0.6)) : 0;
      const double hot_rate = hot ? rng.Pick(MibPerSecond({10, 20, 50, 100, 200})) : 0;
      const double stream_rate = stream ? rng.Pick(MibPerSecond({5, 10, 20, 40, 80})) : 0;
      const double burst_anon = Mib(std::min(cap, base.anon + rng.Uniform(0, 0.15) * g.max));
      bool on = rng.Chance(0.5);
      for (double t = 0; t < duration;
           t += rng.Pick(std::vector<double>{60, 120, 180, 300}), on = !on) {
        Phase p = base;
        p.at = t;
        p.hot_rate = on ? hot_rate : 0;
        p.stream_rate = on ? stream_rate : 0;
        p.anon = on ? burst_anon : base.anon;
        phases.push_back(p);
      }
      break;
    }
    case Workload::kLoop: {
      base.loop = Mib(g.max * rng.Uniform(1.2, 3.0));
      base.stream_rate = rng.Pick(MibPerSecond({10, 20, 40, 80}));
      phases.push_back(base);
      break;
    }
    case Workload::kIdle:
      phases.push_back(base);
      break;
  }
  return Normalise(std::move(phases), duration);
}

struct Drawn {
  GuestSpec spec;
  Workload workload = Workload::kIdle;
  std::string extra;  // the second workload or the balloon's trouble, for the description
};

Drawn DrawGuest(int i, bool agent, bool anon_heavy, double duration, Rng& rng) {
  Drawn d;
  GuestSpec& g = d.spec;
  g.max = rng.Pick(GuestSizes());
  g.min = std::max(256 * kMib, Mib(g.max * rng.Pick(std::vector<double>{1.0 / 16, 1.0 / 8, 0.25})));
  g.agent = agent;
  g.unreclaimable = std::max(32 * kMib, Mib(g.max * rng.Uniform(0.005, 0.03)));
  g.alloc_rate = rng.Pick(MibPerSecond({64, 128, 256, 256, 512, 1024}));
  g.disk_rate = rng.Pick(MibPerSecond({50, 100, 100, 200, 500}));
  g.stats_period = std::vector<double>{5, 2, 10}[rng.Weighted({80, 10, 10})];
  g.shares = rng.Chance(0.8) ? 1000 : rng.Pick(std::vector<double>{250, 500, 2000, 4000});
  g.autodeflate = rng.Chance(0.15);

  d.workload = static_cast<Workload>(rng.Weighted(WorkloadWeights()));
  const double cap = AnonCap(g);
  Phase base;
  // Anonymous memory: on most hosts from a twentieth of the guest to under half of it, less
  // beside a hot set or a loop; on hosts of anonymous-heavy tenants (JVMs, databases with their
  // own buffer pools) from a third to most of it.
  const double anon_share =
      anon_heavy ? (d.workload == Workload::kHot ? rng.Uniform(0.25, 0.6) : rng.Uniform(0.35, 0.8))
      : d.workload == Workload::kHot  ? rng.Uniform(0.05, 0.35)
      : d.workload == Workload::kIdle ? rng.Uniform(0.03, 0.25)
      : d.workload == Workload::kLoop ? rng.Uniform(0.05, 0.3)
                                      : rng.Uniform(0.05, 0.45);
  base.anon = std::min(cap, Mib(anon_share * g.max));
  g.phases = WorkloadPhases(d.workload, g, base, duration, rng);

  const auto any = [&g](auto field) {
    return std::any_of(g.phases.begin(), g.phases.end(),
                       [&](const Phase& p) { return p.*field > 0; });
  };
  // A second, smaller workload beside the first: a slow stream, or a small hot set.
  if (d.workload != Workload::kIdle && rng.Chance(0.3)) {
    if (!any(&Phase::stream_rate) && !any(&Phase::loop)) {
      const double rate = rng.Pick(MibPerSecond({1, 2, 5}));
      for (Phase& p : g.phases) p.stream_rate += rate;
      d.extra = absl::StrCat("+stream ", FormatBytes(rate), "/s");
    } else if (!any(&Phase::hot)) {
      const double hot = Mib(g.max * rng.Uniform(0.05, 0.2));
      const double rate = rng.Pick(MibPerSecond({5, 10, 20}));
      for (Phase& p : g.phases) {
        p.hot = hot;
        p.hot_rate = rate;
      }
      d.extra = absl::StrCat("+hot ", FormatBytes(hot));
    }
  }

  // The balloon: mostly a normal one.
  switch (rng.Weighted({80, 8, 4, 2, 6})) {
    case 1:
      g.speed = rng.Pick(MibPerSecond({2, 4, 8, 16, 32}));
      absl::StrAppend(&d.extra, d.extra.empty() ? "" : " ", "slow ", FormatBytes(g.speed), "/s");
      break;
    case 2:
      g.behaviour = Behaviour::kStuck;
      break;
    case 3:
      g.behaviour = Behaviour::kTrickle;
      break;
    case 4:
      g.behaviour = Behaviour::kChurn;
      // Churn needs a streaming reader to refill what the shrinker gives back.
      if (!any(&Phase::stream_rate)) {
        const double rate = rng.Pick(MibPerSecond({10, 20, 40}));
        for (Phase& p : g.phases) p.stream_rate += rate;
      }
      break;
    default:
      break;
  }
  if (g.behaviour != Behaviour::kNormal) {
    g.behaviour_at = Time10(rng.Uniform(0, 0.5) * duration);
    absl::StrAppend(&d.extra, d.extra.empty() ? "" : " ", BehaviourName(g.behaviour), " from ",
                    FormatExactSeconds(g.behaviour_at));
  }
  if (g.autodeflate) absl::StrAppend(&d.extra, d.extra.empty() ? "" : " ", "autodeflate");
  for (Phase& p : g.phases) p.anon = std::min(p.anon, cap);
  g.name = absl::StrFormat("g%02d_%s", i, WorkloadName(d.workload));
  return d;
}

}  // namespace

Scenario GenerateScenario(uint64_t seed, int index) {
  Rng rng = Rng::ForItem(seed, static_cast<uint64_t>(index));
  Scenario s;
  s.name = absl::StrFormat("seed%d_%03d", seed, index);
  s.duration = rng.Pick(std::vector<double>{600, 900, 1200, 1500, 1800});
  s.tick = 5;
  const int n = static_cast<int>(rng.Int(kGeneratedMinGuests, kGeneratedMaxGuests));
  // The agent on every guest, on none, or on about half.
  const size_t agent_mode = rng.Weighted({55, 25, 20});
  // Two hosts in five run anonymous-heavy tenants.
  const bool anon_heavy = rng.Chance(0.4);
  std::vector<Drawn> drawn;
  double total_max = 0;
  for (int i = 0; i < n; ++i) {
    const bool agent = agent_mode == 0 || (agent_mode == 2 && rng.Chance(0.5));
    drawn.push_back(DrawGuest(i, agent, anon_heavy, s.duration, rng));
    total_max += drawn.back().spec.max;
  }
  // How each guest reads its files: from a stream of its own, so that the rest of a case is
  // drawn as it was before the model had the access mode (the corpus's earlier figures stay
  // comparable). One guest in four maps its files (search indexes, LMDB, binaries); the rest
  // read() them, as most databases and the lab's workloads do.
  Rng access_rng = Rng::ForItem(seed ^ 0xACCE55ACCE55ULL, static_cast<uint64_t>(index));
  for (Drawn& d : drawn) {
    if (!access_rng.Chance(0.25)) continue;
    d.spec.access = FileAccess::kMmap;
    absl::StrAppend(&d.extra, d.extra.empty() ? "" : " ", "mmap");
  }
  // Whether the guests' kernels send the balloon driver's pressure counters (Linux >= 6.12 on
  // QEMU >= 9.2): on one host in two, for every guest of it. From a stream of its own, as the
  // access mode: the rest of the case is drawn as before, and simulate plays it only with
  // --balloon_pressure=case (its default, off, plays every case as before the model had them).
  Rng pressure_rng = Rng::ForItem(seed ^ 0xBA11009E55ULL, static_cast<uint64_t>(index));
  if (pressure_rng.Chance(0.5)) {
    for (Drawn& d : drawn) d.spec.balloon_pressure = true;
  }
  // How much the guests' readers' pace wanders with their neighbours (read_drift=): one host in
  // five quiet, the rest from half the lab's (0.21) to 1.4x it. From a stream of its own, as the
  // access mode: the rest of the case is drawn as before.
  Rng drift_rng = Rng::ForItem(seed ^ 0xD21F7D21F7ULL, static_cast<uint64_t>(index));
  const double drift = std::vector<double>{0, 0.1, 0.21, 0.3}[drift_rng.Weighted({20, 25, 35, 20})];
  for (Drawn& d : drawn) d.spec.read_drift = drift;
  // Mixed means mixed: at least one guest of each kind.
  if (agent_mode == 2 && n >= 2) {
    const bool all_same = std::all_of(drawn.begin(), drawn.end(), [&](const Drawn& d) {
      return d.spec.agent == drawn.front().spec.agent;
    });
    if (all_same) drawn.back().spec.agent = !drawn.front().spec.agent;
  }

  const double budget_share = static_cast<double>(rng.Int(50, 95)) / 100;
  const double budget = std::floor(budget_share * total_max / kMib) * kMib;
  s.host.budget = budget;
  s.host.reserve =
      std::clamp(std::round(0.03 * total_max / (256 * kMib)) * 256 * kMib, 512 * kMib, 16 * kGib);
  // Room for every guest at its max: the budget, not the host, is what binds, until an outside
  // process takes memory.
  s.host.total = std::ceil((total_max * rng.Uniform(1.0, 1.1) + s.host.reserve) / kGib) * kGib;
  std::string pressure = "no host pressure";
  if (rng.Chance(0.3)) {
    // Enough that the guests must go `under` below the budget to leave the host its reserve.
    const double under = rng.Uniform(0.05, 0.25);
    HostEvent take;
    take.at = Time10(rng.Uniform(0.15, 0.6) * s.duration);
    take.other = Mib(s.host.total - s.host.reserve - budget + under * budget);
    s.host.events.push_back(take);
    pressure = absl::StrFormat(
        "host pressure from %s: an outside process takes %s (%.0f%% of the "
        "budget under it)",
        FormatExactSeconds(take.at), FormatBytes(take.other), 100 * under);
    if (rng.Chance(0.5)) {
      HostEvent release;
      release.at = Time10(take.at + rng.Uniform(0.15, 0.35) * s.duration);
      if (release.at < s.duration - 60) {
        s.host.events.push_back(release);
        absl::StrAppend(&pressure, ", gone at ", FormatExactSeconds(release.at));
      }
    }
  }

  int agents = 0;
  std::vector<bool> has(kWorkloads, false);
  std::vector<std::string> extras;
  for (Drawn& d : drawn) {
    agents += d.spec.agent ? 1 : 0;
    has[static_cast<int>(d.workload)] = true;
    if (!d.extra.empty()) extras.push_back(absl::StrCat(d.spec.name, " ", d.extra));
    s.guests.push_back(std::move(d.spec));
  }
  s.tags.push_back("generated");
  for (int w = 0; w < kWorkloads; ++w) {
    if (has[w]) s.tags.push_back(WorkloadName(static_cast<Workload>(w)));
  }
  if (anon_heavy) s.tags.push_back("anon_heavy");
  if (!s.host.events.empty()) s.tags.push_back("host_pressure");
  s.description = absl::StrFormat(
      "Generated case %d of seed %d: %d guests%s (%d with the agent), %s in all; budget %s "
      "(%.0f%% of it); %s.",
      index, seed, n, anon_heavy ? " of anonymous-heavy tenants" : "", agents,
      FormatBytes(total_max), FormatBytes(budget), 100 * budget_share, pressure);
  if (!extras.empty()) {
    absl::StrAppend(&s.description, " Guests: ", absl::StrJoin(extras, "; "), ".");
  }
  return s;
}

}  // namespace plimsoll::sim
