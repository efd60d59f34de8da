// guest_workload: the memory workloads the real-guest lab runs inside a guest.
//
// It runs in the guest's chroot of the (read-only, 9p-shared) host root, so it is
// an ordinary dynamically linked host binary. Every status line is written with a
// single write(2) to stdout so that lines from several writers on the serial
// console do not interleave.
//
//   guest_workload stream FILE            read FILE sequentially in a loop
//   guest_workload hot FILE               re-read the (small) FILE in a loop; with
//                                         plimsoll.hot_mib=N on the kernel command line, only
//                                         its first N MiB (each guest of a lab its own hot set)
//   guest_workload anon --mib N --after S touch N MiB of anonymous memory after S s
//   guest_workload readonce FILE          read FILE once, then sleep: cache nobody reads again
//   guest_workload idle                   sleep forever
//
// Throughput lines: "PLIMSOLL-WL mode=<stream|hot> t=<s> mbps=<MB/s>", where MB is
// 10^6 bytes and the rate is bytes returned by read(2) over the wall time of the
// interval (about 5 s).

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace {

constexpr double kReportIntervalS = 5.0;
constexpr size_t kReadChunk = 1 << 20;

double MonotonicSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Writes one formatted line to stdout with a single write(2).
void EmitLine(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void EmitLine(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = static_cast<size_t>(n) < sizeof(buf) - 1 ? static_cast<size_t>(n) : sizeof(buf) - 2;
  buf[len++] = '\n';
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(STDOUT_FILENO, buf + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(w);
  }
}

[[noreturn]] void SleepForever() {
  for (;;) pause();
}

void SleepSeconds(double s) {
  if (s <= 0) return;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(s);
  ts.tv_nsec = static_cast<long>((s - static_cast<double>(ts.tv_sec)) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// plimsoll.hot_mib=N from the kernel command line, in bytes; 0 when absent (the whole file). Read
// here rather than passed by the initramfs's script, so that the cached initramfs stays as it is.
uint64_t HotLimitFromCmdline() {
  FILE* f = fopen("/proc/cmdline", "r");
  if (f == nullptr) return 0;
  char line[4096] = {0};
  const bool ok = fgets(line, sizeof(line), f) != nullptr;
  fclose(f);
  if (!ok) return 0;
  const char* p = strstr(line, "plimsoll.hot_mib=");
  if (p == nullptr) return 0;
  const long mib = strtol(p + strlen("plimsoll.hot_mib="), nullptr, 10);
  return mib > 0 ? static_cast<uint64_t>(mib) << 20 : 0;
}

// Reads `path` from start to end (or its first `limit` bytes, when not 0) over and over with
// buffered read(2), reporting throughput every kReportIntervalS seconds. Used by both "stream"
// and "hot": the difference is only the size read relative to guest memory.
int ReadLoop(const char* mode, const char* path, uint64_t limit) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    EmitLine("PLIMSOLL-WL mode=%s error=open errno=%d path=%s", mode, errno, path);
    return 1;
  }
  std::vector<char> buf(kReadChunk);
  const double start = MonotonicSeconds();
  double interval_start = start;
  uint64_t interval_bytes = 0;
  uint64_t offset = 0;
  for (;;) {
    size_t want = buf.size();
    if (limit > 0) want = static_cast<size_t>(std::min<uint64_t>(want, limit - offset));
    ssize_t n = want == 0 ? 0 : read(fd, buf.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      EmitLine("PLIMSOLL-WL mode=%s error=read errno=%d", mode, errno);
      close(fd);
      return 1;
    }
    if (n == 0) {
      offset = 0;
      if (lseek(fd, 0, SEEK_SET) < 0) {
        EmitLine("PLIMSOLL-WL mode=%s error=lseek errno=%d", mode, errno);
        close(fd);
        return 1;
      }
      continue;
    }
    interval_bytes += static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
    const double now = MonotonicSeconds();
    if (now - interval_start >= kReportIntervalS) {
      const double mbps = static_cast<double>(interval_bytes) / (now - interval_start) / 1e6;
      EmitLine("PLIMSOLL-WL mode=%s t=%.1f mbps=%.1f", mode, now - start, mbps);
      interval_start = now;
      interval_bytes = 0;
    }
  }
}

// Reads `path` once from start to end and keeps nothing but the page cache it leaves: the cold
// cache of a guest that ran a batch job and went quiet. "read_mib=" says how much it read.
int ReadOnce(const char* path) {
  const double start = MonotonicSeconds();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    EmitLine("PLIMSOLL-WL mode=readonce error=open errno=%d path=%s", errno, path);
    return 1;
  }
  std::vector<char> buf(kReadChunk);
  uint64_t total = 0;
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      EmitLine("PLIMSOLL-WL mode=readonce error=read errno=%d", errno);
      close(fd);
      return 1;
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
  }
  close(fd);
  EmitLine("PLIMSOLL-WL mode=readonce read_mib=%llu t=%.1f", static_cast<unsigned long long>(total >> 20),
           MonotonicSeconds() - start);
  SleepForever();
}

int Anon(long mib, double after_s) {
  const double start = MonotonicSeconds();
  SleepSeconds(after_s);
  const size_t bytes = static_cast<size_t>(mib) << 20;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    EmitLine("PLIMSOLL-WL mode=anon error=mmap errno=%d mib=%ld", errno, mib);
    return 1;
  }
  const long page = sysconf(_SC_PAGESIZE);
  const size_t step = page > 0 ? static_cast<size_t>(page) : 4096;
  volatile unsigned char* p = static_cast<unsigned char*>(mem);
  // A distinct value in every page, so neither the zero page nor page merging can
  // back the memory on the cheap.
  uint64_t counter = 0x9e3779b97f4a7c15ULL;
  // Marks the start of the allocation on the console, for spike-latency measurements.
  EmitLine("PLIMSOLL-WL mode=anon allocating_mib=%ld t=%.1f", mib, MonotonicSeconds() - start);
  for (size_t off = 0; off < bytes; off += step) {
    counter = counter * 6364136223846793005ULL + 1442695040888963407ULL;
    for (size_t i = 0; i < sizeof(counter); ++i) {
      p[off + i] = static_cast<unsigned char>(counter >> (8 * i));
    }
  }
  EmitLine("PLIMSOLL-WL mode=anon allocated_mib=%ld t=%.1f", mib, MonotonicSeconds() - start);
  SleepForever();
}

int Usage() {
  fprintf(stderr,
          "usage: guest_workload stream FILE | hot FILE | anon --mib N [--after S] | readonce FILE | "
          "idle\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  if (mode == "idle") {
    EmitLine("PLIMSOLL-WL mode=idle t=0.0");
    SleepForever();
  }
  if (mode == "stream" || mode == "hot") {
    if (argc != 3) return Usage();
    return ReadLoop(mode.c_str(), argv[2], mode == "hot" ? HotLimitFromCmdline() : 0);
  }
  if (mode == "readonce") {
    if (argc != 3) return Usage();
    return ReadOnce(argv[2]);
  }
  if (mode == "anon") {
    long mib = -1;
    double after = 0;
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--mib" && i + 1 < argc) {
        mib = strtol(argv[++i], nullptr, 10);
      } else if (arg == "--after" && i + 1 < argc) {
        after = strtod(argv[++i], nullptr);
      } else {
        return Usage();
      }
    }
    if (mib <= 0) return Usage();
    return Anon(mib, after);
  }
  return Usage();
}
