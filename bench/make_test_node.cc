// Writes a libvirt test-driver host of N guests (bench/test_node.h):
//   make_test_node N /abs/path/node.xml
// then use --libvirt_uri=test:///abs/path/node.xml.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "bench/test_node.h"

int main(int argc, char** argv) {
  int n = 0;
  if (argc != 3 || !absl::SimpleAtoi(argv[1], &n) || n < 0) {
    std::fprintf(stderr, "usage: %s N /abs/path/node.xml\n", argv[0]);
    return 2;
  }
  absl::Status s = plimsoll::bench::WriteTestNode(argv[2], n);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
