// The production Hypervisor: one libvirt connection (qemu:///system, or the
// in-process test driver in tests). This header deliberately does not include
// <libvirt/libvirt.h>; everything libvirt lives behind Impl in the .cc.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_HYPERVISOR_H_
#define PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_HYPERVISOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/hypervisor/balloon_device_reads.h"
#include "server/hypervisor/hypervisor.h"

// libvirt's connection (virConnectPtr is a _virConnect*), declared so that this header needs no
// libvirt include.
struct _virConnect;

namespace plimsoll::hypervisor {

// Opens the connection Connect() uses, as virConnectOpen(uri) would: nullptr when it failed, with
// libvirt's last error saying why. The caller hands the reference to LibvirtHypervisor, which
// closes it. Callers that need another kind of open (virConnectOpenAuth, a read-only probe) pass
// their own; tests of the in-process test driver pass one that keeps a reference, because that
// driver's domains live per connection and only the same connection can change them
// (testing/test_driver_control.h).
using ConnectionOpener = std::function<_virConnect*(const std::string& uri)>;

// The libvirt calls LibvirtHypervisor makes, counted so that what a tick costs shows in
// /metrics (plimsoll_libvirt_calls_total{call}).
enum class LibvirtCall {
  kGetAllDomainStats,  // virConnectGetAllDomainStats
  kListAllDomains,     // virConnectListAllDomains
  kGetInfo,            // virDomainGetInfo
  kMemoryStats,        // virDomainMemoryStats
  kLookup,             // virDomainLookupByUUIDString
  kSetMemory,          // virDomainSetMemoryFlags
  kSetStatsPeriod,     // virDomainSetMemoryStatsPeriod
  kGetJobInfo,         // virDomainGetJobInfo
  kGetXml,             // virDomainGetXMLDesc
  kAttachDevice,       // virDomainAttachDeviceFlags
  kQemuMonitor,        // virDomainQemuMonitorCommand (the balloon's pressure counters)
};
inline constexpr size_t kNumLibvirtCalls = 11;
// The libvirt function's name ("virConnectGetAllDomainStats", ...).
const char* LibvirtCallName(LibvirtCall call);

// Talks to libvirt over one read-write connection to `uri`.
//
// Threads: all instances share one process-wide libvirt event loop thread
// (started by the first Connect(), stopped when the last instance is
// destroyed), so the thread count does not grow with guests or instances.
// Events are delivered on that thread. Every public method is thread-safe;
// calls on one instance are serialised by a mutex around the connection, but
// for the per-domain calls that may wait for the domain's jobs
// (SetBalloonTarget, EnableStats, ActiveJob): they hold it only to find the
// domain, so a balloon call stuck behind a migration or a hung QEMU monitor
// does not hold up ListActiveDomains and GetBalloonStats (libvirt connections
// are thread-safe). The event thread never takes that mutex, so a callback may
// call back into this object (it will wait for any call in progress). Do not
// destroy the object from inside its own event callback, nor while a call is
// in progress on another thread.
//
// Status codes (the libvirt message is always part of the status message):
//   UNAVAILABLE        not connected, or the connection was lost (RPC, system,
//                      no-connect errors, or libvirt reports the connection
//                      dead); IsConnected() turns false and Connect() reopens.
//   NOT_FOUND          no such domain (VIR_ERR_NO_DOMAIN).
//   INVALID_ARGUMENT   libvirt refused an argument (a target above the
//                      domain's <memory>, a malformed uuid, a test:/// URI
//                      naming an unreadable file), or a target below 1 KiB.
//   FAILED_PRECONDITION the domain is not in a state for it (e.g. not running).
//   UNIMPLEMENTED      the driver does not support the call.
//   DEADLINE_EXCEEDED  libvirt timed out waiting (e.g. a busy domain job).
//   PERMISSION_DENIED  authentication failed or the operation was denied.
//   INTERNAL           anything else.
class LibvirtHypervisor final : public Hypervisor {
 public:
  // `uri` is passed to virConnectOpen (or `opener`, when given) unchanged; "" means libvirt's
  // default. Nothing is opened until Connect(), which opens anew after a lost connection.
  // `xml_reads` bounds the live-XML reads of the listings (balloon_device_reads.h); tests lower it.
  explicit LibvirtHypervisor(std::string uri, ConnectionOpener opener = nullptr,
                             BalloonDeviceReadLimits xml_reads = {});
  // Closes the connection and deregisters all callbacks; after it returns the
  // event callback is not running and will not be called.
  ~LibvirtHypervisor() override;

