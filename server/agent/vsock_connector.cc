#include "server/agent/vsock_connector.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace plimsoll::server::agent {

VsockConnector::VsockConnector(hypervisor::Hypervisor* hypervisor, Clock* clock, ConnectionSink* sink,
                               std::unique_ptr<VsockListener> listener, VsockOptions options)
    : hypervisor_(hypervisor),
      clock_(clock),
      sink_(sink),
      listener_(std::move(listener)),
      options_(std::move(options)),
      port_(listener_->port()),
      lister_(hypervisor, "agent vsock") {}

absl::StatusOr<std::unique_ptr<VsockConnector>> VsockConnector::Start(hypervisor::Hypervisor* hypervisor,
                                                                       Clock* clock, ConnectionSink* sink,
                                                                       std::unique_ptr<VsockListener> listener,
                                                                       VsockOptions options) {
  if (listener == nullptr) return absl::InvalidArgumentError("agent vsock: no listener");
  std::unique_ptr<VsockConnector> v(
      new VsockConnector(hypervisor, clock, sink, std::move(listener), std::move(options)));
  // Before the first accept: a guest that connects at once finds its CID mapped (when libvirt
  // answers; otherwise the manager retries and such a connection is closed and counted).
  v->Scan(/*full=*/true);
  v->manager_ = std::thread([self = v.get()] { self->ManagerLoop(); });
  v->accept_thread_ = std::thread([self = v.get()] { self->AcceptLoop(); });
  PLOG_INFO << "agent vsock on: port=" << v->port_ << " domains_with_cid=" << v->counters().domains_with_cid;
  return v;
}

VsockConnector::~VsockConnector() { Stop(); }

void VsockConnector::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  listener_->Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  if (manager_.joinable()) manager_.join();
}

void VsockConnector::Wake() {
  absl::MutexLock l(&mu_);
  AskRefreshLocked();
}

void VsockConnector::AskRefreshLocked() {
  // Already wanted: the manager's deadline counts it, or the first ask woke it.
  if (!refresh_wanted_) refresh_asked_ = true;
  refresh_wanted_ = true;
}

VsockCounters VsockConnector::counters() const {
  absl::MutexLock l(&mu_);
  VsockCounters c = counters_;
  c.domains_with_cid = 0;
  for (const auto& [uuid, d] : domains_) {
    if (d.cid != 0) ++c.domains_with_cid;
  }
  return c;
}

std::optional<std::string> VsockConnector::DomainOfCidLocked(uint32_t cid) const {
  auto it = by_cid_.find(cid);
  if (it == by_cid_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> VsockConnector::DomainOfCid(uint32_t cid) const {
  absl::MutexLock l(&mu_);
  return DomainOfCidLocked(cid);
}

bool VsockConnector::Vouches(const ConnectionBinding& binding) const {
  // The CID's domain now: a domain that stopped (its CID gone or given to another) binds no
  // new stream, even if its old connection is somehow still open.
  absl::MutexLock l(&mu_);
  const std::optional<std::string> now = DomainOfCidLocked(static_cast<uint32_t>(binding.key));
  return now.has_value() && *now == binding.uuid;
}

void VsockConnector::AcceptLoop() {
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
      AskRefreshLocked();
      if (log_budget_.Take(clock_->Now())) {
        PLOG_WARNING << "agent vsock connection refused: cid=" << c->cid
                     << " reason=unknown_cid (no running domain's <vsock><cid address=...> is it)";
      }
      mu_.Unlock();
      continue;
    }
    ++counters_.accepted;
    const auto d = domains_.find(*uuid);
    if (log_budget_.Take(clock_->Now())) {
      PLOG_INFO << "agent vsock connection accepted: cid=" << c->cid << " uuid=" << *uuid
                << " domain=" << (d == domains_.end() ? std::string("?") : d->second.name);
    }
    mu_.Unlock();
    // Without mu_: gRPC may start reading (and ask Vouches) before this returns. The ingest
    // stops this thread before it shuts its server down.
    ConnectionBinding binding;
    binding.transport = Transport::kVsock;
    binding.connector = this;
    binding.uuid = *std::move(uuid);
    binding.key = c->cid;
    sink_->Serve(c->fd, std::move(binding));
  }
}

void VsockConnector::ManagerLoop() {
  absl::Time next_scan = clock_->Now() + options_.rescan_every;
  absl::Time next_refresh = clock_->Now() + options_.refresh_every;
  absl::Time last_refresh = clock_->Now();
  while (true) {
    bool full = false;
    bool scan = false;
    {
      absl::MutexLock l(&mu_);
      absl::Time until = std::min(next_scan, next_refresh);
      if (refresh_wanted_) until = std::min(until, last_refresh + options_.min_refresh_interval);
      const absl::Duration wait = std::max(absl::ZeroDuration(), until - clock_->Now());
      // A refresh asked for meanwhile wakes the loop to set its deadline again: the refresh
      // runs once it may (no sooner than min_refresh_interval after the last one).
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || refresh_asked_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
      if (stopping_) return;
      refresh_asked_ = false;
      const absl::Time now = clock_->Now();
      full = now >= next_refresh || (refresh_wanted_ && now >= last_refresh + options_.min_refresh_interval);
      scan = full || now >= next_scan;
      if (full) refresh_wanted_ = false;
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

bool VsockConnector::Scan(bool full) {
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
