/* test_loss_scale_mpi.c (mpirun -np 3, --loss-scale dynamic --loss-scale-init 1024
 * --loss-scale-interval 2): the skip decision of loss scaling is the world's. Three
 * parameters as a burst plan places them: `a` on ranks {0,1} (its gradient all-reduced
 * there), `b` on rank 2 alone, `c` on rank 1 alone. An inf in b's gradient (rank 2 only)
 * and a nan in rank 0's part of a's gradient (which the all-reduce spreads to rank 1 but
 * never to rank 2) must each skip the step on all three ranks, leave every parameter and
 * momentum buffer bit for bit as it was, and halve the scale everywhere; clean steps
 * unscale the summed gradients exactly and grow the scale on every rank after two. Then
 * the burst-planned MLP (mlp_program.h: layer 1 on all ranks, layer 2 on rank 1, the
 * loss on ranks {0,2}) trains with dynamic scaling and without: the losses must be the
 * same bit for bit (a power-of-two scale is exact in f32 arithmetic). */
#include "check.h"
#include "internal.h"
#include "mlp_program.h"

typedef struct {
    rt_params *ps;
    rt_param *a, *b, *c;
    const rt_comm *ca;
} model;

/* Each rank's part of the step's gradients, times the scale S: a's parts sum over
 * ranks 0 and 1 to (i + 1) / 8 * 3 / 4. */
static void backward(model *m, double S)
{
    const int r = rt_rank();
    if (m->a) {
        for (int64_t i = 0; i < m->a->grad->numel; i++)
            rt_f32(m->a->grad)[i] = (float)((double)(i + 1) / 8.0 * (r == 0 ? 0.5 : 0.25) * S);
    }
    if (m->b)
        for (int64_t i = 0; i < m->b->grad->numel; i++)
            rt_f32(m->b->grad)[i] = (float)((double)i / 16.0 * S);
    if (m->c)
        for (int64_t i = 0; i < m->c->grad->numel; i++)
            rt_f32(m->c->grad)[i] = (float)(-(double)i / 32.0 * S);
}

static void start_allreduce(model *m)
{
    if (m->a)
        rt_grad_allreduce_start(m->ca, rt_f32(m->a->grad), m->a->grad->numel);
}

static float *snapshot(const rt_tensor *t)
{
    float *c = malloc((size_t)t->numel * sizeof(float));
    memcpy(c, t->data, (size_t)t->numel * sizeof(float));
    return c;
}

/* Whether every value and momentum buffer of this rank equals the snapshots. */
static bool unchanged(model *m, float **snap)
{
    bool same = true;
    for (int i = 0; i < rt_params_count(m->ps); i++) {
        rt_param *p = rt_params_at(m->ps, i);
        size_t bytes = (size_t)p->value->numel * sizeof(float);
        same &= !memcmp(p->value->data, snap[2 * i], bytes);
        same &= !memcmp(p->state[0]->data, snap[2 * i + 1], bytes);
    }
    return same;
}

/* The scale is the same on every rank. */
static void check_scale(const char *when, double want)
{
    double s = rt_loss_scale();
    double sum = rt_world_sum(s);
    CHECK(s == want && sum == 3 * want, "%s: scale %g on this rank (sum %g), expected %g", when, s,
          sum, want);
}

static void skipped_step(model *m, const rt_sgd *opt, const char *what, int who, rt_param *p,
                         float bad, double after)
{
    float *snap[6];
    for (int i = 0; i < rt_params_count(m->ps); i++) {
        rt_param *q = rt_params_at(m->ps, i);
        snap[2 * i] = snapshot(q->value);
        snap[2 * i + 1] = snapshot(q->state[0]);
    }
    backward(m, rt_loss_scale());
    if (rt_rank() == who)
        rt_f32(p->grad)[1] = bad;
    start_allreduce(m);
    bool step = rt_loss_scale_unscale(m->ps);
    CHECK(!step, "%s: rank %d would step", what, rt_rank());
    if (step)
        rt_sgd_step(m->ps, opt);
    CHECK(unchanged(m, snap), "%s: a parameter or momentum buffer changed on rank %d", what,
          rt_rank());
    check_scale(what, after);
    for (int i = 0; i < 2 * rt_params_count(m->ps); i++)
        free(snap[i]);
}

