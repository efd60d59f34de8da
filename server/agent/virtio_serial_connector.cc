#include "server/agent/virtio_serial_connector.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace plimsoll::server::agent {

struct VirtioSerialConnector::Domain {
  std::string uuid;
  std::string name;
  std::string socket_path;
  std::string state = "connecting";
  std::string problem;
  uint64_t link = 0;        // pump link id; 0: not connected
  uint64_t generation = 0;  // of the current or last link's binding
  int grpc_fd = -1;         // the descriptor gRPC has of the current or last link
  absl::Time connected_at = absl::InfinitePast();
  absl::Time next_attempt = absl::InfinitePast();
  int failures = 0;
  int attach_failures = 0;  // consecutive failed hot-plugs
  bool no_controller_counted = false;
  std::string log_key;
};

VirtioSerialConnector::VirtioSerialConnector(hypervisor::Hypervisor* hypervisor, AgentStore* store, Clock* clock,
                                             ConnectionSink* sink, VirtioSerialOptions options)
    : hypervisor_(hypervisor),
      store_(store),
      clock_(clock),
      sink_(sink),
      options_(std::move(options)),
      lister_(hypervisor, "agent channels") {}

absl::StatusOr<std::unique_ptr<VirtioSerialConnector>> VirtioSerialConnector::Start(
    hypervisor::Hypervisor* hypervisor, AgentStore* store, Clock* clock, ConnectionSink* sink,
    VirtioSerialOptions options) {
  if (options.channel_name.empty()) return absl::InvalidArgumentError("agent channels: empty channel name");
  std::unique_ptr<VirtioSerialConnector> c(
      new VirtioSerialConnector(hypervisor, store, clock, sink, std::move(options)));
  absl::StatusOr<std::unique_ptr<ChannelPump>> pump = ChannelPump::Start(clock);
  if (!pump.ok()) return pump.status();
  c->pump_ = *std::move(pump);
  if (c->options_.autoattach && !c->options_.socket_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c->options_.socket_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("agent.channel_socket_dir: cannot create ", c->options_.socket_dir, ": ", ec.message()));
    }
  }
  c->manager_ = std::thread([self = c.get()] { self->ManagerLoop(); });
  PLOG_INFO << "agent channels on: name=" << c->options_.channel_name
            << " autoattach=" << (c->options_.autoattach ? "true" : "false") << " socket_dir="
            << (c->options_.socket_dir.empty() ? std::string("libvirt's") : c->options_.socket_dir)
            << " guest_bytes_per_second=" << c->options_.link.guest_bytes_per_second;
  return c;
}

VirtioSerialConnector::~VirtioSerialConnector() {
  Stop();
  pump_.reset();  // closes every channel socket: QEMU tells each guest the host end went away
}

void VirtioSerialConnector::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (manager_.joinable()) manager_.join();
}

void VirtioSerialConnector::Wake() {
  absl::MutexLock l(&mu_);
  wake_ = true;
}

VirtioSerialCounters VirtioSerialConnector::counters() const {
  VirtioSerialCounters c;
  {
    absl::MutexLock l(&mu_);
    c = counters_;
    c.connected = c.without_channel = c.without_controller = 0;
    for (const auto& [uuid, d] : domains_) {
      if (d->link != 0) ++c.connected;
      if (d->state == "no_channel" || d->state == "unusable" || d->state == "no_controller") ++c.without_channel;
      if (d->state == "no_controller") ++c.without_controller;
    }
  }
  if (pump_ != nullptr) c.pump = pump_->counters();
  return c;
}

std::vector<ChannelState> VirtioSerialConnector::channels() const {
  std::vector<ChannelState> out;
  absl::MutexLock l(&mu_);
  for (const auto& [uuid, d] : domains_) {
    out.push_back(ChannelState{d->uuid, d->name, d->socket_path, d->state, d->problem, d->failures});
  }
  std::sort(out.begin(), out.end(), [](const ChannelState& a, const ChannelState& b) { return a.uuid < b.uuid; });
  return out;
}

absl::Duration VirtioSerialConnector::BackoffLocked(int failures) const {
  absl::Duration d = options_.initial_backoff;
  for (int i = 1; i < failures && d < options_.max_backoff; ++i) d *= 2;
  return std::min(d, options_.max_backoff);
}

void VirtioSerialConnector::LogOnChangeLocked(Domain& d, const std::string& key, const std::string& line) {
  if (d.log_key == key) return;
  d.log_key = key;
  if (log_budget_.Take(clock_->Now())) PLOG_INFO << line;
}

