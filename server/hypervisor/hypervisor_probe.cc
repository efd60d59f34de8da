// Manual probe of the libvirt seam: connects to a URI, lists active domains and
// their balloon stats as LibvirtHypervisor sees them, optionally switches stats
// polling on and watches events. For checking the seam against a real QEMU guest:
//
//   hypervisor_probe 'qemu:///system?socket=/PRIVATE/sock/libvirt-sock' --stats-period=1 --watch=10
//
// Output is key=value, one line per domain / event.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/hypervisor/libvirt_hypervisor.h"

namespace plimsoll::hypervisor {
namespace {

const char* StateName(DomainRunState s) {
  switch (s) {
    case DomainRunState::kRunning:
      return "running";
    case DomainRunState::kPaused:
      return "paused";
    case DomainRunState::kShutoff:
      return "shutoff";
    case DomainRunState::kCrashed:
      return "crashed";
    case DomainRunState::kOther:
      return "other";
  }
  return "?";
}

const char* KindName(DomainEvent::Kind k) {
  switch (k) {
    case DomainEvent::Kind::kStarted:
      return "started";
    case DomainEvent::Kind::kStopped:
      return "stopped";
    case DomainEvent::Kind::kCrashed:
      return "crashed";
    case DomainEvent::Kind::kBalloonChange:
      return "balloon_change";
    case DomainEvent::Kind::kOther:
      return "other";
  }
  return "?";
}

template <typename T>
void PrintField(const char* name, const std::optional<T>& v) {
  std::cout << " " << name << "=";
  if (v.has_value()) {
    std::cout << *v;
  } else {
    std::cout << "-";
  }
}

int Usage() {
  std::cerr << "usage: hypervisor_probe URI [--stats-period=SECONDS] [--watch=SECONDS]\n";
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string uri = argv[1];
  int stats_period = -1;
  int watch_seconds = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--stats-period=")) {
      if (!absl::SimpleAtoi(arg.substr(15), &stats_period)) return Usage();
    } else if (absl::StartsWith(arg, "--watch=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &watch_seconds)) return Usage();
    } else {
      return Usage();
    }
  }

  LibvirtHypervisor hv(uri);
  hv.SetEventCallback([](const DomainEvent& e) {
    // std::cout is not line-atomic across threads; one << chain per line is
    // good enough for a probe.
    std::cout << "event kind=" << KindName(e.kind) << " name=" << e.name << " uuid=" << e.uuid
              << " balloon_bytes=" << e.balloon_bytes << std::endl;
  });
  if (absl::Status s = hv.Connect(); !s.ok()) {
    std::cerr << "connect failed: " << s << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<DomainInfo>> domains = hv.ListActiveDomains();
  if (!domains.ok()) {
    std::cerr << "list failed: " << domains.status() << "\n";
    return 1;
  }
  std::vector<std::string> uuids;
  for (const DomainInfo& d : *domains) {
    std::cout << "domain name=" << d.name << " uuid=" << d.uuid << " state=" << StateName(d.state)
              << " max_bytes=" << d.max_bytes << " current_bytes=" << d.current_bytes << " free_page_reporting="
              << (!d.free_page_reporting.has_value() ? "unknown" : *d.free_page_reporting ? "on" : "off") << "\n";
    uuids.push_back(d.uuid);
    if (stats_period >= 0) {
      absl::Status s = hv.EnableStats(d.uuid, stats_period);
      std::cout << "enable_stats name=" << d.name << " period_s=" << stats_period << " status=\""
                << s << "\"\n";
    }
  }
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> stats = hv.GetBalloonStats(uuids);
  if (!stats.ok()) {
    std::cerr << "stats failed: " << stats.status() << "\n";
    return 1;
  }
  for (const DomainInfo& d : *domains) {
    auto it = stats->find(d.uuid);
    if (it == stats->end()) {
      std::cout << "stats name=" << d.name << " missing\n";
      continue;
    }
    const BalloonStats& b = it->second;
    std::cout << "stats name=" << d.name;
    PrintField("actual_bytes", b.actual_bytes);
    PrintField("unused_bytes", b.unused_bytes);
    PrintField("usable_bytes", b.usable_bytes);
    PrintField("available_bytes", b.available_bytes);
    PrintField("disk_caches_bytes", b.disk_caches_bytes);
    PrintField("rss_bytes", b.rss_bytes);
    PrintField("swap_in_kib", b.swap_in);
    PrintField("swap_out_kib", b.swap_out);
    PrintField("major_fault", b.major_fault);
    PrintField("minor_fault", b.minor_fault);
    PrintField("last_update", b.last_update);
    PrintField("disk_read_bytes", b.disk_read_bytes);
    PrintField("disk_read_requests", b.disk_read_requests);
    std::cout << "\n";
  }
  std::cout.flush();
  if (watch_seconds > 0) absl::SleepFor(absl::Seconds(watch_seconds));
  return 0;
}

}  // namespace
}  // namespace plimsoll::hypervisor

int main(int argc, char** argv) { return plimsoll::hypervisor::Main(argc, argv); }