static void clean_step(model *m, const rt_sgd *opt, const char *what, double after)
{
    backward(m, rt_loss_scale());
    start_allreduce(m);
    bool step = rt_loss_scale_unscale(m->ps);
    CHECK(step, "%s: rank %d skips", what, rt_rank());
    if (m->a)
        for (int64_t i = 0; i < m->a->grad->numel; i++)
            CHECK(rt_f32(m->a->grad)[i] == (float)((double)(i + 1) / 8.0 * 0.75),
                  "%s: a's unscaled sum [%lld] = %.9g", what, (long long)i, rt_f32(m->a->grad)[i]);
    if (step)
        rt_sgd_step(m->ps, opt);
    check_scale(what, after);
}

int main(int argc, char **argv)
{
    const rt_options *o = rt_init(&argc, &argv, "test_loss_scale_mpi");
    rt_check_world_size(3);
    rt_pool *P = rt_pool_new();
    const int r = rt_rank();
    rt_comm *ca = rt_comm_new(2, (int[]){0, 1}), *cb = rt_comm_new(1, (int[]){2}),
            *cc = rt_comm_new(1, (int[]){1});
    model m = {.ps = rt_params_new(P), .ca = ca};
    if (rt_comm_member(ca))
        m.a = rt_param_new(m.ps, "a", ca, 1, (int64_t[]){6});
    if (rt_comm_member(cb))
        m.b = rt_param_new(m.ps, "b", cb, 1, (int64_t[]){4});
    if (rt_comm_member(cc))
        m.c = rt_param_new(m.ps, "c", cc, 1, (int64_t[]){3});
    for (int i = 0; i < rt_params_count(m.ps); i++)
        rt_init_uniform(rt_params_at(m.ps, i)->value, 1.0f, o->seed, 7, i);
    rt_sgd opt = {.lr = 0.125f, .momentum = 0.5f};

    check_scale("at start", 1024);
    clean_step(&m, &opt, "clean step 1", 1024);
    skipped_step(&m, &opt, "inf in b's gradient on rank 2", 2, m.b, INFINITY, 512);
    skipped_step(&m, &opt, "nan in rank 0's part of a's gradient", 0, m.a, NAN, 256);
    clean_step(&m, &opt, "clean step 2", 256);
    clean_step(&m, &opt, "clean step 3", 512);
    CHECK(rt_loss_scaler_get()->skipped == 2, "rank %d counted %lld skipped steps", r,
          (long long)rt_loss_scaler_get()->skipped);

    /* The MLP with dynamic scaling and without: the same losses bit for bit. */
    rt_data *d = rt_data_open(o, 1, (int64_t[]){MLP_IN}, RT_F32, 0, MLP_OUT, 1);
    rt_comm *c1 = rt_comm_new(3, (int[]){0, 1, 2}), *c3 = rt_comm_new(2, (int[]){0, 2});
    rt_sgd mopt = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
    double with[6], without[6];
    rt_loss_scaler_configure();
    mlp s = {0};
    mlp_build(&s, P, c1, cc, c3, 6, o->seed);
    for (int k = 0; k < 6; k++)
        with[k] = mlp_step(&s, d, k, o->seed, &mopt);
    CHECK(rt_loss_scaler_get()->on && rt_loss_scale() == 8192 && rt_loss_scaler_get()->skipped == 0,
          "the MLP's run: scale %g (expected 1024 grown three times), %lld skipped",
          rt_loss_scale(), (long long)rt_loss_scaler_get()->skipped);
    rt_opts_g.loss_scale = RT_LOSS_SCALE_OFF;
    rt_loss_scaler_configure();
    mlp u = {0};
    mlp_build(&u, P, c1, cc, c3, 6, o->seed);
    for (int k = 0; k < 6; k++) {
        without[k] = mlp_step(&u, d, k, o->seed, &mopt);
        CHECK(with[k] == without[k], "MLP step %d: loss %.9g scaled, %.9g not", k, with[k],
              without[k]);
    }
    rt_data_close(d);
    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    if (r == 0)
        printf("test_loss_scale_mpi: %s\n",
               failed ? "FAILED" : "every rank skipped alike; scaled MLP equals unscaled");
    rt_finalize();
    return failed ? 1 : 0;
}