void VirtioSerialConnector::ManagerLoop() {
  absl::Time next_scan = absl::InfinitePast();
  // After a failed listing, domains' retries wait for the next scan instead of spinning on it.
  absl::Time retry_floor = absl::InfinitePast();
  while (true) {
    bool scan = false;
    {
      absl::MutexLock l(&mu_);
      absl::Time until = next_scan;
      for (const auto& [uuid, d] : domains_) {
        if (d->link == 0 && d->next_attempt != absl::InfinitePast()) {
          until = std::min(until, std::max(d->next_attempt, retry_floor));
        }
      }
      const absl::Duration wait = std::max(absl::ZeroDuration(), until - clock_->Now());
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || wake_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
      if (stopping_) return;
      const absl::Time now = clock_->Now();
      scan = wake_ || now >= next_scan;
      for (const auto& [uuid, d] : domains_) {
        if (d->link == 0 && d->next_attempt != absl::InfinitePast() && std::max(d->next_attempt, retry_floor) <= now) {
          scan = true;
        }
      }
      wake_ = false;
    }
    if (scan) {
      // Not listed (libvirt not connected yet, e.g. right after the daemon started): soon again,
      // so the channels do not wait a whole rescan period after libvirt comes back.
      const bool listed = Scan();
      next_scan = clock_->Now() + (listed ? options_.rescan_every
                                          : std::min(options_.rescan_every, absl::Milliseconds(500)));
      retry_floor = listed ? absl::InfinitePast() : next_scan;
    }
  }
}

bool VirtioSerialConnector::Scan() {
  // Not listed: the loop reconnects libvirt; channels already connected keep working meanwhile.
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> listed = lister_.List();
  if (!listed.ok()) return false;
  absl::flat_hash_set<std::string> alive;
  for (const hypervisor::DomainInfo& d : *listed) alive.insert(d.uuid);
  {
    absl::MutexLock l(&mu_);
    for (auto it = domains_.begin(); it != domains_.end();) {
      if (alive.contains(it->first)) {
        ++it;
        continue;
      }
      Domain& d = *it->second;
      if (d.link != 0) {
        pump_->Remove(d.link);  // no on_end: accounted here
        ++counters_.ended_gone;
        sink_->Unbind(d.grpc_fd, d.generation);
        PLOG_INFO << "agent channel closed: domain stopped uuid=" << d.uuid << " domain=" << d.name;
      }
      domains_.erase(it++);
    }
  }
  // Paused domains too: their QEMU, and so the channel's socket, is there.
  for (const hypervisor::DomainInfo& d : *listed) Visit(d);
  // Each guest shows its own channel's problem (the store keeps none for domains gone).
  std::vector<std::pair<std::string, std::string>> problems;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [uuid, d] : domains_) {
      problems.emplace_back(uuid, d->state == "connected" || d->problem.empty()
                                      ? std::string()
                                      : absl::StrCat(d->state, ": ", d->problem));
    }
    for (const std::string& uuid : shown_problems_) {
      if (!domains_.contains(uuid)) problems.emplace_back(uuid, std::string());
    }
    shown_problems_.clear();
    for (const auto& [uuid, problem] : problems) {
      if (!problem.empty()) shown_problems_.insert(uuid);
    }
  }
  for (auto& [uuid, problem] : problems) store_->SetChannelProblem(uuid, std::move(problem));
  return true;
}

