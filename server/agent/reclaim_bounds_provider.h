// Where the reclaim bounds the daemon sends each agent come from (ReclaimBounds in agent.proto;
// the agent side is docs/agent.md, "Reclaim"). The ingest asks the provider for a guest's bounds
// on every report of that guest it accepts and puts them in the ack; a policy that decides how
// much of each guest's cache to take back implements the interface. Without a provider (the
// default) acks carry no bounds and agents reclaim nothing.
#ifndef PLIMSOLL_SERVER_AGENT_RECLAIM_BOUNDS_PROVIDER_H_
#define PLIMSOLL_SERVER_AGENT_RECLAIM_BOUNDS_PROVIDER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plimsoll/v1/agent.pb.h"

namespace plimsoll::server::agent {

class ReclaimBoundsProvider {
 public:
  virtual ~ReclaimBoundsProvider() = default;
  // The bounds for the guest `uuid` now; nullopt: none (its agent stops when the last ones
  // expire; send enabled = false to stop it at once). Called on a gRPC thread for every accepted
  // report, so it must be quick (no libvirt calls) and thread-safe.
  virtual std::optional<v1::ReclaimBounds> BoundsFor(const std::string& uuid) = 0;
};

// What goes into the ack: the provider's bounds for `uuid` with the rate capped at
// `max_bytes_per_second` (the validator's max_reclaim_bytes_per_second: an agent following the
// bounds must never be rejected for reclaiming too fast). Null provider: nullopt.
std::optional<v1::ReclaimBounds> BoundsForAck(ReclaimBoundsProvider* provider, const std::string& uuid,
                                              double max_bytes_per_second);

// Bounds written by hand, for lab tools (plimsoll-agent-sink --reclaim_bounds): "off" (enabled
// = false), or comma-separated key=value with keys keep_mib, keep_file_mib, step_mib, rate_mib
// (MiB per second), psi_stop (percent) and refault_stop (per second), e.g.
// "keep_mib=600,step_mib=64,rate_mib=32". Unknown keys, missing values and negative or
// non-numeric values are INVALID_ARGUMENT naming the part.
absl::StatusOr<v1::ReclaimBounds> ParseReclaimBoundsSpec(absl::string_view spec);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_RECLAIM_BOUNDS_PROVIDER_H_
