#include "server/agent/agent_vsock.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/server_posix.h"
#include "server/agent/agent_server.h"

namespace plimsoll::server::agent {
namespace {

std::string FdPeer(int fd) { return absl::StrCat("fd:", fd); }

}  // namespace

AgentVsock::AgentVsock(hypervisor::Hypervisor* hypervisor, AgentStore* store, Clock* clock,
                       std::unique_ptr<VsockListener> listener, AgentVsockOptions options)
    : hypervisor_(hypervisor),
      store_(store),
      clock_(clock),
      listener_(std::move(listener)),
      options_(std::move(options)),
      port_(listener_->port()),
      lister_(hypervisor, "agent vsock") {}

absl::StatusOr<std::unique_ptr<AgentVsock>> AgentVsock::Start(hypervisor::Hypervisor* hypervisor, AgentStore* store,
                                                               Clock* clock, std::unique_ptr<VsockListener> listener,
                                                               AgentVsockOptions options) {
  if (listener == nullptr) return absl::InvalidArgumentError("agent vsock: no listener");
  std::unique_ptr<AgentVsock> v(new AgentVsock(hypervisor, store, clock, std::move(listener), std::move(options)));
  AgentServiceOptions so = v->options_.service;
  so.channel_identity = [self = v.get()](const std::string& peer) { return self->ChannelIdentity(peer); };
  v->service_ = std::make_unique<AgentService>(store, clock, so);
  grpc::ServerBuilder builder;
  builder.RegisterService(v->service_.get());
  ConfigureAgentServerBuilder(&builder);
  v->server_ = builder.BuildAndStart();
  if (v->server_ == nullptr) return absl::InternalError("agent vsock: cannot start the vsock gRPC server");
  // Before the first accept: a guest that connects at once finds its CID mapped (when libvirt
  // answers; otherwise the manager retries and such a connection is closed and counted).
  v->Scan(/*full=*/true);
  v->manager_ = std::thread([self = v.get()] { self->ManagerLoop(); });
  v->accept_thread_ = std::thread([self = v.get()] { self->AcceptLoop(); });
  PLOG_INFO << "agent vsock on: port=" << v->port_ << " domains_with_cid=" << v->counters().domains_with_cid;
  return v;
}

AgentVsock::~AgentVsock() { Shutdown(); }

void AgentVsock::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  listener_->Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  if (manager_.joinable()) manager_.join();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    server_->Wait();
  }
  absl::MutexLock l(&mu_);
  peers_.clear();
}

void AgentVsock::Wake() {
  absl::MutexLock l(&mu_);
  refresh_wanted_ = true;
}

AgentVsockCounters AgentVsock::counters() const {
  absl::MutexLock l(&mu_);
  AgentVsockCounters c = counters_;
  c.domains_with_cid = 0;
  for (const auto& [uuid, d] : domains_) {
    if (d.cid != 0) ++c.domains_with_cid;
  }
  return c;
}

AgentServiceCounters AgentVsock::stream_counters() const { return service_->counters(); }

