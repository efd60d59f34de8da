#include "server/host/testing/fake_host_reader.h"

#include <utility>

namespace plimsoll::host {

FakeHostReader::FakeHostReader(HostMemory memory) : memory_(std::move(memory)) {}

void FakeHostReader::SetMemory(HostMemory memory) {
  absl::MutexLock lock(&mu_);
  memory_ = std::move(memory);
}

void FakeHostReader::SetError(absl::Status error) {
  absl::MutexLock lock(&mu_);
  error_ = std::move(error);
}

int FakeHostReader::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

absl::StatusOr<HostMemory> FakeHostReader::Read() {
  absl::MutexLock lock(&mu_);
  ++reads_;
  if (!error_.ok()) return error_;
  return memory_;
}

}  // namespace plimsoll::host
