// The host's secret for the agent channel: every guest token derives from it
// (protocol/report_proof.h). Stored as lower-case hex in a file only root may read
// (by default /var/lib/plimsoll/agent-host.key, mode 0600: server/config/default_paths.h).
#ifndef PLIMSOLL_SERVER_AGENT_HOST_KEY_H_
#define PLIMSOLL_SERVER_AGENT_HOST_KEY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace plimsoll::server::agent {

// Reads the key (raw bytes). FAILED_PRECONDITION when the file is readable or writable by group
// or others (a leaked key lets anyone speak for every guest); INVALID_ARGUMENT when it is not
// hex of at least kMinHostKeyBytes bytes. Messages never contain key material.
absl::StatusOr<std::string> LoadHostKey(const std::string& path);

// Creates a new random 32-byte key at `path` with mode 0600. ALREADY_EXISTS if the file exists
// (a key is never overwritten: every injected token depends on it).
absl::Status GenerateHostKey(const std::string& path);

// The key at `path`, created first (with its folder) when there is none, as plimsolld does at
// start when the TCP agent listener is on. LoadHostKey's and GenerateHostKey's errors.
absl::StatusOr<std::string> LoadOrCreateHostKey(const std::string& path);

}  // namespace plimsoll::server::agent

#endif  // PLIMSOLL_SERVER_AGENT_HOST_KEY_H_
