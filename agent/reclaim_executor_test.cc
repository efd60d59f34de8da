// The executor against stand-ins for the kernel's file: a plain file in a temp dir (a kernel
// that takes every request), a FIFO that is full (a kernel answering EAGAIN), a read-only kernfs
// file (what an unwritable cgroup file answers, even to root), and a procfs file that refuses the
// swappiness key with EINVAL as Linux before 6.9 does. Never the machine's real memory.reclaim.
#include "agent/reclaim_executor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::agent {
namespace {

using ::testing::HasSubstr;

std::string MakeRoot() {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/cgroup.XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Touch(const std::string& path) { std::ofstream(path) << ""; }

TEST(ReclaimExecutorTest, WritesEachRequestToAFileThatTakesEverything) {
  const std::string root = MakeRoot();
  Touch(root + "/memory.reclaim");
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_TRUE(e.ok()) << e.status();
  // The probe, a request for nothing, was accepted: page cache only from now on.
  EXPECT_EQ(Contents(root + "/memory.reclaim"), "0 swappiness=0");
  EXPECT_TRUE((*e)->file_only());
  EXPECT_FALSE((*e)->dry_run());
  absl::StatusOr<ReclaimOutcome> r = (*e)->Reclaim(64 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReclaimOutcome::kFull);
  EXPECT_EQ(Contents(root + "/memory.reclaim"), "67108864 swappiness=0");
  r = (*e)->Reclaim(4096);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Contents(root + "/memory.reclaim"), "4096 swappiness=0");  // each write alone, as the kernel sees it
}

TEST(ReclaimExecutorTest, TrailingSlashesInTheRoot) {
  const std::string root = MakeRoot();
  Touch(root + "/memory.reclaim");
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root + "//"});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->path(), root + "/memory.reclaim");
}

TEST(ReclaimExecutorTest, NoFileIsUnsupportedWithAReason) {
  const std::string root = MakeRoot();
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(e.status().message(), HasSubstr("kernel < 5.19, cgroup v1"));
  EXPECT_THAT(e.status().message(), HasSubstr(root + "/memory.reclaim"));
}

TEST(ReclaimExecutorTest, AFileThatCannotBeWrittenIsRefusedAtOpen) {
  const std::string root = MakeRoot();
  ASSERT_EQ(mkdir((root + "/memory.reclaim").c_str(), 0755), 0);
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("is not writable"));
}

TEST(ReclaimExecutorTest, AReadOnlyKernfsFileIsPermissionDeniedEvenForRoot) {
  // sysfs and cgroupfs are both kernfs: a file without a write method refuses O_WRONLY with
  // EACCES whoever opens it, which a chmod-ed temp file cannot show to a test running as root.
  const std::string target = "/sys/kernel/uevent_seqnum";
  if (access(target.c_str(), R_OK) != 0) GTEST_SKIP() << target << " is not here (no sysfs in this sandbox)";
  const std::string root = MakeRoot();
  ASSERT_EQ(symlink(target.c_str(), (root + "/memory.reclaim").c_str()), 0);
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kPermissionDenied) << e.status();
  EXPECT_THAT(e.status().message(), HasSubstr("is not writable"));
}

TEST(ReclaimExecutorTest, AKernelWithoutTheSwappinessKeyGetsPlainRequests) {
  // /proc/self/oom_score_adj answers "0 swappiness=0" with EINVAL, as memory.reclaim before 6.9
  // does (it takes one number); and it refuses numbers above 1000, so nothing changes.
  const std::string root = MakeRoot();
  ASSERT_EQ(symlink("/proc/self/oom_score_adj", (root + "/memory.reclaim").c_str()), 0);
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE((*e)->file_only());
  // An error from the write itself is an error (not partial), naming the path.
  absl::StatusOr<ReclaimOutcome> r = (*e)->Reclaim(4 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(root + "/memory.reclaim"));
}

