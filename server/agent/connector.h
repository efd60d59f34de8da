// What feeds the agent ingest besides the TCP listener: a connector finds the connections whose
// guest the host vouches for (a domain's virtio-serial port, an accepted vsock connection from a
// domain's CID) and hands each one, bound to its guest, to the ingest's one gRPC server. The
// ingest's side of that is a ConnectionSink; the connector's side, what the ingest asks of it,
// is a Connector.
#ifndef PLIMSOLL_SERVER_AGENT_CONNECTOR_H_
#define PLIMSOLL_SERVER_AGENT_CONNECTOR_H_

#include <cstdint>

#include "server/agent/connection_bindings.h"

namespace plimsoll::server::agent {

// Where a connector hands its connections. Thread-safe.
class ConnectionSink {
 public:
  virtual ~ConnectionSink() = default;
  // Binds the connected socket `fd` to `binding`'s guest, then serves it: gRPC owns `fd` from
  // then on and closes it when the session ends. Returns the binding's generation, for Unbind.
  virtual uint64_t Serve(int fd, ConnectionBinding binding) = 0;
  // The connection served as (fd, generation) is over: streams that open on that name are
  // refused.
  virtual void Unbind(int fd, uint64_t generation) = 0;
};

// A connector as the ingest drives it. The ingest calls Stop before it shuts its server down,
// and destroys the connector after, so a connector's destructor may close what it still holds
// (the streams on it have ended by then).
class Connector {
 public:
  virtual ~Connector() = default;
  // A domain started, stopped or changed: look at the domains again soon. Thread-safe, never
  // blocks.
  virtual void Wake() = 0;
  // Stops the connector's threads; once it returns the connector calls its sink no more.
  // Idempotent.
  virtual void Stop() = 0;
  // Whether `binding`, which this connector made, still names its guest: asked as each new
  // stream opens on the connection. Thread-safe.
  virtual bool Vouches(const ConnectionBinding& binding) const = 0;
};

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_CONNECTOR_H_
