/* check.h: the few assertions the rank unit tests share.  A failed check prints where
 * and what, and the test keeps going so one run shows every failure; main returns
 * the failure count as its exit status. */
#ifndef RANK_TEST_CHECK_H
#define RANK_TEST_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

/* |a - b| <= tol, printing both values when not (a NaN always fails). */
#define CHECK_NEAR(a, b, tol)                                                                  \
    do {                                                                                       \
        double check_a_ = (a), check_b_ = (b);                                                 \
        if (!(fabs(check_a_ - check_b_) <= (tol))) {                                           \
            fprintf(stderr, "%s:%d: check failed: %s = %.17g, %s = %.17g, tol %g\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_, (double)(tol));                      \
            check_failures++;                                                                  \
        }                                                                                      \
    } while (0)

static inline int check_done(const char *name)
{
    if (check_failures)
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    else
        printf("%s: ok\n", name);
    return check_failures ? 1 : 0;
}

#endif
