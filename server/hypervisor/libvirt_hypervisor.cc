// The only file in the project that includes <libvirt/libvirt.h>.
#include "server/hypervisor/libvirt_hypervisor.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "server/hypervisor/agent_channel_xml.h"
#include "server/hypervisor/balloon_device_reads.h"
#include "server/hypervisor/balloon_device_xml.h"
#include "server/hypervisor/bulk_stats.h"
#include "server/hypervisor/libvirt_errors.h"
#include "server/hypervisor/qemu_guest_stats.h"

namespace plimsoll::hypervisor {
namespace {

constexpr int64_t kKiB = 1024;

// True on the shared libvirt event thread; lets teardown paths avoid waiting
// for (or joining) the very thread they run on.
thread_local bool tls_on_event_thread = false;

// ---------------------------------------------------------------------------
// Errors

// libvirt's default handler prints every error to stderr, including the ones
// we expect and turn into statuses (a vanished domain, a keepalive the test
// driver does not support). Errors still reach us through virGetLastError.
void DropLibvirtError(void* /*opaque*/, virErrorPtr /*error*/) {}

struct LibvirtError {
  int code = VIR_ERR_OK;
  int domain = VIR_FROM_NONE;
  std::string message;
};

// Reads and clears this thread's last libvirt error (libvirt keeps it per thread).
LibvirtError TakeLastError() {
  LibvirtError out;
  virErrorPtr e = virGetLastError();
  if (e != nullptr) {
    out.code = e->code;
    out.domain = e->domain;
    out.message = e->message != nullptr ? e->message : "(no message)";
  } else {
    out.message = "unknown libvirt error (none recorded)";
  }
  virResetLastError();
  return out;
}

absl::Status MakeStatus(absl::StatusCode code, absl::string_view what, const LibvirtError& e) {
  return absl::Status(code, absl::StrCat(what, ": ", e.message, " [libvirt error ", e.code, "]"));
}

// ---------------------------------------------------------------------------
// The process-wide event loop

void RemoveTimerOnce(int timer, void* /*opaque*/) { virEventRemoveTimeout(timer); }

// libvirt has one default event implementation per process; it must be
// registered before the first connection and run by some thread for events,
// keepalives and close notifications to work. One thread serves every
// connection, whatever the number of guests. The thread runs while at least
// one LibvirtHypervisor holds it, so tests and shutdown end with no stray thread.
class EventLoop {
 public:
  static EventLoop& Get() {
    // Never destroyed: libvirt offers no way to unregister its event impl.
    static EventLoop* const loop = new EventLoop();
    return *loop;
  }

  absl::Status Acquire() {
    absl::MutexLock l(&mu_);
    if (!init_status_.ok()) return init_status_;
    if (users_++ == 0) {
      stop_ = std::make_shared<std::atomic<bool>>(false);
      thread_ = std::thread(&EventLoop::Run, stop_);
    }
    return absl::OkStatus();
  }

  void Release() {
    absl::MutexLock l(&mu_);
    if (--users_ > 0) return;
    stop_->store(true);
    // Adding a timer interrupts the loop's poll(); the timer fires at once and
    // removes itself, and the loop then sees the stop flag. Joining under mu_
    // keeps a concurrent Acquire() from running a second loop thread meanwhile;
    // the loop thread never takes mu_.
    if (virEventAddTimeout(0, &RemoveTimerOnce, nullptr, nullptr) < 0) {
      LibvirtError e = TakeLastError();
      PLOG_ERROR << "cannot wake the libvirt event loop to stop it: " << e.message;
      thread_.detach();
      return;
    }
    if (tls_on_event_thread) {
      thread_.detach();  // Cannot join ourselves; the loop ends when we return to it.
    } else {
      thread_.join();
    }
  }

 private:
  EventLoop() {
    if (virInitialize() < 0) {
      init_status_ = MakeStatus(absl::StatusCode::kInternal, "virInitialize", TakeLastError());
      return;
    }
    virSetErrorFunc(nullptr, &DropLibvirtError);
    if (virEventRegisterDefaultImpl() < 0) {
      init_status_ =
          MakeStatus(absl::StatusCode::kInternal, "virEventRegisterDefaultImpl", TakeLastError());
    }
  }

  // Each thread owns its stop flag, so a detached old thread and a new one
  // cannot be confused.
  static void Run(std::shared_ptr<std::atomic<bool>> stop) {
    tls_on_event_thread = true;
    while (!stop->load()) {
      if (virEventRunDefaultImpl() < 0) {
        LibvirtError e = TakeLastError();
        PLOG_ERROR << "libvirt event loop iteration failed: " << e.message;
      }
    }
  }

  absl::Mutex mu_;
  absl::Status init_status_;
  int users_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<std::atomic<bool>> stop_ ABSL_GUARDED_BY(mu_);
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// Event delivery

// Holds the user's callback. libvirt may still be running a domain-event
// callback after it was deregistered, and frees the registration's opaque only
// later (through the free callback), so each registration owns a shared_ptr to
// this sink rather than pointing into LibvirtHypervisor.
class EventSink {
 public:
  using Callback = std::function<void(const DomainEvent&)>;

  void Set(Callback callback) {
    absl::MutexLock l(&mu_);
    callback_ = callback ? std::make_shared<const Callback>(std::move(callback)) : nullptr;
    // Waiting for in-flight deliveries gives callers a clean cut-over (they may
    // destroy what the old callback captured); impossible from the event thread.
    if (!tls_on_event_thread) mu_.Await(absl::Condition(this, &EventSink::Idle));
  }

  void Deliver(const DomainEvent& event) {
    std::shared_ptr<const Callback> callback;
    {
      absl::MutexLock l(&mu_);
      if (callback_ == nullptr) return;
      callback = callback_;
      ++in_flight_;
    }
    // Called without the lock so the callback may call SetEventCallback().
    (*callback)(event);
    absl::MutexLock l(&mu_);
    --in_flight_;
  }

 private:
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; }

