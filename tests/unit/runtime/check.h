/* check.h: the small assertion and gradient-check toolkit shared by the runtime unit
 * tests. CHECK counts failures instead of stopping, so one run reports every broken
 * kernel; gradcheck compares a backward kernel with central finite differences of
 * L = sum(y * r) for a fixed random r, accumulated in double. */
#ifndef RT_TEST_CHECK_H
#define RT_TEST_CHECK_H

#include "burstrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int check_failures;

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            check_failures++;                                     \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                         \
            fputc('\n', stderr);                                  \
        }                                                         \
    } while (0)

static uint64_t test_rng = 12345;
static inline float frand(void) /* uniform in [-1, 1) */
{
    test_rng = rt_hash64(test_rng);
    return (float)(test_rng >> 40) / 8388608.0f - 1.0f;
}

static inline void fill(rt_tensor *t)
{
    for (int64_t i = 0; i < t->numel; i++)
        rt_f32(t)[i] = frand();
}

/* Largest |a-b| / (atol + rtol*|b|) over both arrays; <= 1 means close. */
static inline double close_ratio(const float *a, const double *b, int64_t n, double atol,
                                 double rtol)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(r <= worst))
            worst = r; /* NaN propagates as failure */
    }
    return worst;
}

#define CHECK_CLOSE(name, a, b, n, atol, rtol)                                             \
    do {                                                                                   \
        double r_ = close_ratio((a), (b), (n), (atol), (rtol));                            \
        CHECK(r_ <= 1.0, "%s: values differ from the reference (ratio %.3g)", (name), r_); \
    } while (0)

/* Runs fn(ctx) in a child process, which must end with a non-zero status and print a
 * message containing `what` to stderr (a fatal runtime error); returns the message. */
static inline void expect_fatal(const char *name, void (*fn)(void *), void *ctx, const char *what)
{
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(0, "%s: pipe", name);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(ctx);
        _exit(0);
    }
    close(fds[1]);
    char msg[4096];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof msg - 1 && (n = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0)
        len += (size_t)n;
    msg[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0, "%s: should fail, exit status %d", name,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(strstr(msg, what) != NULL, "%s: error '%s' should contain '%s'", name, msg, what);
}

typedef struct {
    rt_tensor *t;    /* input being perturbed */
    rt_tensor *grad; /* its gradient computed by bwd */
    const char *name;
} gvar;

typedef void (*run_fn)(void *ctx);

static inline double dot_r(const rt_tensor *y, const rt_tensor *r)
{
    double s = 0.0;
    for (int64_t i = 0; i < y->numel; i++)
        s += (double)rt_f32(y)[i] * rt_f32(r)[i];
    return s;
}

/* fwd computes y from the inputs; bwd computes every var's grad from dy (which gradcheck
 * fills with r). Param grads accumulate, so gradcheck zeroes them first. */
static inline void gradcheck(const char *op, run_fn fwd, run_fn bwd, void *ctx, rt_tensor *y,
                             rt_tensor *dy, gvar *vars, int nvars)
{
    const float eps = 1e-2f;
    fill(dy);
    for (int v = 0; v < nvars; v++)
        rt_tensor_zero(vars[v].grad);
    fwd(ctx);
    bwd(ctx);
    rt_tensor r = *dy;
    float *rcopy = malloc((size_t)dy->numel * sizeof(float));
    memcpy(rcopy, dy->data, (size_t)dy->numel * sizeof(float));
    r.data = rcopy;
    for (int v = 0; v < nvars; v++) {
        rt_tensor *t = vars[v].t;
        int64_t n = t->numel, checks = n < 40 ? n : 40;
        double worst = 0.0;
        int64_t worst_i = -1;
        double worst_fd = 0, worst_an = 0;
        for (int64_t k = 0; k < checks; k++) {
            int64_t i =
                n <= 40 ? k : (int64_t)(rt_hash64((uint64_t)k * 7919u + (uint64_t)v) % (uint64_t)n);
            float save = rt_f32(t)[i];
            rt_f32(t)[i] = save + eps;
            fwd(ctx);
            double lp = dot_r(y, &r);
            rt_f32(t)[i] = save - eps;
            fwd(ctx);
            double lm = dot_r(y, &r);
            rt_f32(t)[i] = save;
            double fd = (lp - lm) / (2.0 * eps);
            double an = rt_f32(vars[v].grad)[i];
            double ratio = fabs(fd - an) / (3e-3 + 2e-2 * fabs(fd));
            if (!(ratio <= worst)) {
                worst = ratio;
                worst_i = i;
                worst_fd = fd;
                worst_an = an;
            }
        }
        CHECK(worst <= 1.0, "%s: gradient of %s at %lld: finite difference %.6g, backward %.6g", op,
              vars[v].name, (long long)worst_i, worst_fd, worst_an);
    }
    fwd(ctx);
    free(rcopy);
}

#endif
