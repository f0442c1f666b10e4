/* test_loss_scale.c: loss scaling (runtime/loss_scale.c) in one process, without MPI. The
 * GradScaler state machine step by step against a sequence worked out by hand (backoff on
 * an overflow, growth after `interval` clean steps, no growth past f32's range, a fixed
 * scale that never moves); which mode each compute dtype gets by default; the loss
 * gradient made S times larger (exactly, bit for bit) by the loss's backward; unscaling exact for a power of two; a step whose gradients
 * hold inf or nan skipped with parameters and SGD and Adam state untouched bit for bit;
 * the CPU kernel's check over a gradient large enough to be split among threads; and the
 * scaler's state through a checkpoint and back (a dynamic scale continues, a fixed one
 * keeps the command line's, a file of a run without scaling or of the older format
 * leaves the scaler at its start). */
#include "check.h"
#include "internal.h"

#include <float.h>

static rt_options defaults;

static void set_mode(rt_loss_scale_mode m, double init, double growth, double backoff,
                     int64_t interval)
{
    rt_opts_g.loss_scale = m;
    rt_opts_g.loss_scale_init = init;
    rt_opts_g.loss_scale_growth = growth;
    rt_opts_g.loss_scale_backoff = backoff;
    rt_opts_g.loss_scale_interval = interval;
    rt_loss_scaler_configure();
}

static rt_param *param(rt_pool *P, rt_params **ps, int64_t n)
{
    *ps = rt_params_new(P);
    rt_param *p = rt_param_new(*ps, "w", rt_comm_new(1, (int[]){0}), 1, (int64_t[]){n});
    for (int64_t i = 0; i < n; i++)
        rt_f32(p->value)[i] = 0.25f * (float)(i % 7) - 0.5f;
    return p;
}

/* The gradient g_i = (i % 5 - 2) / 64 as the backward computes it: times S. */
static void scaled_grad(rt_param *p, double S)
{
    for (int64_t i = 0; i < p->grad->numel; i++)
        rt_f32(p->grad)[i] = (float)((double)(i % 5 - 2) / 64.0 * S);
}

static bool same_bytes(const rt_tensor *t, const float *copy)
{
    return memcmp(t->data, copy, (size_t)t->numel * sizeof(float)) == 0;
}

static float *snapshot(const rt_tensor *t)
{
    float *c = malloc((size_t)t->numel * sizeof(float));
    memcpy(c, t->data, (size_t)t->numel * sizeof(float));
    return c;
}

