// How many log lines the agent side may write: a guest that reconnects in a loop, or a host of
// agent-less guests whose connections fail together, must not flood the daemon's log. A token
// bucket of ~2 lines a second with bursts of 20; the lines it holds back are counted and their
// number logged with the next line it lets through.
//
// Not thread-safe: each owner calls it under its own lock.
#ifndef PLIMSOLL_SERVER_AGENT_LOG_BUDGET_H_
#define PLIMSOLL_SERVER_AGENT_LOG_BUDGET_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/time.h"

namespace plimsoll::server::agent {

class LogBudget {
 public:
  // `what` names the lines in the count of those held back ("agent stream" gives
  // "N agent stream log lines suppressed").
  explicit LogBudget(std::string what) : what_(std::move(what)) {}

  // True when a line may be written at `now`. False counts it as suppressed.
  bool Take(absl::Time now);

 private:
  const std::string what_;
  double tokens_ = 20;
  absl::Time refilled_ = absl::InfinitePast();
  uint64_t suppressed_ = 0;
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_LOG_BUDGET_H_
