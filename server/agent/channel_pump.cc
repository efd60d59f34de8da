#include "server/agent/channel_pump.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::server::agent {
namespace {

// epoll data: the link id and which of its two descriptors.
uint64_t Tag(uint64_t id, bool guest_side) { return (id << 1) | (guest_side ? 1 : 0); }

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// One direction's bytes in flight: read into [end, size), written from [begin, end).
struct Buffer {
  std::vector<char> bytes = std::vector<char>(ChannelPump::kBufferBytes);
  size_t begin = 0;
  size_t end = 0;
  bool empty() const { return begin == end; }
  size_t room() const { return bytes.size() - end; }
  void Compact() {
    if (begin == 0) return;
    std::memmove(bytes.data(), bytes.data() + begin, end - begin);
    end -= begin;
    begin = 0;
  }
};

}  // namespace

absl::string_view LinkEndName(LinkEnd end) {
  switch (end) {
    case LinkEnd::kGuestClosed: return "guest_closed";
    case LinkEnd::kDaemonClosed: return "daemon_closed";
    case LinkEnd::kError: return "error";
  }
  return "error";
}

struct ChannelPump::Link {
  uint64_t id = 0;
  int guest_fd = -1;
  int daemon_fd = -1;
  PumpLinkOptions options;
  std::function<void(LinkEnd, const std::string&)> on_end;
  Buffer to_daemon;  // what the guest sent, not yet written to gRPC's socketpair
  Buffer to_guest;   // what gRPC wrote, not yet written to the channel
  double tokens = 0;
  absl::Time refilled;
  absl::Time throttled_until = absl::InfinitePast();
  uint32_t guest_events = 0;  // registered interest
  uint32_t daemon_events = 0;

  // Bytes the guest may send now.
  size_t Budget(absl::Time now) {
    const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - refilled));
    refilled = std::max(now, refilled);
    tokens = std::min(options.guest_burst_bytes, tokens + elapsed * options.guest_bytes_per_second);
    return tokens < 1 ? 0 : static_cast<size_t>(tokens);
  }
};

absl::StatusOr<std::unique_ptr<ChannelPump>> ChannelPump::Start(Clock* clock) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(epoll_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // link ids start at 1, so tag 0 and 1 are never a link's
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  std::unique_ptr<ChannelPump> pump(new ChannelPump(clock, epoll_fd, wake_fd));
  pump->thread_ = std::thread([p = pump.get()] { p->Run(); });
  return pump;
}

ChannelPump::ChannelPump(Clock* clock, int epoll_fd, int wake_fd)
    : clock_(clock), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

ChannelPump::~ChannelPump() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  absl::MutexLock l(&mu_);
  for (auto& [id, link] : links_) CloseLocked(*link);
  links_.clear();
  close(wake_fd_);
  close(epoll_fd_);
}

uint64_t ChannelPump::Add(int guest_fd, int daemon_fd, PumpLinkOptions options,
                          std::function<void(LinkEnd, const std::string&)> on_end) {
  SetNonBlocking(guest_fd);
  SetNonBlocking(daemon_fd);
  auto link = std::make_unique<Link>();
  link->guest_fd = guest_fd;
  link->daemon_fd = daemon_fd;
  link->options = options;
  link->on_end = std::move(on_end);
  const absl::Time now = clock_->Now();
  link->tokens = options.guest_burst_bytes;
  link->refilled = now;
  absl::MutexLock l(&mu_);
  link->id = next_id_++;
  epoll_event ev{};
  ev.data.u64 = Tag(link->id, true);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, guest_fd, &ev);
  ev.data.u64 = Tag(link->id, false);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, daemon_fd, &ev);
  UpdateInterestLocked(*link, now);
  const uint64_t id = link->id;
  links_.emplace(id, std::move(link));
  return id;
}

void ChannelPump::Remove(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = links_.find(id);
  if (it == links_.end()) return;
  CloseLocked(*it->second);
  links_.erase(it);
}

PumpCounters ChannelPump::counters() const {
  absl::MutexLock l(&mu_);
  return counters_;
}

size_t ChannelPump::links() const {
  absl::MutexLock l(&mu_);
  return links_.size();
}

void ChannelPump::CloseLocked(Link& link) {
  // Closing removes the descriptors from the epoll set (nothing else holds them).
  if (link.guest_fd >= 0) close(link.guest_fd);
  if (link.daemon_fd >= 0) close(link.daemon_fd);
  link.guest_fd = link.daemon_fd = -1;
}

void ChannelPump::UpdateInterestLocked(Link& link, absl::Time now) {
  const bool throttled = now < link.throttled_until;
  uint32_t guest = 0;
  uint32_t daemon = 0;
  if (link.to_daemon.room() > 0 && !throttled) guest |= EPOLLIN;
  if (!link.to_guest.empty()) guest |= EPOLLOUT;
  if (link.to_guest.room() > 0) daemon |= EPOLLIN;
  if (!link.to_daemon.empty()) daemon |= EPOLLOUT;
  epoll_event ev{};
  if (guest != link.guest_events) {
    ev.events = guest;
    ev.data.u64 = Tag(link.id, true);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, link.guest_fd, &ev);
    link.guest_events = guest;
  }
  if (daemon != link.daemon_events) {
    ev.events = daemon;
    ev.data.u64 = Tag(link.id, false);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, link.daemon_fd, &ev);
    link.daemon_events = daemon;
  }
}

