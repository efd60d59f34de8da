// How much anonymous memory libvirt's in-process test driver holds for a host:
//   test_driver_memory /abs/path/node.xml
// prints RssAnon before connecting and after connecting, listing every domain and
// reading its balloon stats (what plimsolld's first tick does), in KiB. plimsolld
// with a test:/// URI carries this memory itself; with qemu:///system it is libvirtd's.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "server/hypervisor/libvirt_hypervisor.h"

namespace {

long RssAnonKib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "RssAnon:") {
      status >> value;
      return value;
    }
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s /abs/path/node.xml\n", argv[0]);
    return 2;
  }
  const long before = RssAnonKib();
  plimsoll::hypervisor::LibvirtHypervisor hv(std::string("test://") + argv[1]);
  if (absl::Status s = hv.Connect(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  auto domains = hv.ListActiveDomains();
  if (!domains.ok()) {
    std::fprintf(stderr, "%s\n", std::string(domains.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> uuids;
  for (const auto& d : *domains) uuids.push_back(d.uuid);
  auto stats = hv.GetBalloonStats(uuids);
  if (!stats.ok()) {
    std::fprintf(stderr, "%s\n", std::string(stats.status().message()).c_str());
    return 1;
  }
  const long after = RssAnonKib();
  std::printf("domains=%zu stats=%zu rss_anon_before_kib=%ld rss_anon_after_kib=%ld\n", domains->size(),
              stats->size(), before, after);
  return 0;
}
