#include "server/agent/log_budget.h"

#include <algorithm>

#include "common/log.h"

namespace plimsoll::server::agent {
namespace {

constexpr double kLinesPerSecond = 2.0;
constexpr double kBurst = 20.0;

}  // namespace

bool LogBudget::Take(absl::Time now) {
  if (refilled_ != absl::InfinitePast()) {
    tokens_ = std::min(kBurst, tokens_ + kLinesPerSecond * std::max(0.0, absl::ToDoubleSeconds(now - refilled_)));
  }
  refilled_ = std::max(now, refilled_);
  if (tokens_ < 1.0) {
    ++suppressed_;
    return false;
  }
  tokens_ -= 1.0;
  if (suppressed_ > 0) {
    PLOG_WARNING << suppressed_ << " " << what_ << " log lines suppressed";
    suppressed_ = 0;
  }
  return true;
}

}  // namespace plimsoll::server::agent