  LibvirtHypervisor(const LibvirtHypervisor&) = delete;
  LibvirtHypervisor& operator=(const LibvirtHypervisor&) = delete;

  absl::Status Connect() override;
  bool IsConnected() const override;
  // virConnectListAllDomains, then virDomainGetInfo per domain; virDomainGetXMLDesc for the
  // domains whose balloon device is not known yet, at most so many per listing
  // (balloon_device_reads.h).
  absl::StatusOr<std::vector<DomainInfo>> ListActiveDomains() override;
  // One virConnectGetAllDomainStats(STATE | BALLOON, and BLOCK when `with_block_stats`) for
  // every active domain: state, <memory> and balloon size from the record, its stats as
  // GetBalloonStats parses them. Where the driver cannot answer so (no bulk call, records
  // without balloon fields as the test driver's) the domains are listed and each one's
  // virDomainMemoryStats read in one pass; where a record lacks its state or size, the
  // default: ListActiveDomains + GetBalloonStats.
  absl::StatusOr<DomainSurvey> SurveyDomains(bool with_block_stats) override;
  // One virConnectGetAllDomainStats(BALLOON | BLOCK) call for all active domains;
  // virDomainMemoryStats only for domains whose bulk record has no balloon
  // fields at all (the test driver). swap_in/swap_out are KiB as libvirt
  // reports them; faults are counts. Disk reads (block_reads.h) come only from the bulk call:
  // the per-domain fallback leaves them absent.
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) override;
  absl::Status EnableStats(const std::string& uuid, int period_seconds) override;
  // `bytes` is rounded down to whole KiB (libvirt's unit).
  absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) override;
  // virDomainGetJobInfo: "" for no job (or a finished one), else "bounded|unbounded job running
  // for N.Ns". UNIMPLEMENTED where the driver has no job info.
  absl::StatusOr<std::string> ActiveJob(const std::string& uuid) override;
  // Through virDomainQemuMonitorCommand, without holding the mutex (a monitor command waits
  // for the domain's job like a balloon call). UNIMPLEMENTED where the driver has no QEMU
  // monitor (the test driver), remembered for the connection.
  absl::StatusOr<BalloonPressure> ReadBalloonPressure(const std::string& uuid) override;
  // After it returns the previous callback is not running (unless called from
  // the event thread itself) and will not be called again.
  void SetEventCallback(std::function<void(const DomainEvent&)> callback) override;
  // Parses the live XML (virDomainGetXMLDesc, flags 0) with ParseAgentChannel.
  absl::StatusOr<AgentChannelInfo> GetAgentChannel(const std::string& uuid, const std::string& name) override;
  // virDomainAttachDeviceFlags(AgentChannelDeviceXml(...), AFFECT_LIVE). libvirt's "controller
  // cannot be hot plugged" is FAILED_PRECONDITION.
  absl::Status AttachAgentChannel(const std::string& uuid, const std::string& name,
                                  const std::string& socket_path) override;

  const std::string& uri() const;
  // Calls made since construction, by LibvirtCallName (every kind, zeros included). Thread-safe.
  std::vector<std::pair<std::string, uint64_t>> CallCounts() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_LIBVIRT_HYPERVISOR_H_
