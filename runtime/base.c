/* base.c: the floor of libburstrt's shared code, calling nothing above it: the state of
 * this rank (its options and whether MPI runs), messages and fatal errors that name rank,
 * op and cause, allocation that fails loudly, the tensor argument checks and the clock.
 * Every other file of runtime/ and its backends may use it. */
#include "internal.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

rt_options rt_opts_g = {.iterations = 10,
                        .seed = 1,
                        .threads = 0,
                        .step_timeout = 20.0,
                        .bucket_mb = 25.0,
                        .background = true,
                        .loss_scale_init = 65536.0,
                        .loss_scale_growth = 2.0,
                        .loss_scale_backoff = 0.5,
                        .loss_scale_interval = 2000,
                        .world_size = 1};
static bool mpi_started;

bool rt_mpi_running(void)
{
    return mpi_started;
}

void rt_set_mpi_running(bool running)
{
    mpi_started = running;
}

/* ---- errors ------------------------------------------------------------------- */

static void vmessage(const char *op, const char *fmt, va_list ap)
{
    char buf[4096];
    int n =
        snprintf(buf, sizeof buf, "burstrt: rank %d: %s: ", rt_opts_g.rank, op ? op : "runtime");
    if (n < 0)
        return;
    if ((size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf - 1 ? (size_t)n : sizeof buf - 5;
    if (len == sizeof buf - 5)
        memcpy(buf + len, "...", 3), len += 3; /* cut: still one line */
    buf[len++] = '\n';
    /* One write: up to PIPE_BUF bytes land in a pipe (mpirun's) in one piece. */
    fflush(stderr);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

void rt_message(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(op, fmt, ap);
    va_end(ap);
}

_Noreturn void rt_fatal(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(op, fmt, ap);
    va_end(ap);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *rt_xmalloc(size_t n, const char *op)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu bytes", n);
    return p;
}

void *rt_xcalloc(size_t n, size_t size, const char *op)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

const char *rt_dtype_name(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return "f32";
    case RT_I32: return "i32";
    case RT_BF16: return "bf16";
    case RT_F16: return "f16";
    }
    return "unknown";
}

void rt_check(const rt_tensor *t, rt_dtype dt, int ndim, const char *op, const char *what)
{
    if (!t)
        rt_fatal(op, "%s is NULL", what);
    if (t->dtype != dt)
        rt_fatal(op, "%s has dtype %s, expected %s", what, rt_dtype_name(t->dtype),
                 rt_dtype_name(dt));
    if (ndim >= 0 && t->ndim != ndim)
        rt_fatal(op, "%s has %d dimensions, expected %d", what, t->ndim, ndim);
}

void rt_check_numel(const rt_tensor *t, int64_t numel, const char *op, const char *what)
{
    if (t->numel != numel)
        rt_fatal(op, "%s has %lld elements, expected %lld", what, (long long)t->numel,
                 (long long)numel);
}

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
