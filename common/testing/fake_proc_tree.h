// Test helpers shared by every test that reads /proc-like files: captured files from
// testdata folders, and a throwaway directory tree standing in for a root with proc/.
#ifndef PLIMSOLL_COMMON_TESTING_FAKE_PROC_TREE_H_
#define PLIMSOLL_COMMON_TESTING_FAKE_PROC_TREE_H_

#include <string>

namespace plimsoll::testing {

// The contents of a workspace-relative file (a Bazel data dependency; tests run from the
// workspace root). A missing file fails the calling test and returns "".
std::string ReadTestdata(const std::string& path);

// A fresh, unique directory under the test's temp dir with an empty "proc/" in it.
class FakeProcTree {
 public:
  FakeProcTree();
  // The directory that holds proc/ (pass it as a reader's proc root).
  const std::string& root() const { return root_; }
  // Writes <root>/proc/<relative>, creating the directories it needs.
  void Write(const std::string& relative, const std::string& text);
  // Creates <root>/proc/<relative> (and its parents) as an empty directory.
  void MakeDir(const std::string& relative);

 private:
  std::string root_;
};

}  // namespace plimsoll::testing

#endif  // PLIMSOLL_COMMON_TESTING_FAKE_PROC_TREE_H_
