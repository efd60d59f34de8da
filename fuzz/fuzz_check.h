// FUZZ_CHECK: a property every fuzz target asserts about its parser's output. A violation is a
// bug even when nothing crashed, so it aborts, which libFuzzer records as a crash with the input.
#ifndef PLIMSOLL_FUZZ_FUZZ_CHECK_H_
#define PLIMSOLL_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

namespace plimsoll::fuzz {

// True when every byte is printable ASCII (what log lines and metric labels may carry).
inline bool IsPrintableAscii(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] < ' ' || data[i] > '~') return false;
  }
  return true;
}

}  // namespace plimsoll::fuzz

#endif  // PLIMSOLL_FUZZ_FUZZ_CHECK_H_