  absl::Mutex mu_;
  std::shared_ptr<const Callback> callback_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

using SinkRef = std::shared_ptr<EventSink>;

void FreeSinkRef(void* opaque) { delete static_cast<SinkRef*>(opaque); }

// The canonical lowercase form, as virDomainGetUUIDString prints it. Formatted
// here: libvirt's printf-based formatting was ~8% of a 10,000-guest tick.
std::string DomainUuid(virDomainPtr dom) {
  unsigned char raw[VIR_UUID_BUFLEN];
  if (virDomainGetUUID(dom, raw) < 0) {
    virResetLastError();
    return "";
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(VIR_UUID_STRING_BUFLEN - 1, '-');
  size_t pos = 0;
  for (int i = 0; i < VIR_UUID_BUFLEN; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) ++pos;  // the dashes of 8-4-4-4-12
    out[pos++] = kHex[raw[i] >> 4];
    out[pos++] = kHex[raw[i] & 0xf];
  }
  return out;
}

std::string DomainName(virDomainPtr dom) {
  const char* name = virDomainGetName(dom);
  return name != nullptr ? name : "";
}

DomainEvent::Kind MapLifecycle(int event, int detail) {
  switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
      return DomainEvent::Kind::kStarted;
    case VIR_DOMAIN_EVENT_STOPPED:
      return detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED ? DomainEvent::Kind::kCrashed
                                                        : DomainEvent::Kind::kStopped;
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      return DomainEvent::Kind::kStopped;
    case VIR_DOMAIN_EVENT_CRASHED:
      return DomainEvent::Kind::kCrashed;
    default:
      return DomainEvent::Kind::kOther;
  }
}

int OnLifecycleEvent(virConnectPtr /*conn*/, virDomainPtr dom, int event, int detail,
                     void* opaque) {
  DomainEvent e;
  e.kind = MapLifecycle(event, detail);
  e.uuid = DomainUuid(dom);
  e.name = DomainName(dom);
  (*static_cast<SinkRef*>(opaque))->Deliver(e);
  return 0;
}

void OnBalloonChangeEvent(virConnectPtr /*conn*/, virDomainPtr dom, unsigned long long actual_kib,
                          void* opaque) {
  // A size no guest can have (it overflows in bytes) is not an event: the next stats read says
  // what the balloon is.
  const std::optional<int64_t> bytes = KiBToBytes(actual_kib);
  if (!bytes.has_value()) return;
  DomainEvent e;
  e.kind = DomainEvent::Kind::kBalloonChange;
  e.uuid = DomainUuid(dom);
  e.name = DomainName(dom);
  e.balloon_bytes = *bytes;
  (*static_cast<SinkRef*>(opaque))->Deliver(e);
}

// Liveness of one LibvirtHypervisor's connection. The close callback only
// flips this flag: in the remote driver it can run on a thread that is inside
// an RPC and holds the connection mutex.
struct ConnectionFlag {
  std::string uri;
  std::atomic<bool> up{false};
};

const char* CloseReasonName(int reason) {
  switch (reason) {
    case VIR_CONNECT_CLOSE_REASON_ERROR:
      return "error";
    case VIR_CONNECT_CLOSE_REASON_EOF:
      return "eof";
    case VIR_CONNECT_CLOSE_REASON_KEEPALIVE:
      return "keepalive";
    case VIR_CONNECT_CLOSE_REASON_CLIENT:
      return "client";
    default:
      return "unknown";
  }
}

void OnConnectionClosed(virConnectPtr /*conn*/, int reason, void* opaque) {
  auto* flag = static_cast<ConnectionFlag*>(opaque);
  flag->up.store(false);
  PLOG_WARNING << "libvirt connection lost uri=" << flag->uri
               << " reason=" << CloseReasonName(reason);
}

// ---------------------------------------------------------------------------
// Stats

struct DomainDeleter {
  void operator()(virDomainPtr dom) const { virDomainFree(dom); }
};
using DomainPtr = std::unique_ptr<virDomain, DomainDeleter>;

struct StatsRecordsDeleter {
  void operator()(virDomainStatsRecordPtr* records) const { virDomainStatsRecordListFree(records); }
};

// virDomainMemoryStats' tags by the names the bulk call gives the same stats after "balloon."
// (libvirt's qemuDomainGetStatsBalloon), so that both paths store a stat through
// StoreBalloonStat (bulk_stats.h) and read it alike. "" for the tags the daemon does not use
// (hugetlb counters, future tags).
absl::string_view BulkNameOfTag(int tag) {
  switch (tag) {
    case VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON:
      return "current";
    case VIR_DOMAIN_MEMORY_STAT_SWAP_IN:
      return "swap_in";
    case VIR_DOMAIN_MEMORY_STAT_SWAP_OUT:
      return "swap_out";
    case VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT:
      return "major_fault";
    case VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT:
      return "minor_fault";
    case VIR_DOMAIN_MEMORY_STAT_UNUSED:
      return "unused";
    case VIR_DOMAIN_MEMORY_STAT_AVAILABLE:
      return "available";
    case VIR_DOMAIN_MEMORY_STAT_USABLE:
      return "usable";
    case VIR_DOMAIN_MEMORY_STAT_RSS:
      return "rss";
    case VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE:
      return "last-update";
    case VIR_DOMAIN_MEMORY_STAT_DISK_CACHES:
      return "disk_caches";
    default:
      return "";
  }
}

// Stores one stat of virDomainMemoryStats (the per-domain path).
void StoreMemoryStat(int tag, unsigned long long value, BalloonStats* out) {
  const absl::string_view name = BulkNameOfTag(tag);
  if (!name.empty()) StoreBalloonStat(name, value, out);
}

// One typed parameter as plain data for ParseBulkRecord. The views point into `p`, which must
// outlive the result. The name is bounded by its array: libvirt terminates it, and a name that
// were not terminated must not be read past the array.
StatField PlainField(const virTypedParameter& p) {
  StatField f;
  f.name = absl::string_view(p.field, strnlen(p.field, VIR_TYPED_PARAM_FIELD_LENGTH));
  switch (p.type) {
    case VIR_TYPED_PARAM_INT:
      f.value = static_cast<int32_t>(p.value.i);
      break;
    case VIR_TYPED_PARAM_UINT:
      f.value = static_cast<uint32_t>(p.value.ui);
      break;
    case VIR_TYPED_PARAM_LLONG:
      f.value = static_cast<int64_t>(p.value.l);
      break;
    case VIR_TYPED_PARAM_ULLONG:
      f.value = static_cast<uint64_t>(p.value.ul);
      break;
    case VIR_TYPED_PARAM_DOUBLE:
      f.value = p.value.d;
      break;
    case VIR_TYPED_PARAM_BOOLEAN:
      f.value = p.value.b != 0;
      break;
    case VIR_TYPED_PARAM_STRING:
      f.value = absl::string_view(p.value.s != nullptr ? p.value.s : "");
      break;
    default:
      break;  // a type this libvirt client does not know: std::monostate
  }
  return f;
}

// Parses one bulk record (bulk_stats.h). `scratch` holds its plain fields; callers reuse it
// across the records of one call.
BulkRecord ParseRecord(const virDomainStatsRecord& record, std::vector<StatField>* scratch) {
  scratch->clear();
  for (int i = 0; i < record.nparams; ++i) scratch->push_back(PlainField(record.params[i]));
  return ParseBulkRecord(*scratch);
}

DomainRunState RunStateOf(int state) {
  switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:  // Running but idle (a Xen-ism); memory-wise it is running.
      return DomainRunState::kRunning;
    case VIR_DOMAIN_PAUSED:
      return DomainRunState::kPaused;
    case VIR_DOMAIN_SHUTOFF:
      return DomainRunState::kShutoff;
    case VIR_DOMAIN_CRASHED:
      return DomainRunState::kCrashed;
    default:
      return DomainRunState::kOther;
  }
}

// The DomainInfo in a parsed record of the STATE and BALLOON groups: what virDomainGetInfo would
// say (state, <memory>, the live balloon size). False when the record lacks one of them.
bool FillDomainInfo(const BulkRecord& record, virDomainPtr dom, DomainInfo* out) {
  if (record.state.has_value()) {
    // A number past int is no virDomainState (casting it could land on one): kOther.
    out->state = RunStateOf(*record.state <= static_cast<uint64_t>(std::numeric_limits<int>::max())
                                ? static_cast<int>(*record.state)
                                : -1);
  }
  if (record.max_bytes.has_value()) out->max_bytes = *record.max_bytes;
  if (record.stats.actual_bytes.has_value()) out->current_bytes = *record.stats.actual_bytes;
  out->name = DomainName(dom);
  out->uuid = DomainUuid(dom);
  return record.state.has_value() && record.max_bytes.has_value() && record.stats.actual_bytes.has_value();
}

}  // namespace