static void state_machine(void)
{
    /* init 8, growth 2, backoff 0.5, interval 3:
     * clean clean clean -> 16; overflow -> 8; clean clean (2 of 3) -> 8; overflow -> 4
     * (the count restarts); clean clean clean -> 8. */
    set_mode(RT_LOSS_SCALE_DYNAMIC, 8, 2, 0.5, 3);
    rt_loss_scaler *s = rt_loss_scaler_get();
    CHECK(s->on && s->dynamic && s->scale == 8 && s->clean == 0, "dynamic scaler at start");
    const bool overflow[] = {0, 0, 0, 1, 0, 0, 1, 0, 0, 0};
    const double scale[] = {8, 8, 16, 8, 8, 8, 4, 4, 4, 8};
    const int64_t clean[] = {1, 2, 0, 0, 1, 2, 0, 1, 2, 0};
    for (int k = 0; k < 10; k++) {
        rt_loss_scaler_update(s, overflow[k]);
        CHECK(s->scale == scale[k] && s->clean == clean[k],
              "step %d (%s): scale %g, clean %lld; expected %g, %lld", k,
              overflow[k] ? "overflow" : "clean", s->scale, (long long)s->clean, scale[k],
              (long long)clean[k]);
    }
    CHECK(rt_loss_scale() == 8, "rt_loss_scale() %g", rt_loss_scale());

    /* Backoff 0.3 rounds in f32 as GradScaler's f32 scale does. */
    set_mode(RT_LOSS_SCALE_DYNAMIC, 10, 2, 0.3, 3);
    rt_loss_scaler_update(rt_loss_scaler_get(), true);
    CHECK(rt_loss_scale() == (double)(10.0f * 0.3f), "backoff in f32: %.9g", rt_loss_scale());

    /* Growth stops where f32 would overflow; the count restarts all the same. */
    set_mode(RT_LOSS_SCALE_DYNAMIC, ldexp(1, 127), 2, 0.5, 1);
    rt_loss_scaler_update(rt_loss_scaler_get(), false);
    CHECK(rt_loss_scale() == ldexp(1, 127) && rt_loss_scaler_get()->clean == 0,
          "growth past FLT_MAX: scale %g", rt_loss_scale());

    /* A fixed scale never moves; off is a scale of 1. */
    set_mode(RT_LOSS_SCALE_FIXED, 1000, 2, 0.5, 1);
    s = rt_loss_scaler_get();
    rt_loss_scaler_update(s, true);
    rt_loss_scaler_update(s, false);
    CHECK(s->on && !s->dynamic && s->scale == 1000, "fixed scale moved to %g", s->scale);
    set_mode(RT_LOSS_SCALE_OFF, 1000, 2, 0.5, 1);
    CHECK(!rt_loss_scaler_get()->on && rt_loss_scale() == 1, "off: scale %g", rt_loss_scale());

    /* The defaults: dynamic with GradScaler's constants for f16, off for f32 and bf16. */
    rt_opts_g = defaults;
    rt_set_compute_dtype(RT_COMPUTE_F16);
    rt_loss_scaler_configure();
    s = rt_loss_scaler_get();
    CHECK(s->on && s->dynamic && s->scale == 65536 && s->growth == 2 && s->backoff == 0.5 &&
              s->interval == 2000,
          "f16 default: on %d dynamic %d scale %g growth %g backoff %g interval %lld", s->on,
          s->dynamic, s->scale, s->growth, s->backoff, (long long)s->interval);
    for (int k = 0; k < 1999; k++)
        rt_loss_scaler_update(s, false);
    CHECK(s->scale == 65536, "grew before 2000 clean steps: %g", s->scale);
    rt_loss_scaler_update(s, false);
    CHECK(s->scale == 131072, "no growth after 2000 clean steps: %g", s->scale);
    rt_set_compute_dtype(RT_COMPUTE_BF16);
    rt_loss_scaler_configure();
    CHECK(!rt_loss_scaler_get()->on, "bf16 scales by default");
    rt_set_compute_dtype(RT_COMPUTE_F32);
    rt_loss_scaler_configure();
    CHECK(!rt_loss_scaler_get()->on, "f32 scales by default");
}

