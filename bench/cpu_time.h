// CPU time of the whole process, for the benchmarks' CPU-per-report figures.
#ifndef PLIMSOLL_BENCH_CPU_TIME_H_
#define PLIMSOLL_BENCH_CPU_TIME_H_

#include <sys/resource.h>

namespace plimsoll::bench {

// CPU seconds (user, system) of the whole process so far (getrusage RUSAGE_SELF).
struct CpuTime {
  double user = 0, sys = 0;
  static CpuTime Now() {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return CpuTime{u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6, u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6};
  }
  CpuTime operator-(const CpuTime& o) const { return CpuTime{user - o.user, sys - o.sys}; }
  double total() const { return user + sys; }
};

}  // namespace plimsoll::bench

#endif  // PLIMSOLL_BENCH_CPU_TIME_H_
