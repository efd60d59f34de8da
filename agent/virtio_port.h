// The guest end of a virtio-serial agent channel (docs/agent.md, "virtio-serial").
//
// The guest sees its port as a character device, /dev/virtio-ports/NAME (udev's link; the
// kernel's own name is /dev/vportNpM, and /sys/class/virtio-ports/vportNpM/name holds NAME).
// gRPC's endpoints use sendmsg/recvmsg, which a character device refuses, so the agent bridges
// the port to a socketpair: gRPC gets one end (grpc::CreateCustomInsecureChannelFromFd), and a
// thread moves bytes between the other end and the port.
//
// What the port does that a socket does not, and what the bridge makes of it:
// - Only one opener at a time (EBUSY): opening retries until the deadline, because the bridge
//   of the previous connection may still be closing the port.
// - While no host client is connected (plimsolld not running, or reconnecting), poll() reports
//   POLLHUP and read() returns 0 at once, level-triggered: the open waits for the host by
//   polling every 100 ms up to the deadline rather than spinning.
// - When the host client goes away the bridge ends: it closes the port (which discards what the
//   old host session left in the port's buffer) and its socketpair end, so gRPC sees the
//   connection close and the agent starts a fresh HTTP/2 session on its next attempt.
//
// Thread-safe (no shared state); each bridge owns its descriptors and thread.
#ifndef PLIMSOLL_AGENT_VIRTIO_PORT_H_
#define PLIMSOLL_AGENT_VIRTIO_PORT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plimsoll::agent {

// The device of the virtio-serial port named `name`: ROOT/dev/virtio-ports/NAME when it exists,
// otherwise ROOT/dev/vportNpM for the ROOT/sys/class/virtio-ports/vportNpM/name that holds
// NAME. `root` is "" on a real guest (tests point it at a fake tree). NOT_FOUND says where it
// looked (a guest without the virtio_console module, or a domain without the channel).
absl::StatusOr<std::string> FindVirtioPort(absl::string_view root, absl::string_view name);

// Opens `device`, waits for the host end to be connected, and starts the bridge thread.
// Returns the socketpair end for gRPC (the caller owns it). UNAVAILABLE when the port cannot be
// opened; FAILED_PRECONDITION when no host client connected within `timeout` (the wait polls the
// port every 100 ms, so the caller may call again at once: see Reporter::Run). `alive`, when
// given, is set now and cleared when the bridge ends (the port hung up or gRPC closed its end).
// OpenVirtioPortBridge's "no host client connected within `timeout`": FAILED_PRECONDITION,
// marked with a status payload so that IsHostEndAbsent takes no other FAILED_PRECONDITION for it.
absl::Status HostEndAbsentError(const std::string& device);
bool IsHostEndAbsent(const absl::Status& status);

absl::StatusOr<int> OpenVirtioPortBridge(const std::string& device, absl::Duration timeout,
                                         std::shared_ptr<std::atomic<bool>> alive = nullptr);

}  // namespace plimsoll::agent

#endif  // PLIMSOLL_AGENT_VIRTIO_PORT_H_