TEST(ReclaimExecutorTest, EagainIsPartial) {
  // A FIFO whose reader never reads: once full, a non-blocking write answers EAGAIN, the errno
  // memory.reclaim uses for "could not reclaim all of it".
  const std::string root = MakeRoot();
  const std::string fifo = root + "/memory.reclaim";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  CgroupReclaimOptions o;
  o.root = root;
  o.extra_open_flags = O_NONBLOCK;
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open(o);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<ReclaimOutcome> r = (*e)->Reclaim(1 << 20);  // room left: taken
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReclaimOutcome::kFull);
  const int filler = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(filler, 0);
  const std::string chunk(4096, 'x');
  while (write(filler, chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(errno, EAGAIN);
  r = (*e)->Reclaim(1 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReclaimOutcome::kPartial);
  close(filler);
  close(reader);
}

TEST(ReclaimExecutorTest, AFileThatWentAwayIsAnErrorAndIsNeverCreated) {
  const std::string root = MakeRoot();
  const std::string path = root + "/memory.reclaim";
  Touch(path);
  absl::StatusOr<std::unique_ptr<CgroupReclaimExecutor>> e = CgroupReclaimExecutor::Open({root});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(unlink(path.c_str()), 0);
  absl::StatusOr<ReclaimOutcome> r = (*e)->Reclaim(1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(ReclaimExecutorTest, ClassifyTable) {
  struct Row {
    int err;
    bool ok;
    ReclaimOutcome outcome;
    absl::StatusCode code;
  };
  const Row rows[] = {
      {0, true, ReclaimOutcome::kFull, absl::StatusCode::kOk},
      {EAGAIN, true, ReclaimOutcome::kPartial, absl::StatusCode::kOk},
      {EINTR, true, ReclaimOutcome::kPartial, absl::StatusCode::kOk},
      {EACCES, false, ReclaimOutcome::kFull, absl::StatusCode::kPermissionDenied},
      {EINVAL, false, ReclaimOutcome::kFull, absl::StatusCode::kInvalidArgument},
      {ENOENT, false, ReclaimOutcome::kFull, absl::StatusCode::kNotFound},
  };
  for (const Row& row : rows) {
    absl::StatusOr<ReclaimOutcome> r = ClassifyReclaimWrite(row.err, "/x/memory.reclaim");
    ASSERT_EQ(r.ok(), row.ok) << row.err;
    if (r.ok()) {
      EXPECT_EQ(*r, row.outcome) << row.err;
    } else {
      EXPECT_EQ(r.status().code(), row.code) << row.err;
      EXPECT_THAT(r.status().message(), HasSubstr("/x/memory.reclaim"));
    }
  }
}

TEST(ReclaimExecutorTest, RequestText) {
  EXPECT_EQ(ReclaimRequestText(1048576, true), "1048576 swappiness=0");
  EXPECT_EQ(ReclaimRequestText(1048576, false), "1048576");
}

// --reclaim=dry_run writes nothing to memory.reclaim, not even the "0 swappiness=0" probe.
TEST(ReclaimExecutorTest, ADryRunOpenWritesNothingNotEvenTheProbe) {
  const std::string root = MakeRoot();
  const std::string path = root + "/memory.reclaim";
  std::ofstream(path) << "untouched";
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> e = OpenReclaimExecutor(/*dry_run=*/true, {root});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(Contents(path), "untouched");
  EXPECT_TRUE((*e)->dry_run());
  EXPECT_FALSE((*e)->swappiness_probed());
  EXPECT_FALSE((*e)->file_only());
  absl::StatusOr<ReclaimOutcome> r = (*e)->Reclaim(64 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, ReclaimOutcome::kFull);
  EXPECT_EQ(Contents(path), "untouched");

  // The checks of a real open stand: no file, or one that cannot be opened for writing.
  const std::string empty = MakeRoot();
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> none = OpenReclaimExecutor(/*dry_run=*/true, {empty});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("kernel < 5.19, cgroup v1"));
  const std::string dir = MakeRoot();
  ASSERT_EQ(mkdir((dir + "/memory.reclaim").c_str(), 0755), 0);
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> unwritable = OpenReclaimExecutor(/*dry_run=*/true, {dir});
  ASSERT_FALSE(unwritable.ok());
  EXPECT_THAT(unwritable.status().message(), HasSubstr("is not writable"));

  // --reclaim=on probes.
  absl::StatusOr<std::unique_ptr<ReclaimExecutor>> on = OpenReclaimExecutor(/*dry_run=*/false, {root});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(Contents(path), "0 swappiness=0");
  EXPECT_TRUE((*on)->swappiness_probed());
  EXPECT_FALSE((*on)->dry_run());
}

TEST(ReclaimExecutorTest, DryRunWritesNothing) {
  DryRunReclaimExecutor e(/*file_only=*/false);
  EXPECT_TRUE(e.dry_run());
  EXPECT_FALSE(e.file_only());
  absl::StatusOr<ReclaimOutcome> r = e.Reclaim(1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, ReclaimOutcome::kFull);
}

}  // namespace
}  // namespace plimsoll::agent
