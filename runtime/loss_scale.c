/* loss_scale.c: loss scaling for training in f16, PyTorch's GradScaler. f16 holds
 * magnitudes from about 6e-8 to 65504, and many gradients of a network are smaller than
 * the smallest: scaled by S before the backward pass (rt_cross_entropy_bwd_scaled makes
 * the loss gradient S times larger, and every gradient after it is linear in it), they
 * are S times larger and survive; before the optimizer step they are divided by S again
 * and checked for inf and nan (rt_loss_scale_unscale). A step whose gradients overflowed
 * on any rank is skipped on every rank: each rank checks the gradients it holds, and the
 * verdict is summed over the world, since a burst plan's ranks hold different layers'
 * gradients. The dynamic scale starts at --loss-scale-init (65536), is halved
 * (--loss-scale-backoff) on every overflow and doubled (--loss-scale-growth) after
 * --loss-scale-interval (2000) clean steps in a row. The loss gradient's multiply is the
 * loss's backward kernel's, and the gradients' unscale and check the device's
 * (rt_dev.scale_check): this file only decides. The scale and the clean-step count go
 * into checkpoints (checkpoint.c), so a resumed run continues with the same scale. Rank 0
 * reports each skipped step and, at the end, the scale and the number of steps skipped. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static rt_loss_scaler scaler;
static bool configured;

void rt_loss_scaler_configure(void)
{
    const rt_options *o = &rt_opts_g;
    rt_loss_scale_mode m = o->loss_scale;
    if (m == RT_LOSS_SCALE_DEFAULT)
        m = rt_get_compute_dtype() == RT_COMPUTE_F16 ? RT_LOSS_SCALE_DYNAMIC : RT_LOSS_SCALE_OFF;
    scaler = (rt_loss_scaler){
        .on = m != RT_LOSS_SCALE_OFF,
        .dynamic = m == RT_LOSS_SCALE_DYNAMIC,
        .scale = m == RT_LOSS_SCALE_OFF ? 1.0 : (double)(float)o->loss_scale_init,
        .growth = o->loss_scale_growth,
        .backoff = o->loss_scale_backoff,
        .interval = o->loss_scale_interval,
    };
    configured = true;
}

rt_loss_scaler *rt_loss_scaler_get(void)
{
    if (!configured)
        rt_loss_scaler_configure();
    return &scaler;
}

void rt_loss_scaler_update(rt_loss_scaler *s, bool overflow)
{
    if (!s->on || !s->dynamic)
        return;
    /* The scale is an f32, as GradScaler's: every product is rounded to one. */
    if (overflow) {
        s->scale = (double)((float)s->scale * (float)s->backoff);
        s->clean = 0;
        return;
    }
    if (++s->clean < s->interval)
        return;
    float grown = (float)s->scale * (float)s->growth;
    if (isfinite(grown))
        s->scale = (double)grown;
    s->clean = 0;
}

double rt_loss_scale(void)
{
    return rt_loss_scaler_get()->scale;
}

/* BURSTRT_TEST_FAULT=inf-grad@R:S: rank R writes inf into its first gradient at step S,
 * before the check, so that the tests can watch a step being skipped on every rank. */
static void test_fault_inf(rt_params *ps, int64_t step)
{
    const char *f = getenv("BURSTRT_TEST_FAULT");
    int rank;
    long long at;
    if (!f || sscanf(f, "inf-grad@%d:%lld", &rank, &at) != 2 || rank != rt_opts_g.rank ||
        at != step)
        return;
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (p->grad && p->grad->numel > 0) {
            const float inf = INFINITY;
            rt_dev.copy(rt_f32(p->grad), &inf, sizeof inf, RT_COPY_H2D, "loss_scale");
            rt_message("loss_scale", "BURSTRT_TEST_FAULT: inf in the gradient of %s at step %lld",
                       p->name, at);
            return;
        }
    }
}

bool rt_loss_scale_unscale(rt_params *ps)
{
    rt_loss_scaler *s = rt_loss_scaler_get();
    if (!s->on)
        return true;
    rt_grads_wait();
    int64_t step = -1;
    rt_progress_now(&step);
    test_fault_inf(ps, step);
    rt_trace_push("loss_scale.unscale");
    int32_t *flag = rt_params_overflow_flag(ps);
    rt_dev.zero(flag, sizeof *flag, "loss_scale");
    /* As GradScaler: one reciprocal, rounded to f32, multiplies every gradient (exact for
     * a power of two). */
    const float inv = (float)(1.0 / s->scale);
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (p->grad)
            rt_dev.scale_check(rt_f32(p->grad), p->grad->numel, inv, flag, "loss_scale");
    }
    int32_t found = 0;
    rt_dev.copy(&found, flag, sizeof found, RT_COPY_D2H, "loss_scale");
    rt_trace_pop();
    const bool overflow = rt_world_sum(found ? 1.0 : 0.0) > 0.0;
    const double was = s->scale;
    rt_loss_scaler_update(s, overflow);
    if (overflow) {
        s->skipped++;
        if (rt_opts_g.rank == 0)
            rt_message("loss_scale",
                       "step %lld: inf or nan in the gradients at loss scale %g: the step is "
                       "skipped; the scale is now %g",
                       (long long)step, was, s->scale);
    }
    return !overflow;
}

void rt_loss_scale_report(void)
{
    if (!configured || !scaler.on || rt_opts_g.rank != 0)
        return;
    if (scaler.dynamic)
        rt_message("loss_scale",
                   "dynamic scale %g at the end (%lld clean steps since it last changed); "
                   "%lld steps skipped in this run",
                   scaler.scale, (long long)scaler.clean, (long long)scaler.skipped);
    else
        rt_message("loss_scale", "fixed scale %g; %lld steps skipped in this run", scaler.scale,
                   (long long)scaler.skipped);
}
