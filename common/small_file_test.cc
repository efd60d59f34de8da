#include "common/small_file.h"

#include <errno.h>

#include <string>

#include "common/testing/fake_proc_tree.h"
#include "gtest/gtest.h"

namespace plimsoll {
namespace {

using ::plimsoll::testing::FakeProcTree;

TEST(ReadSmallFileTest, LimitIsEnforced) {
  FakeProcTree tree;
  tree.Write("big", std::string(100, 'x'));
  EXPECT_TRUE(ReadSmallFile(tree.root() + "/proc/big", 100).ok());
  EXPECT_EQ(ReadSmallFile(tree.root() + "/proc/big", 99).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadSmallFileTest, MissingFileNamesThePathAndKeepsErrno) {
  FakeProcTree tree;
  const std::string path = tree.root() + "/proc/absent";
  absl::StatusOr<std::string> text = ReadSmallFile(path, 100);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(text.status().message()).find(path), std::string::npos);
  std::string out = "stale";
  EXPECT_EQ(ReadBoundedFile(path, 100, &out), ENOENT);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace plimsoll
