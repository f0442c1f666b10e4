/* idle.c: where a rank's waits meet the work that fills them. The waits of the shared
 * code and the backends (rankset.c, optim.c, cuda/context.c) ask here whether background
 * work may run and run one slice of it; the background executor (background.c), which
 * sits above all of them (it trains with the optimizer, exchanges over rank sets and
 * checkpoints), registers itself as the filler in a program with copies, and its guard's
 * numbers ride on the world sums through it. Without a filler every wait is a plain wait
 * and a world sum carries nothing more. */
#include "internal.h"

static const rt_idle_filler *filler;

void rt_idle_register(const rt_idle_filler *f)
{
    filler = f;
}

bool rt_bg_ready(void)
{
    return filler && filler->ready();
}

bool rt_bg_idle(void)
{
    return filler && filler->run_one();
}

bool rt_bg_running(void)
{
    return filler && filler->running();
}

void rt_bg_fill(void)
{
    while (rt_bg_idle())
        ;
}

int rt_bg_share(double *out)
{
    return filler ? filler->share(out) : 0;
}

void rt_bg_shared(const double *sum)
{
    if (filler)
        filler->shared(sum);
}
