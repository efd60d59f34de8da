#include "server/agent/connection_bindings.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::server::agent {
namespace {

constexpr absl::string_view kFdPrefix = "fd:";

}  // namespace

std::string FdPeer(int fd) { return absl::StrCat(kFdPrefix, fd); }

uint64_t ConnectionBindings::Bind(int fd, ConnectionBinding binding) {
  absl::MutexLock l(&mu_);
  binding.generation = next_generation_++;
  const uint64_t generation = binding.generation;
  by_peer_[FdPeer(fd)] = std::move(binding);
  return generation;
}

void ConnectionBindings::Unbind(int fd, uint64_t generation) {
  absl::MutexLock l(&mu_);
  auto it = by_peer_.find(FdPeer(fd));
  if (it != by_peer_.end() && it->second.generation == generation) by_peer_.erase(it);
}

PeerLookup ConnectionBindings::Lookup(absl::string_view peer) const {
  PeerLookup out;
  if (!absl::StartsWith(peer, kFdPrefix)) {
    out.kind = PeerKind::kNetwork;
    return out;
  }
  absl::MutexLock l(&mu_);
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return out;
  out.kind = PeerKind::kBound;
  out.binding = it->second;
  return out;
}

void ConnectionBindings::Clear() {
  absl::MutexLock l(&mu_);
  by_peer_.clear();
}

size_t ConnectionBindings::size() const {
  absl::MutexLock l(&mu_);
  return by_peer_.size();
}

}  // namespace plimsoll::server::agent
