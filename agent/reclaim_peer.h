// What the reporter exchanges with the reclaimer (reclaimer.h) over the agent channel: the
// host's reclaim bounds from each ack go in, the reclaim part of each report comes out. An
// interface so the reporter does not depend on how reclaim is done.
#ifndef PLIMSOLL_AGENT_RECLAIM_PEER_H_
#define PLIMSOLL_AGENT_RECLAIM_PEER_H_

#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::agent {

class ReclaimPeer {
 public:
  virtual ~ReclaimPeer() = default;
  // Bounds carried by an ack. Called on the reporter's ack-reading thread; must be quick.
  virtual void OnHostBounds(const v1::ReclaimBounds& bounds) = 0;
  // Fills the report's reclaim part. Called on the reporter's thread for every report.
  virtual void FillReport(v1::ReclaimReport* out) = 0;
};

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_RECLAIM_PEER_H_