void VirtioSerialConnector::Visit(const hypervisor::DomainInfo& domain) {
  const std::string& uuid = domain.uuid;
  {
    absl::MutexLock l(&mu_);
    auto& slot = domains_[uuid];
    if (slot == nullptr) {
      slot = std::make_unique<Domain>();
      slot->uuid = uuid;
    }
    slot->name = domain.name;
    if (slot->link != 0) return;
    if (clock_->Now() < slot->next_attempt) return;
  }
  absl::StatusOr<hypervisor::AgentChannelInfo> info = hypervisor_->GetAgentChannel(uuid, options_.channel_name);
  absl::MutexLock l(&mu_);
  auto found = domains_.find(uuid);
  if (found == domains_.end()) return;
  Domain& d = *found->second;
  const absl::Time now = clock_->Now();
  if (!info.ok()) {
    if (absl::IsUnimplemented(info.status())) {
      if (!unsupported_logged_) PLOG_WARNING << "agent channels: " << info.status().message();
      unsupported_logged_ = true;
      d.state = "unusable";
      d.problem = std::string(info.status().message());
      d.next_attempt = now + options_.recheck_without_channel;
      return;
    }
    d.problem = absl::StrCat("reading the domain's XML: ", info.status().message());
    d.next_attempt = now + BackoffLocked(++d.failures);
    LogOnChangeLocked(d, "xml-error",
                      absl::StrCat("agent channel: cannot read the XML of uuid=", uuid, " domain=", d.name, ": ",
                                   info.status().message()));
    return;
  }
  if (!info->found) {
    auto no_controller = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      d.state = "no_controller";
      d.problem = "no virtio-serial controller, and libvirt cannot hot-plug one: add <controller "
                  "type='virtio-serial'/> to the domain's definition (docs/operations.md)";
      if (!d.no_controller_counted) ++counters_.attach_no_controller;
      d.no_controller_counted = true;
      d.next_attempt = now + options_.recheck_without_channel;
      LogOnChangeLocked(d, "no-controller",
                        absl::StrCat("agent channel cannot be attached: uuid=", uuid, " domain=", d.name,
                                     " reason=no_virtio_serial_controller"));
    };
    if (!options_.autoattach) {
      d.state = "no_channel";
      d.problem = absl::StrCat("no <channel> with target name ", options_.channel_name,
                               " in the domain's XML (agent.channel_autoattach is off)");
      d.next_attempt = now + options_.recheck_without_channel;
      LogOnChangeLocked(d, "no-channel",
                        absl::StrCat("agent channel: none in uuid=", uuid, " domain=", d.name, " name=",
                                     options_.channel_name, " (autoattach off)"));
      return;
    }
    if (!info->has_virtio_serial_controller) {
      no_controller();
      return;
    }
    const std::string path =
        options_.socket_dir.empty() ? std::string() : absl::StrCat(options_.socket_dir, "/", uuid, ".sock");
    mu_.Unlock();
    const absl::Status attached = hypervisor_->AttachAgentChannel(uuid, options_.channel_name, path);
    mu_.Lock();
    found = domains_.find(uuid);
    if (found == domains_.end()) return;
    Domain& e = *found->second;
    if (attached.ok()) {
      e.attach_failures = 0;
      ++counters_.attached;
      PLOG_INFO << "agent channel attached uuid=" << uuid << " domain=" << e.name << " name=" << options_.channel_name
                << " path=" << (path.empty() ? std::string("libvirt's choice") : path);
      e.state = "connecting";
      e.problem.clear();
      e.next_attempt = absl::InfinitePast();
      wake_ = true;  // connect in the next round, once the live XML names the socket
      return;
    }
    if (absl::IsFailedPrecondition(attached)) {
      no_controller();
      return;
    }
    ++counters_.attach_failed;
    absl::Duration retry = options_.attach_retry;
    for (int i = 0; i < e.attach_failures && retry < options_.attach_retry_max; ++i) retry *= 2;
    retry = std::min(retry, options_.attach_retry_max);
    ++e.attach_failures;
    e.state = "no_channel";
    e.problem = absl::StrCat("hot-plugging the channel failed (attempt ", e.attach_failures, ", next in ",
                             absl::FormatDuration(retry), "): ", attached.message());
    e.next_attempt = now + retry;
    LogOnChangeLocked(e, absl::StrCat("attach-failed:", attached.message()),
                      absl::StrCat("agent channel attach failed uuid=", uuid, " domain=", e.name,
                                   " retry_in=", absl::FormatDuration(retry), ": ", attached.message()));
    return;
  }
  if (info->socket_path.empty()) {
    d.state = "unusable";
    d.problem = info->problem;
    d.next_attempt = now + options_.recheck_without_channel;
    LogOnChangeLocked(d, absl::StrCat("unusable:", info->problem),
                      absl::StrCat("agent channel unusable uuid=", uuid, " domain=", d.name, ": ", info->problem));
    return;
  }
  d.socket_path = info->socket_path;
  const std::string name = d.name;
  const std::string path = d.socket_path;
  mu_.Unlock();
  Connect(uuid, name, path);
  mu_.Lock();
}

