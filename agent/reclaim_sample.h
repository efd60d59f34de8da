// Turns the agent's /proc samples (the report's meminfo, vmstat and PSI, as GuestReader reads
// them) into what the reclaim law needs: sizes now, and the stall share and file refault rate
// over the span since the previous sample. Pure.
#ifndef PLIMSOLL_AGENT_RECLAIM_SAMPLE_H_
#define PLIMSOLL_AGENT_RECLAIM_SAMPLE_H_

#include "absl/time/time.h"
#include "agent/reclaim_decision.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

// `previous` null (or `span` not positive): no rates. A counter that went backwards (it cannot
// within a boot) gives no rate rather than a negative one.
ReclaimSample MeasureReclaimSample(const v1::AgentReport& now, const v1::AgentReport* previous, absl::Duration span);

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_SAMPLE_H_