static void scale_and_skip(rt_pool *P)
{
    /* The loss gradient made times S (a power of two: exactly S times the unscaled one),
     * and the same as the unscaled one when off; rows of 3 logits over a global batch of
     * 6, this shard's 2 rows. */
    rt_tensor *z = rt_tensor_new(P, RT_F32, 2, (int64_t[]){2, 3});
    rt_tensor *lab = rt_tensor_new(P, RT_I32, 1, (int64_t[]){2});
    rt_tensor *d = rt_tensor_new(P, RT_F32, 2, (int64_t[]){2, 3});
    rt_tensor *plain = rt_tensor_new(P, RT_F32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++)
        rt_f32(z)[i] = 0.7f * (float)(i - 2);
    rt_i32(lab)[0] = 2;
    rt_i32(lab)[1] = 0;
    rt_cross_entropy_bwd(z, lab, 6, plain);
    set_mode(RT_LOSS_SCALE_OFF, 1024, 2, 0.5, 3);
    rt_cross_entropy_bwd_scaled(z, lab, 6, d);
    for (int i = 0; i < 6; i++)
        CHECK(rt_f32(d)[i] == rt_f32(plain)[i], "off: loss gradient %d is %g, not %g", i,
              rt_f32(d)[i], rt_f32(plain)[i]);
    CHECK(rt_f32(plain)[2] < 0 && rt_f32(plain)[3] < 0 && rt_f32(plain)[0] > 0,
          "the loss gradient's signs: %g %g %g", rt_f32(plain)[0], rt_f32(plain)[2],
          rt_f32(plain)[3]);
    set_mode(RT_LOSS_SCALE_DYNAMIC, 1024, 2, 0.5, 3);
    rt_cross_entropy_bwd_scaled(z, lab, 6, d);
    for (int i = 0; i < 6; i++)
        CHECK(rt_f32(d)[i] == rt_f32(plain)[i] * 1024.0f, "scaled loss gradient %d: %g, not %g", i,
              rt_f32(d)[i], rt_f32(plain)[i] * 1024.0f);

    /* A clean step: the gradients come back exactly, SGD steps. */
    rt_params *ps;
    rt_param *p = param(P, &ps, 37);
    rt_sgd sgd = {.lr = 0.5f, .momentum = 0.9f, .weight_decay = 0.01f};
    scaled_grad(p, 1024);
    CHECK(rt_loss_scale_unscale(ps), "a clean step is skipped");
    for (int64_t i = 0; i < 37; i++)
        CHECK(rt_f32(p->grad)[i] == (float)((double)(i % 5 - 2) / 64.0),
              "unscaled gradient %lld: %.9g", (long long)i, rt_f32(p->grad)[i]);
    rt_sgd_step(ps, &sgd);
    CHECK(rt_loss_scaler_get()->clean == 1 && rt_loss_scale() == 1024, "after a clean step");

    /* inf, -inf or nan anywhere: skipped, and what the optimizer owns is untouched. */
    const float bad[] = {INFINITY, -INFINITY, NAN};
    const double after[] = {512, 256, 128};
    for (int k = 0; k < 3; k++) {
        float *w = snapshot(p->value), *buf = snapshot(p->state[0]);
        scaled_grad(p, rt_loss_scale());
        rt_f32(p->grad)[11 + k] = bad[k];
        bool step = rt_loss_scale_unscale(ps);
        CHECK(!step, "%g in a gradient: not skipped", bad[k]);
        if (step) /* as the generated program does */
            rt_sgd_step(ps, &sgd);
        CHECK(same_bytes(p->value, w) && same_bytes(p->state[0], buf),
              "%g: a skipped step changed the parameter or its momentum", bad[k]);
        CHECK(rt_loss_scale() == after[k] && rt_loss_scaler_get()->clean == 0 &&
                  rt_loss_scaler_get()->skipped == k + 1,
              "%g: scale %g after the overflow, expected %g", bad[k], rt_loss_scale(), after[k]);
        free(w);
        free(buf);
    }

    /* Adam: a skipped step neither moves m, v nor counts. */
    rt_adam adam = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    p = param(P, &ps, 37);
    scaled_grad(p, rt_loss_scale());
    CHECK(rt_loss_scale_unscale(ps), "adam: clean step skipped");
    rt_adam_step(ps, &adam);
    float *w = snapshot(p->value), *m = snapshot(p->state[0]), *v = snapshot(p->state[1]);
    scaled_grad(p, rt_loss_scale());
    rt_f32(p->grad)[36] = NAN;
    if (rt_loss_scale_unscale(ps))
        rt_adam_step(ps, &adam);
    CHECK(same_bytes(p->value, w) && same_bytes(p->state[0], m) && same_bytes(p->state[1], v) &&
              rt_params_adam_step(ps) == 1,
          "adam: a skipped step changed the state (step count %lld)",
          (long long)rt_params_adam_step(ps));
    free(w);
    free(m);
    free(v);

    /* The CPU kernel splits large gradients among threads: one inf anywhere is found, and
     * every element is unscaled. */
    p = param(P, &ps, 300000);
    set_mode(RT_LOSS_SCALE_DYNAMIC, 4096, 2, 0.5, 3);
    scaled_grad(p, 4096);
    CHECK(rt_loss_scale_unscale(ps), "large clean gradient: skipped");
    bool exact = true;
    for (int64_t i = 0; i < p->grad->numel; i++)
        exact &= rt_f32(p->grad)[i] == (float)((double)(i % 5 - 2) / 64.0);
    CHECK(exact, "large gradient not unscaled exactly");
    scaled_grad(p, rt_loss_scale());
    rt_f32(p->grad)[277777] = -INFINITY;
    CHECK(!rt_loss_scale_unscale(ps), "an inf at element 277777 of 300000 was missed");

    /* Without scaling, unscale neither looks nor skips. */
    set_mode(RT_LOSS_SCALE_OFF, 4096, 2, 0.5, 3);
    CHECK(rt_loss_scale_unscale(ps), "off: a step was skipped");
    CHECK(isinf(rt_f32(p->grad)[277777]), "off: the gradient was touched");
}

