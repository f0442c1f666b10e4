/*
 * alloc.c: memory for the planner, the passes and the simulator.
 *
 * Their tables live outside the compilation's arena (a plan is solved many
 * times, the simulator grows queues as it runs), so they allocate with these:
 * a size n * size that overflows is refused like a failed allocation, a zero
 * size still returns a pointer, and either is the compiler's one response to
 * running out of memory: "burstc: out of memory" and exit status 2 (as the
 * arena, ir/arena.c).
 */
#include <stdlib.h>

#include "plan.h"

_Noreturn static void out_of_memory(void)
{
    fputs("burstc: out of memory\n", stderr);
    exit(2);
}

void *plan_xcalloc(size_t n, size_t size)
{
    void *q = calloc(n ? n : 1, size ? size : 1);
    if (!q)
        out_of_memory();
    return q;
}

void *plan_xrealloc(void *p, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        out_of_memory();
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        out_of_memory();
    return q;
}