std::optional<std::string> AgentVsock::DomainOfCidLocked(uint32_t cid) const {
  auto it = by_cid_.find(cid);
  if (it == by_cid_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> AgentVsock::DomainOfCid(uint32_t cid) const {
  absl::MutexLock l(&mu_);
  return DomainOfCidLocked(cid);
}

std::optional<std::string> AgentVsock::ChannelIdentity(const std::string& peer) const {
  absl::MutexLock l(&mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return std::nullopt;
  // The CID's domain now: a domain that stopped (its CID gone or given to another) binds no
  // new stream, even if its old connection is somehow still open.
  std::optional<std::string> now = DomainOfCidLocked(it->second.cid);
  if (!now.has_value() || *now != it->second.uuid) return std::nullopt;
  return it->second.uuid;
}

void AgentVsock::AcceptLoop() {
  while (true) {
    absl::StatusOr<VsockConnection> c = listener_->Accept();
    if (absl::IsCancelled(c.status())) return;
    if (!c.ok()) {
      {
        absl::MutexLock l(&mu_);
        ++counters_.accept_errors;
        if (log_budget_.Take(clock_->Now())) PLOG_WARNING << "agent vsock: " << c.status().message();
        auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
        mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.accept_error_pause);
        if (stopping_) return;
      }
      continue;
    }
    mu_.Lock();
    if (stopping_) {
      mu_.Unlock();
      close(c->fd);
      return;
    }
    std::optional<std::string> uuid = DomainOfCidLocked(c->cid);
    if (!uuid.has_value()) {
      // Not a running domain's CID as far as the XML we read says: closed before gRPC sees a
      // byte. The map may be behind (a domain that just started): read it again soon.
      close(c->fd);
      ++counters_.unknown_cid;
      refresh_wanted_ = true;
      if (log_budget_.Take(clock_->Now())) {
        PLOG_WARNING << "agent vsock connection refused: cid=" << c->cid
                     << " reason=unknown_cid (no running domain's <vsock><cid address=...> is it)";
      }
      mu_.Unlock();
      continue;
    }
    // Before gRPC sees the descriptor: its first stream asks for this entry.
    peers_[FdPeer(c->fd)] = Peer{*uuid, c->cid};
    ++counters_.accepted;
    const auto d = domains_.find(*uuid);
    if (log_budget_.Take(clock_->Now())) {
      PLOG_INFO << "agent vsock connection accepted: cid=" << c->cid << " uuid=" << *uuid
                << " domain=" << (d == domains_.end() ? std::string("?") : d->second.name);
    }
    mu_.Unlock();
    // Without mu_: gRPC may start reading (and call ChannelIdentity) before this returns. The
    // server is alive: Shutdown joins this thread before it shuts the server down. gRPC owns
    // the descriptor from here on.
    grpc::AddInsecureChannelFromFd(server_.get(), c->fd);
  }
}

void AgentVsock::ManagerLoop() {
  absl::Time next_scan = clock_->Now() + options_.rescan_every;
  absl::Time next_refresh = clock_->Now() + options_.refresh_every;
  absl::Time last_refresh = clock_->Now();
  absl::Time next_sweep = clock_->Now() + options_.sweep_every;
  while (true) {
    bool full = false;
    bool scan = false;
    {
      absl::MutexLock l(&mu_);
      absl::Time until = std::min({next_scan, next_sweep, next_refresh});
      if (refresh_wanted_) until = std::min(until, last_refresh + options_.min_refresh_interval);
      const absl::Duration wait = std::max(absl::ZeroDuration(), until - clock_->Now());
      // A refresh asked for wakes the loop only once it may run.
      auto woken = [this, last_refresh]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (refresh_wanted_ && clock_->Now() >= last_refresh + options_.min_refresh_interval);
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
      if (stopping_) return;
      const absl::Time now = clock_->Now();
      full = now >= next_refresh || (refresh_wanted_ && now >= last_refresh + options_.min_refresh_interval);
      scan = full || now >= next_scan;
      if (full) refresh_wanted_ = false;
    }
    const absl::Time now = clock_->Now();
    if (now >= next_sweep) {
      service_->Sweep();
      next_sweep = now + options_.sweep_every;
    }
    if (scan) {
      const bool listed = Scan(full);
      const absl::Time after = clock_->Now();
      // Not listed (libvirt not connected yet): soon again.
      next_scan = after + (listed ? options_.rescan_every : std::min(options_.rescan_every, absl::Milliseconds(500)));
      if (full) {
        last_refresh = after;
        next_refresh = after + options_.refresh_every;
        if (!listed) {
          absl::MutexLock l(&mu_);
          refresh_wanted_ = true;  // the refresh did not happen
        }
      }
    }
  }
}

bool AgentVsock::Scan(bool full) {
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> listed = lister_.List();
  if (!listed.ok()) return false;
  // The XML reads happen without mu_ (libvirt may be slow); accepts meanwhile use the old map.
  std::vector<const hypervisor::DomainInfo*> to_read;
  {
    absl::MutexLock l(&mu_);
    for (const hypervisor::DomainInfo& d : *listed) {
      if (full || !domains_.contains(d.uuid)) to_read.push_back(&d);
    }
  }
  absl::flat_hash_map<std::string, Domain> read;
  absl::flat_hash_set<std::string> unreadable;
  for (const hypervisor::DomainInfo* d : to_read) {
    absl::StatusOr<hypervisor::AgentChannelInfo> info = hypervisor_->GetAgentChannel(d->uuid, options_.channel_name);
    if (!info.ok()) {
      // Unknown CID rather than a guess: a domain whose XML cannot be read has no vsock
      // identity until it can (UNIMPLEMENTED: this hypervisor has no channels at all).
      unreadable.insert(d->uuid);
      continue;
    }
    read[d->uuid] = Domain{d->name, info->vsock.cid};
  }
  absl::MutexLock l(&mu_);
  if (full) ++counters_.refreshes;
  absl::flat_hash_map<std::string, Domain> next;
  for (const hypervisor::DomainInfo& d : *listed) {
    if (auto r = read.find(d.uuid); r != read.end()) {
      const auto old = domains_.find(d.uuid);
      if (r->second.cid != 0 && (old == domains_.end() || old->second.cid != r->second.cid)) {
        PLOG_INFO << "agent vsock: uuid=" << d.uuid << " domain=" << d.name << " cid=" << r->second.cid;
      }
      next[d.uuid] = r->second;
    } else if (unreadable.contains(d.uuid)) {
      continue;  // left out, so the next scan reads it again
    } else if (auto old = domains_.find(d.uuid); old != domains_.end()) {
      next[d.uuid] = Domain{d.name, old->second.cid};
    }
  }
  domains_ = std::move(next);
  // A CID claimed by two domains (one of the two reads is stale: a domain restarted and its
  // old CID went to another) belongs to neither until a full refresh settles it.
  absl::flat_hash_map<uint32_t, int> claims;
  for (const auto& [uuid, d] : domains_) {
    if (d.cid != 0) ++claims[d.cid];
  }
  by_cid_.clear();
  bool ambiguous = false;
  for (const auto& [uuid, d] : domains_) {
    if (d.cid == 0) continue;
    if (claims[d.cid] == 1) {
      by_cid_[d.cid] = uuid;
    } else {
      ambiguous = true;
    }
  }
  if (ambiguous) {
    if (!full) refresh_wanted_ = true;
    if (log_budget_.Take(clock_->Now())) PLOG_WARNING << "agent vsock: a CID is claimed by more than one running domain; refused until re-read";
  }
  return true;
}

}  // namespace plimsoll::server::agent