// ---------------------------------------------------------------------------
// Impl

struct LibvirtHypervisor::Impl {
  Impl(std::string uri_in, ConnectionOpener opener_in, BalloonDeviceReadLimits xml_reads)
      : uri(std::move(uri_in)), opener(std::move(opener_in)), balloon_devices(xml_reads) {
    flag.uri = uri;
  }

  ~Impl() {
    {
      absl::MutexLock l(&mu);
      CloseLocked();
    }
    sink->Set(nullptr);
    bool release;
    {
      absl::MutexLock l(&mu);
      release = loop_acquired;
    }
    // After the connection is closed, so the loop's last iteration runs the
    // deferred frees of the timers and callbacks that connection left behind.
    if (release) EventLoop::Get().Release();
  }

  absl::Status Connect();
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status CheckConnectedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Turns this thread's last libvirt error into a status; marks the
  // connection lost when the error (or libvirt's liveness check) says so.
  absl::Status FailLocked(absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The same for an error taken already (TakeLastError is per thread and needs no lock: a call
  // made without the mutex takes its error first, then locks to judge it).
  absl::Status FailedLocked(absl::string_view what, const LibvirtError& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A reference of the caller's own to the domain (the listed one, or looked up), for a call made
  // without the mutex: the next ListActiveDomains may drop the listed one meanwhile.
  absl::StatusOr<DomainPtr> OwnDomainLocked(const std::string& uuid, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Takes the mutex only to find the domain (OwnDomainLocked) and to judge a failure, not for
  // `call` itself: calls that may wait for a domain's job (a balloon target, the stats period)
  // must not hold up the listing and stats of every other domain. libvirt connections are
  // thread-safe; the remote driver runs concurrent calls on one connection.
  absl::Status CallUnlocked(const std::string& uuid, absl::string_view what,
                            const std::function<int(virDomainPtr)>& call);
  absl::StatusOr<DomainPtr> LookupLocked(const std::string& uuid, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The domain from the last ListActiveDomains when it is there (no libvirt call),
  // else looked up by uuid into `*holder`.
  absl::StatusOr<virDomainPtr> DomainLocked(const std::string& uuid, absl::string_view what, DomainPtr* holder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Per-domain fallback. nullopt: the domain vanished or stopped meanwhile, or
  // a per-domain error that was logged (one bad guest must not hide the rest).
  absl::StatusOr<std::optional<BalloonStats>> MemoryStatsLocked(virDomainPtr dom,
                                                                absl::string_view uuid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids);
  absl::StatusOr<std::vector<DomainInfo>> ListActiveDomains();
  // ListActiveDomains under the caller's lock; `handles` (if given) gets each listed domain's
  // handle, in the order of the result (owned by `listed`, valid until the next listing, unless
  // the listing named the domain twice: DomainByDomainSurvey checks).
  absl::StatusOr<std::vector<DomainInfo>> ListActiveDomainsLocked(std::vector<virDomainPtr>* handles)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // SurveyDomains where every domain needs a virDomainMemoryStats of its own (no bulk call, or
  // bulk records without balloon fields: the test driver): the domains listed, then each one's
  // stats read through the handle the listing holds, in one pass under one lock. It answers what
  // ListActiveDomains + GetBalloonStats(their uuids) would, without GetBalloonStats' map of the
  // wanted uuids and a lookup of each domain in `listed` (a hash of 10,000 uuids each, a tick).
  // nullopt where the bulk call is still worth making (GetBalloonStats would use it).
  std::optional<absl::StatusOr<DomainSurvey>> DomainByDomainSurvey();
  // One virConnectGetAllDomainStats(groups) for the active domains, NOWAIT where the driver
  // takes it. UNIMPLEMENTED (remembered: bulk_supported) where the driver has no bulk call.
  absl::StatusOr<int> BulkStatsLocked(unsigned int groups, virDomainStatsRecordPtr** raw)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // SurveyDomains in one bulk call of the STATE and BALLOON groups (and BLOCK when
  // `with_block`); nullopt where the driver cannot answer it that way (no bulk call, no balloon
  // fields, a record without its state or balloon size), and the caller lists the domains and
  // reads their stats instead.
  std::optional<absl::StatusOr<DomainSurvey>> BulkSurvey(bool with_block);
  // The listed domain's DomainInfo::free_page_reporting: what its live XML said when this run of
  // the domain was read (virDomainGetXMLDesc, once per domain start), or nullopt while not known:
  // the read failed (tried again after a backoff), said nothing clear, or has not been made yet
  // (a listing makes at most so many reads; balloon_device_reads.h). A listing calls
  // balloon_devices.BeginListing() first.
  std::optional<bool> FreePageReportingLocked(virDomainPtr dom, const std::string& uuid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Forgets the balloon devices of domains the last listing (`listed`) left out.
  void ForgetUnlistedDevicesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { balloon_devices.KeepOnly(listed); }
  void Count(LibvirtCall call) { calls[static_cast<size_t>(call)].fetch_add(1, std::memory_order_relaxed); }

  const std::string uri;
  const ConnectionOpener opener;  // null: virConnectOpen
  const std::shared_ptr<EventSink> sink = std::make_shared<EventSink>();
  // Read by IsConnected() without the mutex, so a slow call never blocks it.
  ConnectionFlag flag;

  mutable absl::Mutex mu;
  virConnectPtr conn ABSL_GUARDED_BY(mu) = nullptr;
  bool loop_acquired ABSL_GUARDED_BY(mu) = false;
  bool close_callback_registered ABSL_GUARDED_BY(mu) = false;
  int lifecycle_callback_id ABSL_GUARDED_BY(mu) = -1;
  int balloon_callback_id ABSL_GUARDED_BY(mu) = -1;
  // Per-connection capability memo: drivers that reject NOWAIT or the bulk call
  // are asked only once per connection.
  bool bulk_nowait_ok ABSL_GUARDED_BY(mu) = true;
  bool bulk_supported ABSL_GUARDED_BY(mu) = true;
  // The bulk call answered with no balloon field in any record (the test driver
  // does): every domain then needs its own call anyway, so the bulk one is skipped.
  bool bulk_balloon_empty ABSL_GUARDED_BY(mu) = false;
  bool incomplete_logged ABSL_GUARDED_BY(mu) = false;
  // Calls made, by kind (LibvirtHypervisor::CallCounts).
  std::array<std::atomic<uint64_t>, kNumLibvirtCalls> calls{};
  // virDomainGetJobInfo answered VIR_ERR_NO_SUPPORT (the test driver): not asked again.
  bool job_info_supported ABSL_GUARDED_BY(mu) = true;
  // virDomainQemuMonitorCommand answered VIR_ERR_NO_SUPPORT (a driver without QEMU): not asked again.
  bool qemu_monitor_supported ABSL_GUARDED_BY(mu) = true;
  // The domains of the last ListActiveDomains, by lowercase uuid. Stats, targets
  // and periods use them instead of a lookup per call (an RPC to libvirtd). A
  // domain that stopped since fails its call as a vanished one would. Freed
  // before the connection is closed.
  absl::flat_hash_map<std::string, DomainPtr> listed ABSL_GUARDED_BY(mu);
  // What each listed domain's live XML said of its balloon (FreePageReportingLocked), for the run
  // of the domain it was read from, and when to read the others. Emptied with a new connection
  // (the libvirtd may be another).
  BalloonDeviceReads balloon_devices ABSL_GUARDED_BY(mu);
};

absl::Status LibvirtHypervisor::Impl::Connect() {
  absl::MutexLock l(&mu);
  if (conn != nullptr && flag.up.load()) {
    if (virConnectIsAlive(conn) == 1) return absl::OkStatus();
    virResetLastError();
  }
  if (!loop_acquired) {
    // Must precede virConnectOpen: libvirt binds a connection's events and
    // keepalive to whatever event impl is registered when it opens.
    absl::Status s = EventLoop::Get().Acquire();
    if (!s.ok()) return s;
    loop_acquired = true;
  }
  CloseLocked();  // A lost connection still holds callbacks and memory.

  conn = opener ? opener(uri) : virConnectOpen(uri.empty() ? nullptr : uri.c_str());
  if (conn == nullptr) {
    LibvirtError e = TakeLastError();
    return MakeStatus(MapErrorCode(e.code, e.domain), absl::StrCat("virConnectOpen(\"", uri, "\")"), e);
  }
  bulk_nowait_ok = true;
  bulk_supported = true;
  bulk_balloon_empty = false;
  job_info_supported = true;
  qemu_monitor_supported = true;
  balloon_devices.Clear();

  // Without keepalive a dead libvirtd is noticed only at the next call; local
  // drivers (test, or qemu:///system opened in-process) do not support it.
  if (virConnectSetKeepAlive(conn, 5, 3) < 0) {
    LibvirtError e = TakeLastError();
    PLOG_INFO << "libvirt keepalive not enabled uri=" << uri << " reason=\"" << e.message << "\"";
  }
  // Drivers without close notification accept the registration and never call it.
  if (virConnectRegisterCloseCallback(conn, &OnConnectionClosed, &flag, nullptr) == 0) {
    close_callback_registered = true;
  } else {
    LibvirtError e = TakeLastError();
    PLOG_WARNING << "libvirt close callback not registered uri=" << uri << " reason=\"" << e.message
                 << "\"";
  }

  auto* lifecycle_ref = new SinkRef(sink);
  lifecycle_callback_id = virConnectDomainEventRegisterAny(
      conn, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(&OnLifecycleEvent),
      lifecycle_ref, &FreeSinkRef);
  if (lifecycle_callback_id < 0) {
    delete lifecycle_ref;  // libvirt does not call the free callback on failure.
    LibvirtError e = TakeLastError();
    CloseLocked();
    return MakeStatus(MapErrorCode(e.code, e.domain), "register lifecycle events", e);
  }
  auto* balloon_ref = new SinkRef(sink);
  balloon_callback_id = virConnectDomainEventRegisterAny(
      conn, nullptr, VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE,
      VIR_DOMAIN_EVENT_CALLBACK(&OnBalloonChangeEvent), balloon_ref, &FreeSinkRef);
  if (balloon_callback_id < 0) {
    delete balloon_ref;
    LibvirtError e = TakeLastError();
    CloseLocked();
    return MakeStatus(MapErrorCode(e.code, e.domain), "register balloon-change events", e);
  }

  flag.up.store(true);
  PLOG_INFO << "libvirt connected uri=" << uri;
  return absl::OkStatus();
}

void LibvirtHypervisor::Impl::CloseLocked() {
  listed.clear();  // each holds a reference to the connection
  if (conn == nullptr) return;
  // Failures here (typically RPC errors on a dead connection) change nothing:
  // virConnectClose below frees whatever is left.
  if (lifecycle_callback_id >= 0) {
    virConnectDomainEventDeregisterAny(conn, lifecycle_callback_id);
    lifecycle_callback_id = -1;
  }
  if (balloon_callback_id >= 0) {
    virConnectDomainEventDeregisterAny(conn, balloon_callback_id);
    balloon_callback_id = -1;
  }
  if (close_callback_registered) {
    virConnectUnregisterCloseCallback(conn, &OnConnectionClosed);
    close_callback_registered = false;
  }
  flag.up.store(false);
  const int refs = virConnectClose(conn);
  if (refs > 0) {
    // Normal while the event thread is delivering an event of this connection
    // (the dispatch holds a reference and frees the connection when done). If
    // it shows up on every close, look for a virDomainPtr that was not freed.
    PLOG_INFO << "libvirt connection still referenced after close uri=" << uri << " refs=" << refs;
  }
  virResetLastError();
  conn = nullptr;
}

absl::Status LibvirtHypervisor::Impl::CheckConnectedLocked() const {
  if (conn == nullptr || !flag.up.load()) {
    return absl::UnavailableError(absl::StrCat("not connected to libvirt uri=\"", uri, "\""));
  }
  return absl::OkStatus();
}

absl::Status LibvirtHypervisor::Impl::FailLocked(absl::string_view what) {
  return FailedLocked(what, TakeLastError());
}

absl::Status LibvirtHypervisor::Impl::FailedLocked(absl::string_view what, const LibvirtError& e) {
  bool lost = IsConnectionError(e.code, e.domain);
  // The remote driver reports calls on a dead socket as internal errors
  // ("client socket is closed"); its liveness check is local, no RPC.
  if (!lost && conn != nullptr && virConnectIsAlive(conn) == 0) lost = true;
  virResetLastError();
  if (lost) {
    if (flag.up.exchange(false)) {
      PLOG_WARNING << "libvirt connection marked lost uri=" << uri << " after=\"" << what
                   << "\" error=\"" << e.message << "\"";
    }
    return MakeStatus(absl::StatusCode::kUnavailable, what, e);
  }
  return MakeStatus(MapErrorCode(e.code, e.domain), what, e);
}

absl::StatusOr<DomainPtr> LibvirtHypervisor::Impl::LookupLocked(const std::string& uuid,
                                                                absl::string_view what) {
  Count(LibvirtCall::kLookup);
  virDomainPtr dom = virDomainLookupByUUIDString(conn, uuid.c_str());
  if (dom == nullptr) return FailLocked(absl::StrCat(what, " uuid=", uuid));
  return DomainPtr(dom);
}

absl::StatusOr<DomainPtr> LibvirtHypervisor::Impl::OwnDomainLocked(const std::string& uuid,
                                                                  absl::string_view what) {
  auto it = listed.find(uuid);
  if (it == listed.end()) it = listed.find(absl::AsciiStrToLower(uuid));
  if (it != listed.end()) {
    if (virDomainRef(it->second.get()) < 0) return FailLocked(absl::StrCat(what, " uuid=", uuid));
    return DomainPtr(it->second.get());
  }
  return LookupLocked(uuid, what);
}

absl::Status LibvirtHypervisor::Impl::CallUnlocked(const std::string& uuid, absl::string_view what,
                                                   const std::function<int(virDomainPtr)>& call) {
  DomainPtr dom;
  {
    absl::MutexLock l(&mu);
    if (absl::Status s = CheckConnectedLocked(); !s.ok()) return s;
    absl::StatusOr<DomainPtr> owned = OwnDomainLocked(uuid, what);
    if (!owned.ok()) return owned.status();
    dom = std::move(*owned);
  }
  if (call(dom.get()) >= 0) return absl::OkStatus();
  LibvirtError e = TakeLastError();
  absl::MutexLock l(&mu);
  return FailedLocked(what, e);
}

absl::StatusOr<virDomainPtr> LibvirtHypervisor::Impl::DomainLocked(const std::string& uuid, absl::string_view what,
                                                                 DomainPtr* holder) {
  auto it = listed.find(uuid);
  if (it == listed.end()) it = listed.find(absl::AsciiStrToLower(uuid));
  if (it != listed.end()) return it->second.get();
  absl::StatusOr<DomainPtr> dom = LookupLocked(uuid, what);
  if (!dom.ok()) return dom.status();
  *holder = std::move(*dom);
  return holder->get();
}

absl::StatusOr<std::vector<DomainInfo>> LibvirtHypervisor::Impl::ListActiveDomains() {
  absl::MutexLock l(&mu);
  if (absl::Status s = CheckConnectedLocked(); !s.ok()) return s;
  return ListActiveDomainsLocked(nullptr);
}

absl::StatusOr<std::vector<DomainInfo>> LibvirtHypervisor::Impl::ListActiveDomainsLocked(
    std::vector<virDomainPtr>* handles) {
  virDomainPtr* raw = nullptr;
  Count(LibvirtCall::kListAllDomains);
  const int n = virConnectListAllDomains(conn, &raw, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (n < 0) return FailLocked("virConnectListAllDomains");
  std::vector<DomainPtr> doms;
  doms.reserve(n);
  for (int i = 0; i < n; ++i) doms.emplace_back(raw[i]);
  free(raw);

  std::vector<DomainInfo> out;
  out.reserve(n);
  balloon_devices.BeginListing();
  // `listed` is updated in place: a domain still running keeps its entry (and its uuid key, not
  // copied and freed again each listing) with the new handle. Afterwards, it holds exactly the
  // domains of `out`: those left out are dropped (rare: one set of the uuids then).
  listed.reserve(n);  // one allocation, not a rehash of every domain each time the map doubles
  auto forget_unlisted = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (listed.size() == out.size()) return;
    absl::flat_hash_set<absl::string_view> now_listed;
    now_listed.reserve(out.size());
    for (const DomainInfo& d : out) now_listed.insert(d.uuid);
    absl::erase_if(listed, [&](const auto& entry) { return !now_listed.contains(entry.first); });
  };
  for (DomainPtr& dom : doms) {
    DomainInfo d;
    d.name = DomainName(dom.get());
    d.uuid = DomainUuid(dom.get());
    virDomainInfo info;
    Count(LibvirtCall::kGetInfo);
    if (virDomainGetInfo(dom.get(), &info) < 0) {
      absl::Status s = FailLocked(absl::StrCat("virDomainGetInfo uuid=", d.uuid));
      if (absl::IsUnavailable(s)) {
        forget_unlisted();
        return s;
      }
      // NOT_FOUND / FAILED_PRECONDITION: the domain went away since the list.
      if (!absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) {
        PLOG_WARNING << "skipping domain uuid=" << d.uuid << " name=" << d.name << " error=\""
                     << s.message() << "\"";
      }
      continue;
    }
    d.state = RunStateOf(info.state);
    const std::optional<int64_t> max_bytes = KiBToBytes(info.maxMem);
    const std::optional<int64_t> current_bytes = KiBToBytes(info.memory);
    if (!max_bytes.has_value() || !current_bytes.has_value()) {
      PLOG_WARNING << "skipping domain uuid=" << d.uuid << " name=" << d.name << ": sizes out of range maxMem="
                   << info.maxMem << "KiB memory=" << info.memory << "KiB";
      continue;
    }
    d.max_bytes = *max_bytes;
    d.current_bytes = *current_bytes;
    d.free_page_reporting = FreePageReportingLocked(dom.get(), d.uuid);
    if (handles != nullptr) handles->push_back(dom.get());
    listed[d.uuid] = std::move(dom);
    out.push_back(std::move(d));
  }
  forget_unlisted();
  ForgetUnlistedDevicesLocked();
  return out;
}

std::optional<absl::StatusOr<DomainSurvey>> LibvirtHypervisor::Impl::DomainByDomainSurvey() {
  absl::MutexLock l(&mu);
  if (absl::Status s = CheckConnectedLocked(); !s.ok()) return absl::StatusOr<DomainSurvey>(s);
  if (bulk_supported && !bulk_balloon_empty) return std::nullopt;
  std::vector<virDomainPtr> handles;
  absl::StatusOr<std::vector<DomainInfo>> domains = ListActiveDomainsLocked(&handles);
  if (!domains.ok()) return absl::StatusOr<DomainSurvey>(domains.status());
  DomainSurvey out;
  out.domains = *std::move(domains);
  // A listing may have lost the connection (a failed call in it): the stats fail as
  // GetBalloonStats' would, with the domains listed.
  if (absl::Status s = CheckConnectedLocked(); !s.ok()) {
    out.stats_status = s;
    return absl::StatusOr<DomainSurvey>(std::move(out));
  }
  out.stats.reserve(out.domains.size());
  // `listed` holds exactly the listed uuids: fewer entries than domains means the listing named a
  // domain twice, and the second replaced the first's handle. libvirt lists each domain once, so
  // this only guards: such a listing reads every domain through `listed`. (A reference of our own
  // to each domain instead cost about a tenth of a 10,000-guest tick on the test driver.)
  const bool named_twice = listed.size() != out.domains.size();
  for (size_t i = 0; i < out.domains.size(); ++i) {
    virDomainPtr dom = named_twice ? listed.find(out.domains[i].uuid)->second.get() : handles[i];
    absl::StatusOr<std::optional<BalloonStats>> one = MemoryStatsLocked(dom, out.domains[i].uuid);
    if (!one.ok()) {  // the connection is lost: no stats this tick, as GetBalloonStats says
      out.stats.clear();
      out.stats_status = one.status();
      break;
    }
    if (one->has_value()) out.stats.emplace(out.domains[i].uuid, **one);
  }
  return absl::StatusOr<DomainSurvey>(std::move(out));
}

std::optional<bool> LibvirtHypervisor::Impl::FreePageReportingLocked(virDomainPtr dom, const std::string& uuid) {
  const unsigned int id = virDomainGetID(dom);  // no call to libvirtd: the handle holds it
  const BalloonDeviceReads::Plan plan = balloon_devices.Next(uuid, id);
  if (!plan.read) return plan.known;
  if (!flag.up.load()) return std::nullopt;  // lost during this listing: no call can succeed
  // The live XML: the device as QEMU runs it.
  Count(LibvirtCall::kGetXml);
  char* text = virDomainGetXMLDesc(dom, 0);
  if (text == nullptr) {
    const absl::Status s = FailLocked(absl::StrCat("virDomainGetXMLDesc uuid=", uuid));
    bool first = false;
    const int wait = balloon_devices.Failed(uuid, id, &first);
    // Not found or not running: the domain went away since the list, and leaves the next one.
    if (first && !absl::IsUnavailable(s) && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) {
      PLOG_WARNING << "cannot read the balloon device of uuid=" << uuid << ", free page reporting unknown until "
                   << "a listing reads it (tried again in " << wait << " listing(s), then less often): "
                   << s.message();
    }
    return std::nullopt;
  }
  const std::optional<bool> reporting = ParseFreePageReporting(text);
  free(text);
  balloon_devices.Read(uuid, id, reporting);
  return reporting;
}

absl::StatusOr<std::optional<BalloonStats>> LibvirtHypervisor::Impl::MemoryStatsLocked(
    virDomainPtr dom, absl::string_view uuid) {
  virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR];
  Count(LibvirtCall::kMemoryStats);
  const int n = virDomainMemoryStats(dom, stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);
  if (n < 0) {
    absl::Status s = FailLocked(absl::StrCat("virDomainMemoryStats uuid=", uuid));
    if (absl::IsUnavailable(s)) return s;
    if (!absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) {
      PLOG_WARNING << "no balloon stats uuid=" << uuid << " error=\"" << s.message() << "\"";
    }
    return std::optional<BalloonStats>();
  }
  BalloonStats out;
  for (int i = 0; i < n; ++i) StoreMemoryStat(stats[i].tag, stats[i].val, &out);
  return std::optional<BalloonStats>(out);
}

absl::StatusOr<int> LibvirtHypervisor::Impl::BulkStatsLocked(unsigned int groups, virDomainStatsRecordPtr** raw) {
  // NOWAIT: a domain busy with another job reports what it can without blocking the whole
  // tick (its state and current/maximum, no guest stats).
  unsigned int flags = VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE;
  if (bulk_nowait_ok) flags |= VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT;
  Count(LibvirtCall::kGetAllDomainStats);
  int n = virConnectGetAllDomainStats(conn, groups, raw, flags);
  if (n < 0 && bulk_nowait_ok) {
    // Drivers that predate NOWAIT (or ignore it) reject the flag: retry once without it and
    // remember for this connection.
    virErrorPtr e = virGetLastError();
    const absl::StatusCode code =
        MapErrorCode(e != nullptr ? e->code : VIR_ERR_OK, e != nullptr ? e->domain : VIR_FROM_NONE);
    if (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented) {
      virResetLastError();
      bulk_nowait_ok = false;
      flags &= ~static_cast<unsigned int>(VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
      Count(LibvirtCall::kGetAllDomainStats);
      n = virConnectGetAllDomainStats(conn, groups, raw, flags);
    }
  }
  if (n >= 0) return n;
  absl::Status s = FailLocked("virConnectGetAllDomainStats");
  if (absl::IsUnimplemented(s)) {
    bulk_supported = false;
    PLOG_INFO << "bulk domain stats unsupported, using per-domain calls uri=" << uri;
  }
  return s;
}

std::optional<absl::StatusOr<DomainSurvey>> LibvirtHypervisor::Impl::BulkSurvey(bool with_block) {
  absl::MutexLock l(&mu);
  if (absl::Status s = CheckConnectedLocked(); !s.ok()) return absl::StatusOr<DomainSurvey>(s);
  if (!bulk_supported || bulk_balloon_empty) return std::nullopt;
  virDomainStatsRecordPtr* raw = nullptr;
  unsigned int groups = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_BALLOON;
  if (with_block) groups |= VIR_DOMAIN_STATS_BLOCK;
  absl::StatusOr<int> n = BulkStatsLocked(groups, &raw);
  if (!n.ok()) {
    if (absl::IsUnimplemented(n.status())) return std::nullopt;
    return absl::StatusOr<DomainSurvey>(n.status());
  }
  std::unique_ptr<virDomainStatsRecordPtr, StatsRecordsDeleter> records(raw);
  DomainSurvey out;
  out.block_stats_read = with_block;
  out.domains.reserve(*n);
  absl::flat_hash_map<std::string, DomainPtr> doms;
  int with_balloon = 0;
  std::string incomplete;  // the uuid of a record that lacks its state or balloon size
  std::vector<StatField> fields;
  balloon_devices.BeginListing();
  for (int i = 0; i < *n; ++i) {
    const virDomainStatsRecord& record = *raw[i];
    const BulkRecord parsed = ParseRecord(record, &fields);
    DomainInfo d;
    if (!FillDomainInfo(parsed, record.dom, &d) && incomplete.empty()) incomplete = d.uuid;
    d.free_page_reporting = FreePageReportingLocked(record.dom, d.uuid);
    if (parsed.balloon_fields > 0) {
      ++with_balloon;
      BalloonStats stats = parsed.stats;
      if (!with_block) {  // not asked for, so not in the record; never stale ones either
        stats.disk_read_bytes.reset();
        stats.disk_read_requests.reset();
      }
      out.stats.emplace(d.uuid, stats);
    }
    // The record's handle is freed with the records: the listed map keeps its own reference.
    if (virDomainRef(record.dom) == 0) doms.insert_or_assign(d.uuid, DomainPtr(record.dom));
    out.domains.push_back(std::move(d));
  }
  if (*n > 0 && with_balloon == 0) {
    // The test driver: every domain needs calls of its own anyway (GetBalloonStats says so too).
    bulk_balloon_empty = true;
    PLOG_INFO << "bulk domain stats carry no balloon fields, using per-domain calls uri=" << uri;
    return std::nullopt;
  }
  if (!incomplete.empty()) {
    // Not what ListActiveDomains would say about that domain: this tick is read the old way.
    if (!incomplete_logged) {
      PLOG_INFO << "bulk domain stats lack the state or balloon size of uuid=" << incomplete
                << ", listing domains one by one instead uri=" << uri;
      incomplete_logged = true;
    }
    return std::nullopt;
  }
  listed = std::move(doms);
  ForgetUnlistedDevicesLocked();
  return absl::StatusOr<DomainSurvey>(std::move(out));
}

absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>>
LibvirtHypervisor::Impl::GetBalloonStats(const std::vector<std::string>& uuids) {
  absl::MutexLock l(&mu);
  if (absl::Status s = CheckConnectedLocked(); !s.ok()) return s;
  absl::flat_hash_map<std::string, BalloonStats> out;
  if (uuids.empty()) return out;
  // libvirt prints lowercase uuids; callers' spelling is kept for the result keys. Keys view the
  // callers' strings, or a lowercase copy kept in `lowered` (a deque: its strings never move).
  // Sized once: 10,000 guests made each map rehash a dozen times a tick.
  out.reserve(uuids.size());
  std::deque<std::string> lowered;
  absl::flat_hash_map<absl::string_view, const std::string*> wanted;
  wanted.reserve(uuids.size());
  for (const std::string& u : uuids) {
    if (std::any_of(u.begin(), u.end(), absl::ascii_isupper)) {
      wanted.emplace(lowered.emplace_back(absl::AsciiStrToLower(u)), &u);
    } else {
      wanted.emplace(u, &u);
    }
  }

  if (bulk_supported && !bulk_balloon_empty) {
    virDomainStatsRecordPtr* raw = nullptr;
    absl::StatusOr<int> bulk = BulkStatsLocked(VIR_DOMAIN_STATS_BALLOON | VIR_DOMAIN_STATS_BLOCK, &raw);
    if (!bulk.ok() && !absl::IsUnimplemented(bulk.status())) return bulk.status();
    if (bulk.ok()) {  // else: fall through to per-domain calls below
      const int n = *bulk;
      std::unique_ptr<virDomainStatsRecordPtr, StatsRecordsDeleter> records(raw);
      int with_balloon = 0;
      std::vector<StatField> fields;
      for (int i = 0; i < n; ++i) {
        const virDomainStatsRecord& record = *raw[i];
        auto it = wanted.find(DomainUuid(record.dom));
        if (it == wanted.end()) continue;
        const BulkRecord parsed = ParseRecord(record, &fields);
        BalloonStats stats = parsed.stats;
        if (parsed.balloon_fields > 0) {
          ++with_balloon;
        } else {
          // An empty balloon record (the test driver): ask this domain directly, and keep the
          // record's disk reads.
          absl::StatusOr<std::optional<BalloonStats>> one =
              MemoryStatsLocked(record.dom, it->first);
          if (!one.ok()) return one.status();
          if (!one->has_value()) continue;
          stats = **one;
          stats.disk_read_bytes = parsed.stats.disk_read_bytes;
          stats.disk_read_requests = parsed.stats.disk_read_requests;
        }
        out.emplace(*it->second, stats);
      }
      if (n > 0 && with_balloon == 0) {
        bulk_balloon_empty = true;
        PLOG_INFO << "bulk domain stats carry no balloon fields, using per-domain calls uri=" << uri;
      }
      return out;
    }
  }

  for (const auto& [lower, original] : wanted) {
    DomainPtr holder;
    // The listed domain when it is there (looked up by the view, no copy of the uuid).
    auto it = listed.find(lower);
    absl::StatusOr<virDomainPtr> dom =
        it != listed.end() ? it->second.get()
                           : DomainLocked(std::string(lower), "virDomainLookupByUUIDString", &holder);
    if (!dom.ok()) {
      if (absl::IsUnavailable(dom.status())) return dom.status();
      continue;  // Unknown or vanished: simply missing.
    }
    absl::StatusOr<std::optional<BalloonStats>> one = MemoryStatsLocked(*dom, lower);
    if (!one.ok()) return one.status();
    if (one->has_value()) out.emplace(*original, **one);
  }
  return out;
}

// ---------------------------------------------------------------------------
// LibvirtHypervisor

LibvirtHypervisor::LibvirtHypervisor(std::string uri, ConnectionOpener opener, BalloonDeviceReadLimits xml_reads)
    : impl_(std::make_unique<Impl>(std::move(uri), std::move(opener), xml_reads)) {}

LibvirtHypervisor::~LibvirtHypervisor() = default;

const std::string& LibvirtHypervisor::uri() const { return impl_->uri; }

absl::Status LibvirtHypervisor::Connect() { return impl_->Connect(); }

bool LibvirtHypervisor::IsConnected() const { return impl_->flag.up.load(); }

absl::StatusOr<std::vector<DomainInfo>> LibvirtHypervisor::ListActiveDomains() {
  return impl_->ListActiveDomains();
}

absl::StatusOr<absl::flat_hash_map<std::string, BalloonStats>> LibvirtHypervisor::GetBalloonStats(
    const std::vector<std::string>& uuids) {
  return impl_->GetBalloonStats(uuids);
}

absl::StatusOr<DomainSurvey> LibvirtHypervisor::SurveyDomains(bool with_block_stats) {
  if (std::optional<absl::StatusOr<DomainSurvey>> bulk = impl_->BulkSurvey(with_block_stats)) {
    return *std::move(bulk);
  }
  if (std::optional<absl::StatusOr<DomainSurvey>> each = impl_->DomainByDomainSurvey()) {
    return *std::move(each);
  }
  // A real QEMU survey with a record lacking its state or size lands here. GetBalloonStats reads
  // the disks wherever it can: that tick's second bulk call reads them whatever was asked, and
  // the survey's reads are current.
  return Hypervisor::SurveyDomains(with_block_stats);
}

const char* LibvirtCallName(LibvirtCall call) {
  switch (call) {
    case LibvirtCall::kGetAllDomainStats:
      return "virConnectGetAllDomainStats";
    case LibvirtCall::kListAllDomains:
      return "virConnectListAllDomains";
    case LibvirtCall::kGetInfo:
      return "virDomainGetInfo";
    case LibvirtCall::kMemoryStats:
      return "virDomainMemoryStats";
    case LibvirtCall::kLookup:
      return "virDomainLookupByUUIDString";
    case LibvirtCall::kSetMemory:
      return "virDomainSetMemoryFlags";
    case LibvirtCall::kSetStatsPeriod:
      return "virDomainSetMemoryStatsPeriod";
    case LibvirtCall::kGetJobInfo:
      return "virDomainGetJobInfo";
    case LibvirtCall::kGetXml:
      return "virDomainGetXMLDesc";
    case LibvirtCall::kQemuMonitor:
      return "virDomainQemuMonitorCommand";
    case LibvirtCall::kAttachDevice:
      return "virDomainAttachDeviceFlags";
  }
  return "unknown";
}

std::vector<std::pair<std::string, uint64_t>> LibvirtHypervisor::CallCounts() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(kNumLibvirtCalls);
  for (size_t i = 0; i < kNumLibvirtCalls; ++i) {
    out.emplace_back(LibvirtCallName(static_cast<LibvirtCall>(i)), impl_->calls[i].load(std::memory_order_relaxed));
  }
  return out;
}

absl::Status LibvirtHypervisor::EnableStats(const std::string& uuid, int period_seconds) {
  if (period_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("EnableStats uuid=", uuid, ": negative period ", period_seconds));
  }
  return impl_->CallUnlocked(
      uuid, absl::StrCat("virDomainSetMemoryStatsPeriod uuid=", uuid, " period_s=", period_seconds),
      [impl = impl_.get(), period_seconds](virDomainPtr dom) {
        impl->Count(LibvirtCall::kSetStatsPeriod);
        return virDomainSetMemoryStatsPeriod(dom, period_seconds, VIR_DOMAIN_AFFECT_LIVE);
      });
}

absl::Status LibvirtHypervisor::SetBalloonTarget(const std::string& uuid, int64_t bytes) {
  // libvirt treats 0 KiB as an invalid argument too; saying so here is clearer.
  if (bytes < kKiB) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetBalloonTarget uuid=", uuid, ": target ", bytes, " bytes is below 1 KiB"));
  }
  const unsigned long kib = static_cast<unsigned long>(bytes / kKiB);
  return impl_->CallUnlocked(uuid, absl::StrCat("virDomainSetMemoryFlags uuid=", uuid, " target_kib=", kib),
                             [impl = impl_.get(), kib](virDomainPtr dom) {
                               impl->Count(LibvirtCall::kSetMemory);
                               return virDomainSetMemoryFlags(dom, kib, VIR_DOMAIN_AFFECT_LIVE);
                             });
}

absl::StatusOr<std::string> LibvirtHypervisor::ActiveJob(const std::string& uuid) {
  {
    absl::MutexLock l(&impl_->mu);
    if (!impl_->job_info_supported) {
      return absl::UnimplementedError(
          absl::StrCat("virDomainGetJobInfo uuid=", uuid, ": unsupported by this connection's driver, not asked again"));
    }
  }
  virDomainJobInfo info{};
  absl::Status s = impl_->CallUnlocked(uuid, absl::StrCat("virDomainGetJobInfo uuid=", uuid),
                                       [impl = impl_.get(), &info](virDomainPtr dom) {
                                         impl->Count(LibvirtCall::kGetJobInfo);
                                         return virDomainGetJobInfo(dom, &info);
                                       });
  if (absl::IsUnimplemented(s)) {
    absl::MutexLock l(&impl_->mu);
    impl_->job_info_supported = false;
  }
  if (!s.ok()) return s;
  switch (info.type) {
    case VIR_DOMAIN_JOB_NONE:
    case VIR_DOMAIN_JOB_COMPLETED:
    case VIR_DOMAIN_JOB_FAILED:
    case VIR_DOMAIN_JOB_CANCELLED:
      return std::string();
    default:
      return absl::StrCat(info.type == VIR_DOMAIN_JOB_BOUNDED ? "bounded" : "unbounded", " job running for ",
                          info.timeElapsed / 1000, ".", info.timeElapsed % 1000 / 100, "s");
  }
}

absl::StatusOr<BalloonPressure> LibvirtHypervisor::ReadBalloonPressure(const std::string& uuid) {
  {
    absl::MutexLock l(&impl_->mu);
    if (!impl_->qemu_monitor_supported) {
      return absl::UnimplementedError(absl::StrCat("virDomainQemuMonitorCommand uuid=", uuid,
                                                   ": unsupported by this connection's driver, not asked again"));
    }
  }
  char* reply = nullptr;
  absl::Status s = impl_->CallUnlocked(uuid, absl::StrCat("virDomainQemuMonitorCommand(guest-stats) uuid=", uuid),
                                       [impl = impl_.get(), &reply](virDomainPtr dom) {
                                         impl->Count(LibvirtCall::kQemuMonitor);
                                         return virDomainQemuMonitorCommand(dom, kQemuGuestStatsCommand, &reply, 0);
                                       });
  std::unique_ptr<char, decltype(&free)> owned(reply, &free);
  if (absl::IsUnimplemented(s)) {
    absl::MutexLock l(&impl_->mu);
    impl_->qemu_monitor_supported = false;
  }
  if (!s.ok()) return s;
  if (reply == nullptr) return absl::InternalError("virDomainQemuMonitorCommand answered no reply");
  return ParseQemuGuestStats(reply);
}

void LibvirtHypervisor::SetEventCallback(std::function<void(const DomainEvent&)> callback) {
  impl_->sink->Set(std::move(callback));
}

absl::StatusOr<AgentChannelInfo> LibvirtHypervisor::GetAgentChannel(const std::string& uuid, const std::string& name) {
  std::string xml;
  {
    absl::MutexLock l(&impl_->mu);
    if (absl::Status s = impl_->CheckConnectedLocked(); !s.ok()) return s;
    DomainPtr holder;
    absl::StatusOr<virDomainPtr> dom = impl_->DomainLocked(uuid, "GetAgentChannel", &holder);
    if (!dom.ok()) return dom.status();
    // The live XML: it names the socket path libvirt chose when the channel has none of its own.
    impl_->Count(LibvirtCall::kGetXml);
    char* text = virDomainGetXMLDesc(*dom, 0);
    if (text == nullptr) return impl_->FailLocked(absl::StrCat("virDomainGetXMLDesc uuid=", uuid));
    xml = text;
    free(text);
  }
  return ParseAgentChannel(xml, name);
}

absl::Status LibvirtHypervisor::AttachAgentChannel(const std::string& uuid, const std::string& name,
                                                   const std::string& socket_path) {
  const std::string device = AgentChannelDeviceXml(name, socket_path);
  absl::MutexLock l(&impl_->mu);
  if (absl::Status s = impl_->CheckConnectedLocked(); !s.ok()) return s;
  DomainPtr holder;
  absl::StatusOr<virDomainPtr> dom = impl_->DomainLocked(uuid, "AttachAgentChannel", &holder);
  if (!dom.ok()) return dom.status();
  impl_->Count(LibvirtCall::kAttachDevice);
  if (virDomainAttachDeviceFlags(*dom, device.c_str(), VIR_DOMAIN_AFFECT_LIVE) < 0) {
    absl::Status s = impl_->FailLocked(absl::StrCat("virDomainAttachDeviceFlags uuid=", uuid, " channel=", name));
    // libvirt adds the controller a channel needs, and a controller cannot be hot-plugged.
    if (absl::StrContains(s.message(), "cannot be hot plugged")) return absl::FailedPreconditionError(s.message());
    return s;
  }
  return absl::OkStatus();
}

}  // namespace plimsoll::hypervisor
