/*
 * check.h: the few assertion macros the planner's unit tests share.
 */
#ifndef PLANNER_CHECK_H
#define PLANNER_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, rel)                                                                    \
    do {                                                                                         \
        double a_ = (a), b_ = (b);                                                               \
        if (!(fabs(a_ - b_) <= (rel)*fmax(fabs(a_), fabs(b_)) + 1e-15)) {                        \
            fprintf(stderr, "%s:%d: check failed: %s = %.12g, %s = %.12g\n", __FILE__, __LINE__, \
                    #a, a_, #b, b_);                                                             \
            check_failures++;                                                                    \
        }                                                                                        \
    } while (0)

static int check_done(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d checks failed\n", name, check_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
