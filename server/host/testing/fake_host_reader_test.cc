#include "server/host/testing/fake_host_reader.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::host {
namespace {

TEST(FakeHostReaderTest, ReturnsWhatWasSetAndCountsReads) {
  HostMemory memory;
  memory.mem_total_bytes = 100;
  memory.psi_some_avg10 = 1.5;
  FakeHostReader reader(memory);
  absl::StatusOr<HostMemory> first = reader.Read();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->mem_total_bytes, 100);
  EXPECT_EQ(first->psi_some_avg10, 1.5);

  memory.mem_total_bytes = 200;
  reader.SetMemory(memory);
  EXPECT_EQ(reader.Read()->mem_total_bytes, 200);
  EXPECT_EQ(reader.reads(), 2);
}

TEST(FakeHostReaderTest, ErrorUntilCleared) {
  FakeHostReader reader;
  reader.SetError(absl::UnavailableError("boom"));
  absl::StatusOr<HostMemory> failed = reader.Read();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status(), absl::UnavailableError("boom"));
  reader.SetError(absl::OkStatus());
  absl::StatusOr<HostMemory> ok = reader.Read();
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->mem_total_bytes, 0);
  EXPECT_EQ(reader.reads(), 2);
}

}  // namespace
}  // namespace plimsoll::host
