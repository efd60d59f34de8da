// The one fake of the host /proc seam, for tests of the collector and the control loop: it
// returns whatever HostMemory or error the test last set, and counts the reads.
#ifndef PLIMSOLL_SERVER_HOST_TESTING_FAKE_HOST_READER_H_
#define PLIMSOLL_SERVER_HOST_TESTING_FAKE_HOST_READER_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/host/host_reader.h"

namespace plimsoll::host {

// Thread-safe: a test thread may change the values while the code under test reads them.
class FakeHostReader : public HostReader {
 public:
  // Starts with a default (all zero, no PSI) HostMemory and no error.
  FakeHostReader() = default;
  // Starts with `memory` and no error.
  explicit FakeHostReader(HostMemory memory);

  // What later Read() calls return while no error is set.
  void SetMemory(HostMemory memory);
  // Makes later Read() calls fail with `error`; an OK status clears the error so Read()
  // returns the memory again.
  void SetError(absl::Status error);
  // How many times Read() has been called (successful or not).
  int reads() const;

  // Returns the error if one is set, else a copy of the memory last set.
  absl::StatusOr<HostMemory> Read() override;

 private:
  mutable absl::Mutex mu_;
  HostMemory memory_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace plimsoll::host

#endif  // PLIMSOLL_SERVER_HOST_TESTING_FAKE_HOST_READER_H_
