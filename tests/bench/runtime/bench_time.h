/* bench_time.h: what the runtime benchmarks (bench_conv, bench_kernels) share: the calling
 * thread's CPU time, which other processes on a shared machine do not inflate, and the
 * comparison that sorts repetitions for their median. */
#ifndef BENCH_TIME_H
#define BENCH_TIME_H

#include <time.h>

static inline double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
