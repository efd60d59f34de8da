#include "server/loop/reclaim_claim_check.h"

#include <algorithm>
#include <cstdint>

namespace plimsoll::server {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// The fall of RSS from `base` to `p` that the balloon does not explain (may be negative). The
// balloon lowers RSS only by pages the host held: at the base at least actual - RSS of the
// guest's memory was not resident (free pages reporting had returned; RSS also counts QEMU's
// own memory, so this errs low), and a take up to that much explains no fall.
int64_t UnexplainedFall(const ReclaimClaimState::Point& base, const ReclaimClaimState::Point& p) {
  const int64_t taken = std::max<int64_t>(0, base.actual - p.actual);
  const int64_t not_resident = std::max<int64_t>(0, base.actual - base.rss);
  return (base.rss - p.rss) - std::max<int64_t>(0, taken - not_resident);
}

// What the guest read from its disks from `base` to `p` (0 where either was not read, or the
// counter went back: a restarted domain).
uint64_t ReadSince(const ReclaimClaimState::Point& base, const ReclaimClaimState::Point& p) {
  if (!base.read.has_value() || !p.read.has_value() || *p.read < *base.read) return 0;
  return *p.read - *base.read;
}

ReclaimClaimWindow Close(const ReclaimClaimParams& params, absl::Time now, ReclaimClaimState* s) {
  ReclaimClaimWindow w;
  w.opened = s->opened;
  w.closed = now;
  w.claimed_bytes = s->window_claimed;
  const bool measured = s->base.has_value() && s->window_fall.has_value();
  w.rss_fall_bytes = measured ? static_cast<uint64_t>(std::max<int64_t>(0, *s->window_fall)) : 0;
  if (!measured) {
    w.verdict = ReclaimVerdict::kUnmeasured;
  } else {
    w.confirmed_bytes = std::min(w.claimed_bytes, w.rss_fall_bytes);
    w.unconfirmed_bytes = w.claimed_bytes - w.confirmed_bytes;
    if (w.claimed_bytes < params.min_claim_bytes) {
      w.verdict = ReclaimVerdict::kSmall;
    } else if (static_cast<double>(w.confirmed_bytes) <
               params.min_confirmed_share * static_cast<double>(w.claimed_bytes)) {
      w.verdict = s->window_read >= w.unconfirmed_bytes ? ReclaimVerdict::kReading : ReclaimVerdict::kUnconfirmed;
    } else {
      w.verdict = ReclaimVerdict::kConfirmed;
    }
  }
  s->confirmed_bytes = SaturatingAdd(s->confirmed_bytes, w.confirmed_bytes);
  s->unconfirmed_bytes = SaturatingAdd(s->unconfirmed_bytes, w.unconfirmed_bytes);
  if (w.verdict == ReclaimVerdict::kUnconfirmed) {
    ++s->unconfirmed_windows;
    ++s->unconfirmed_run;
    absl::Duration pause = params.unconfirmed_pause;
    for (uint32_t i = 1; i < s->unconfirmed_run && pause < params.max_unconfirmed_pause; ++i) pause *= 2;
    s->paused_until = now + std::min(pause, params.max_unconfirmed_pause);
  } else if (w.verdict == ReclaimVerdict::kConfirmed) {
    s->unconfirmed_run = 0;
  }
  s->last_verdict = w.verdict;
  s->open = false;
  s->window_claimed = 0;
  s->base.reset();
  s->window_fall.reset();
  s->window_read = 0;
  s->recent.clear();  // a fall confirms one window at most
  return w;
}

}  // namespace

absl::Duration ReclaimBoundsPauseLeft(const ReclaimClaimState& state, absl::Time now) {
  return state.paused_until > now ? state.paused_until - now : absl::ZeroDuration();
}

absl::string_view ReclaimVerdictName(ReclaimVerdict verdict) {
  switch (verdict) {
    case ReclaimVerdict::kNone: return "none";
    case ReclaimVerdict::kConfirmed: return "confirmed";
    case ReclaimVerdict::kUnconfirmed: return "unconfirmed";
    case ReclaimVerdict::kSmall: return "small";
    case ReclaimVerdict::kUnmeasured: return "unmeasured";
    case ReclaimVerdict::kReading: return "reading";
  }
  return "none";
}

std::optional<ReclaimClaimWindow> StepReclaimClaims(const ReclaimClaimParams& params, const ReclaimClaimSample& sample,
                                                    ReclaimClaimState* s) {
  std::optional<ReclaimClaimState::Point> point;
  if (sample.host_rss_bytes.has_value()) {
    point = ReclaimClaimState::Point{sample.now, *sample.host_rss_bytes, sample.balloon_actual_bytes,
                                     sample.disk_read_bytes};
  }
  // 1. This reading counts toward the open window.
  if (s->open && point.has_value() && s->base.has_value()) {
    const int64_t fall = UnexplainedFall(*s->base, *point);
    s->window_fall = std::max(s->window_fall.value_or(fall), fall);
    s->window_read = std::max(s->window_read, ReadSince(*s->base, *point));
  }
  // 2. A window whose claims stopped for grace, or that is max_window old, is judged.
  std::optional<ReclaimClaimWindow> closed;
  if (s->open && (sample.now - s->last_claim >= params.grace || sample.now - s->opened >= params.max_window)) {
    closed = Close(params, sample.now, s);
  }
  // 3. New claims: the growth of the claimed total since the last sample.
  uint64_t claim = 0;
  if (sample.claimed_total.has_value() && s->claimed_seen.has_value() && *sample.claimed_total > *s->claimed_seen) {
    claim = *sample.claimed_total - *s->claimed_seen;
  }
  s->claimed_seen = sample.claimed_total;
  if (claim > 0) {
    if (!s->open) {
      s->open = true;
      s->opened = sample.now;
      s->window_claimed = 0;
      // The highest RSS reading before the claim (or now): the claim arrives after the reclaim.
      s->base = point;
      for (const ReclaimClaimState::Point& p : s->recent) {
        if (!s->base.has_value() || p.rss > s->base->rss) s->base = p;
      }
      s->window_fall.reset();
      s->window_read = 0;
      if (point.has_value() && s->base.has_value()) {
        s->window_fall = UnexplainedFall(*s->base, *point);
        s->window_read = ReadSince(*s->base, *point);
      }
      s->recent.clear();
    }
    s->window_claimed = SaturatingAdd(s->window_claimed, claim);
    s->last_claim = sample.now;
  }
  // 4. Between windows, the readings a next window's base may come from.
  if (!s->open) {
    if (point.has_value()) s->recent.push_back(*point);
    while (!s->recent.empty() && sample.now - s->recent.front().at > params.lookback) s->recent.pop_front();
  }
  return closed;
}

}  // namespace plimsoll::server