/* FNV-1a 64 of everything before the last 8 bytes, as checkpoint.c. */
static void fix_sum(unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n - 8; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    memcpy(b + n - 8, &h, 8);
}

static void checkpoints(rt_pool *P)
{
    char dir[] = "/tmp/burstrt-test-loss-scale-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    rt_params *ps;
    rt_param *p = param(P, &ps, 5);

    /* A dynamic scale of 16 with two clean steps counted goes out and comes back. */
    set_mode(RT_LOSS_SCALE_DYNAMIC, 8, 2, 0.5, 3);
    rt_loss_scaler *s = rt_loss_scaler_get();
    for (int k = 0; k < 5; k++)
        rt_loss_scaler_update(s, false);
    CHECK(s->scale == 16 && s->clean == 2, "before saving: %g, %lld", s->scale,
          (long long)s->clean);
    rt_checkpoint_save(dir, ps, 5);
    rt_loss_scaler_configure();
    CHECK(rt_loss_scale() == 8, "reconfigured");
    CHECK(rt_checkpoint_load(dir, ps) == 5, "load");
    CHECK(s->scale == 16 && s->clean == 2, "resumed scale %g, clean %lld; expected 16, 2", s->scale,
          (long long)s->clean);
    /* ... the next clean step grows it, as it would have without the interruption. */
    rt_loss_scaler_update(s, false);
    CHECK(s->scale == 32, "the resumed count did not carry on: scale %g", s->scale);

    /* A fixed scale is the command line's, whatever the file says. */
    set_mode(RT_LOSS_SCALE_FIXED, 100, 2, 0.5, 3);
    rt_checkpoint_load(dir, ps);
    CHECK(rt_loss_scale() == 100, "fixed scale after resuming: %g", rt_loss_scale());

    /* A file of a run without scaling: the dynamic scaler starts afresh. */
    set_mode(RT_LOSS_SCALE_OFF, 8, 2, 0.5, 3);
    rt_checkpoint_save(dir, ps, 6);
    set_mode(RT_LOSS_SCALE_DYNAMIC, 8, 2, 0.5, 3);
    CHECK(rt_checkpoint_load(dir, ps) == 6 && rt_loss_scale() == 8 && s->clean == 0,
          "from a run without scaling: scale %g", rt_loss_scale());

    /* The previous format (BURSTCK2: no scaler fields) still loads. */
    for (int k = 0; k < 5; k++)
        rt_loss_scaler_update(s, false);
    rt_checkpoint_save(dir, ps, 7);
    char path[512];
    snprintf(path, sizeof path, "%s/step-%012d/rank-0.ckpt", dir, 7);
    FILE *f = fopen(path, "rb");
    unsigned char b[4096];
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 100 && !memcmp(b, "BURSTCK3", 8), "the file's format (%zu bytes)", n);
    if (n > 100) {
        memcpy(b, "BURSTCK2", 8);
        memmove(b + 44, b + 60, n - 60); /* the scale and the clean steps go */
        n -= 16;
        fix_sum(b, n);
        f = fopen(path, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
    }
    rt_init_const(p->value, 9.0f);
    rt_loss_scaler_configure();
    CHECK(rt_checkpoint_load(dir, ps) == 7 && rt_f32(p->value)[1] == -0.25f &&
              rt_loss_scale() == 8 && s->clean == 0,
          "a BURSTCK2 file: w[1] = %g, scale %g", rt_f32(p->value)[1], rt_loss_scale());

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void)
{
    alarm(50);
    defaults = rt_opts_g;
    rt_pool *P = rt_pool_new();
    state_machine();
    scale_and_skip(P);
    checkpoints(P);
    rt_comm_free_all();
    rt_pool_free(P);
    printf("test_loss_scale: %s\n", check_failures ? "FAILED" : "all checks passed");
    return check_failures ? 1 : 0;
}
