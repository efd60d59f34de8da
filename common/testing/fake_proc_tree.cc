#include "common/testing/fake_proc_tree.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace plimsoll::testing {

std::string ReadTestdata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

FakeProcTree::FakeProcTree() {
  std::string pattern = ::testing::TempDir() + "/proc_root_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  root_ = pattern;
  MakeDir("");
}

void FakeProcTree::MakeDir(const std::string& relative) {
  std::error_code ec;
  std::filesystem::create_directories(root_ + "/proc/" + relative, ec);
  EXPECT_FALSE(ec) << relative << ": " << ec.message();
}

void FakeProcTree::Write(const std::string& relative, const std::string& text) {
  MakeDir(std::filesystem::path(relative).parent_path().string());
  std::ofstream out(root_ + "/proc/" + relative, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(out.good()) << relative;
  out << text;
}

}  // namespace plimsoll::testing
