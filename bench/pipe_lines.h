// Lines over a pipe: how a load benchmark talks to the daemon side it runs in a child process
// (--processes=2), so that each side's CPU is counted apart.
#ifndef PLIMSOLL_BENCH_PIPE_LINES_H_
#define PLIMSOLL_BENCH_PIPE_LINES_H_

#include <unistd.h>

#include <string>

namespace plimsoll::bench {

// Writes all of `s` at once (pipe writes this small are atomic); false when it could not.
inline bool WriteAll(int fd, const std::string& s) {
  return write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

// Reads up to the next newline (not included), or to EOF.
inline std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

}  // namespace plimsoll::bench

#endif  // PLIMSOLL_BENCH_PIPE_LINES_H_