void VirtioSerialConnector::Connect(const std::string& uuid, const std::string& name, const std::string& path) {
  auto fail = [&](const std::string& why) {
    absl::MutexLock l(&mu_);
    ++counters_.connect_failures;
    auto it = domains_.find(uuid);
    if (it == domains_.end()) return;
    Domain& d = *it->second;
    d.state = "connecting";
    d.problem = why;
    const absl::Duration backoff = BackoffLocked(++d.failures);
    d.next_attempt = clock_->Now() + backoff;
    LogOnChangeLocked(d, absl::StrCat("connect-failed:", why),
                      absl::StrCat("agent channel connect failed uuid=", uuid, " domain=", name, " path=", path, ": ",
                                   why, " attempts=", d.failures, " retry_in=", absl::FormatDuration(backoff)));
  };
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    fail(absl::StrCat("socket path is ", path.size(), " bytes, above the unix limit of ", sizeof(addr.sun_path) - 1));
    return;
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    fail(absl::StrCat("socket: ", strerror(errno)));
    return;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    // A unix connect completes at once or not at all; EAGAIN is a full backlog (QEMU has a host
    // client already and is not accepting: only one at a time).
    const int error = errno;
    close(fd);
    fail(error == EAGAIN ? std::string("the socket's backlog is full (another host client holds the channel?)")
                         : absl::StrCat("connect: ", strerror(error)));
    return;
  }
  int pair[2];
  // Non-blocking both: gRPC's endpoint expects it (a blocking descriptor stalls its reads).
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    const int error = errno;
    close(fd);
    fail(absl::StrCat("socketpair: ", strerror(error)));
    return;
  }
  const int grpc_fd = pair[1];
  ConnectionBinding binding;
  binding.transport = Transport::kVirtioSerial;
  binding.connector = this;
  binding.uuid = uuid;
  const uint64_t generation = sink_->Serve(grpc_fd, std::move(binding));  // gRPC owns grpc_fd from here on
  absl::MutexLock l(&mu_);
  auto it = domains_.find(uuid);
  if (it == domains_.end() || stopping_) {
    // Stopped meanwhile: closing our end makes gRPC close its own.
    close(fd);
    close(pair[0]);
    sink_->Unbind(grpc_fd, generation);
    return;
  }
  Domain& d = *it->second;
  d.generation = generation;
  d.grpc_fd = grpc_fd;
  d.connected_at = clock_->Now();
  d.state = "connected";
  d.problem.clear();
  ++counters_.connects;
  // Holding mu_ across Add: the link's on_end (pump thread) waits for it, so it always finds
  // this generation recorded.
  d.link = pump_->Add(fd, pair[0], options_.link,
                      [this, uuid, generation, grpc_fd](LinkEnd why, const std::string& detail) {
                        OnLinkEnd(uuid, generation, grpc_fd, why, detail);
                      });
  LogOnChangeLocked(d, "connected",
                    absl::StrCat("agent channel connected uuid=", uuid, " domain=", name, " path=", path,
                                 " failed_attempts_before=", d.failures));
}

void VirtioSerialConnector::OnLinkEnd(const std::string& uuid, uint64_t generation, int grpc_fd, LinkEnd why,
                                      const std::string& detail) {
  absl::MutexLock l(&mu_);
  sink_->Unbind(grpc_fd, generation);
  switch (why) {
    case LinkEnd::kGuestClosed: ++counters_.ended_guest; break;
    case LinkEnd::kDaemonClosed: ++counters_.ended_daemon; break;
    case LinkEnd::kError: ++counters_.ended_error; break;
  }
  auto it = domains_.find(uuid);
  if (it == domains_.end() || it->second->generation != generation) return;
  Domain& d = *it->second;
  d.link = 0;
  const absl::Time now = clock_->Now();
  const absl::Duration lived = now - d.connected_at;
  if (lived >= options_.stable_after) {
    d.failures = 0;
  } else {
    ++d.failures;
  }
  const absl::Duration backoff = BackoffLocked(std::max(1, d.failures));
  d.next_attempt = now + backoff;
  d.state = "connecting";
  d.problem = absl::StrCat("channel closed (", LinkEndName(why), ": ", detail, ")");
  LogOnChangeLocked(d, absl::StrCat("ended:", LinkEndName(why)),
                    absl::StrCat("agent channel closed uuid=", uuid, " domain=", d.name, " reason=", LinkEndName(why),
                                 " detail=\"", detail, "\" lived=", absl::FormatDuration(lived),
                                 " reconnect_in=", absl::FormatDuration(backoff)));
  wake_ = true;
}

}  // namespace plimsoll::server::agent