namespace {

// Writes what `buffer` holds to `fd`. False on a hard error.
bool Flush(int fd, Buffer& buffer, uint64_t* counted, std::string* detail) {
  while (!buffer.empty()) {
    const ssize_t n = send(fd, buffer.bytes.data() + buffer.begin, buffer.end - buffer.begin, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      *detail = absl::StrCat("write: ", strerror(errno));
      return false;
    }
    buffer.begin += static_cast<size_t>(n);
    if (counted != nullptr) *counted += static_cast<uint64_t>(n);
  }
  buffer.begin = buffer.end = 0;
  return true;
}

}  // namespace

bool ChannelPump::HandleLocked(Link& link, bool guest_side, uint32_t events, absl::Time now, LinkEnd* why,
                               std::string* detail) {
  const int fd = guest_side ? link.guest_fd : link.daemon_fd;
  const int other = guest_side ? link.daemon_fd : link.guest_fd;
  Buffer& in = guest_side ? link.to_daemon : link.to_guest;    // what this side sends
  Buffer& out = guest_side ? link.to_guest : link.to_daemon;   // what this side receives
  const uint32_t interest = guest_side ? link.guest_events : link.daemon_events;
  const LinkEnd closed = guest_side ? LinkEnd::kGuestClosed : LinkEnd::kDaemonClosed;

  if ((events & EPOLLOUT) != 0) {
    if (!Flush(fd, out, guest_side ? &counters_.bytes_to_guests : nullptr, detail)) {
      *why = LinkEnd::kError;
      return false;
    }
  }
  const bool hangup = (events & (EPOLLHUP | EPOLLERR)) != 0;
  if ((events & EPOLLIN) != 0 || (hangup && (interest & EPOLLIN) != 0)) {
    in.Compact();
    size_t want = std::min(in.room(), kChunkBytes);
    if (guest_side) want = std::min(want, link.Budget(now));
    if (want > 0) {
      const ssize_t n = recv(fd, in.bytes.data() + in.end, want, 0);
      if (n == 0) {
        *why = closed;
        *detail = "end of stream";
        return false;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        *why = errno == ECONNRESET ? closed : LinkEnd::kError;
        *detail = absl::StrCat("read: ", strerror(errno));
        return false;
      }
      if (n > 0) {
        in.end += static_cast<size_t>(n);
        if (guest_side) {
          link.tokens -= static_cast<double>(n);
          counters_.bytes_from_guests += static_cast<uint64_t>(n);
        }
        // Pass it on at once; what does not fit waits for EPOLLOUT on the other side.
        if (!Flush(other, in, guest_side ? nullptr : &counters_.bytes_to_guests, detail)) {
          *why = LinkEnd::kError;
          return false;
        }
      }
    }
    if (guest_side && link.tokens < 1 && now >= link.throttled_until) {
      // Out of budget: not read again until a chunk's worth has refilled.
      const double seconds = (std::min<double>(kChunkBytes, link.options.guest_burst_bytes) - link.tokens) /
                             std::max(1.0, link.options.guest_bytes_per_second);
      link.throttled_until = now + absl::Seconds(seconds);
      throttled_.insert(link.id);
      ++counters_.throttled;
    }
  } else if (hangup) {
    // Hung up while this side is not being read (throttled, or its buffer full): what it still
    // had to say is dropped with the link.
    *why = closed;
    *detail = (events & EPOLLERR) != 0 ? "error on hangup" : "hangup";
    return false;
  }
  return true;
}

void ChannelPump::Run() {
  std::vector<epoll_event> events(128);
  while (true) {
    int timeout_ms = -1;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      const absl::Time now = clock_->Now();
      for (uint64_t id : throttled_) {
        auto it = links_.find(id);
        if (it == links_.end() || it->second->throttled_until <= now) {
          timeout_ms = 0;  // gone, or refilled already: dealt with in this round
          continue;
        }
        const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(it->second->throttled_until - now) + 1);
        timeout_ms = timeout_ms < 0 ? static_cast<int>(ms) : std::min<int>(timeout_ms, static_cast<int>(ms));
      }
    }
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    struct Ended {
      std::function<void(LinkEnd, const std::string&)> on_end;
      LinkEnd why;
      std::string detail;
    };
    std::vector<Ended> ended;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      const absl::Time now = clock_->Now();
      for (int i = 0; i < n; ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == 0) {
          uint64_t drained = 0;
          (void)!read(wake_fd_, &drained, sizeof(drained));
          continue;
        }
        auto it = links_.find(tag >> 1);
        if (it == links_.end()) continue;  // removed or ended earlier in this round
        Link& link = *it->second;
        LinkEnd why = LinkEnd::kError;
        std::string detail;
        if (!HandleLocked(link, (tag & 1) != 0, events[i].events, now, &why, &detail)) {
          CloseLocked(link);
          ended.push_back({std::move(link.on_end), why, std::move(detail)});
          links_.erase(it);
          continue;
        }
        UpdateInterestLocked(link, now);
      }
      // Links whose budget has refilled are read again.
      for (auto t = throttled_.begin(); t != throttled_.end();) {
        auto it = links_.find(*t);
        if (it == links_.end()) {
          throttled_.erase(t++);
        } else if (it->second->throttled_until <= now) {
          it->second->throttled_until = absl::InfinitePast();
          UpdateInterestLocked(*it->second, now);
          throttled_.erase(t++);
        } else {
          ++t;
        }
      }
    }
    for (Ended& e : ended) {
      if (e.on_end) e.on_end(e.why, e.detail);
    }
  }
}

}  // namespace plimsoll::server::agent
