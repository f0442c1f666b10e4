/* test_optim.c: SGD (plain, momentum + weight decay, Nesterov) and Adam against steps
 * computed by hand from PyTorch's update rules, and the counter-based initialisers:
 * identical for the same (seed, layer, index), different otherwise, within bounds. */
#include "check.h"

static rt_param *one_param(rt_pool *P, rt_params **ps, float w0, float w1)
{
    rt_comm *self = rt_comm_new(1, (int[]){0});
    *ps = rt_params_new(P);
    rt_param *p = rt_param_new(*ps, "w", self, 1, (int64_t[]){2});
    rt_f32(p->value)[0] = w0;
    rt_f32(p->value)[1] = w1;
    return p;
}

static void set_grad(rt_param *p, float g0, float g1)
{
    rt_f32(p->grad)[0] = g0;
    rt_f32(p->grad)[1] = g1;
}

#define CHECK_W(p, a, b, what)                                                                  \
    CHECK(fabs(rt_f32((p)->value)[0] - (a)) < 1e-6 && fabs(rt_f32((p)->value)[1] - (b)) < 1e-6, \
          "%s: w = (%.8f, %.8f), expected (%.8f, %.8f)", what, rt_f32((p)->value)[0],           \
          rt_f32((p)->value)[1], (double)(a), (double)(b))

int main(void)
{
    rt_pool *P = rt_pool_new();
    rt_params *ps;

    /* SGD lr 0.1, momentum 0.9, weight decay 0.01; w = (1, -2), g = (0.5, 0.25) twice.
     * step 1: d = g + 0.01 w = (0.51, 0.23); buf = d; w = (0.949, -2.023)
     * step 2: d = (0.50949, 0.22977); buf = 0.9 buf + d = (0.96849, 0.43677);
     *         w = (0.852151, -2.066677) */
    rt_param *p = one_param(P, &ps, 1.0f, -2.0f);
    rt_sgd sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
    set_grad(p, 0.5f, 0.25f);
    rt_sgd_step(ps, &sgd);
    CHECK_W(p, 0.949, -2.023, "sgd step 1");
    rt_sgd_step(ps, &sgd);
    CHECK_W(p, 0.852151, -2.066677, "sgd step 2");

    /* Nesterov, step 1: w -= lr (d + 0.9 d) = 1 - 0.1 * 1.9 * 0.51 = 0.9031 */
    p = one_param(P, &ps, 1.0f, -2.0f);
    sgd.nesterov = true;
    set_grad(p, 0.5f, 0.25f);
    rt_sgd_step(ps, &sgd);
    CHECK_W(p, 0.9031, -2.0437, "nesterov step 1");

    /* Plain SGD: w -= lr g */
    p = one_param(P, &ps, 1.0f, -2.0f);
    rt_sgd plain = {.lr = 0.5f};
    set_grad(p, 0.5f, 0.25f);
    rt_sgd_step(ps, &plain);
    CHECK_W(p, 0.75, -2.125, "plain sgd");

    /* Adam lr 0.1, betas (0.9, 0.999), eps 1e-8. Step 1 moves each weight by lr against
     * the sign of its gradient: (0.9, -2.1). Step 2 with g = (-1, 0.25):
     * m = (-0.055, 0.0475), mhat = m / 0.19 = (-0.289473684, 0.25);
     * v = (0.00124975, 0.0001249375), vhat = v / 0.001999 = (0.625187594, 0.0625);
     * w0 = 0.9 + 0.1 * 0.289473684 / 0.790688 = 0.93661; w1 = -2.1 - 0.1 * 0.25 / 0.25 = -2.2 */
    p = one_param(P, &ps, 1.0f, -2.0f);
    rt_adam adam = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    set_grad(p, 0.5f, 0.25f);
    rt_adam_step(ps, &adam);
    CHECK_W(p, 0.9, -2.1, "adam step 1");
    set_grad(p, -1.0f, 0.25f);
    rt_adam_step(ps, &adam);
    double m0 = -0.055 / 0.19, v0 = (0.999 * 0.00025 + 0.001 * 1.0) / (1 - 0.999 * 0.999);
    CHECK(fabs(rt_f32(p->value)[0] - (0.9 - 0.1 * m0 / sqrt(v0))) < 2e-6 &&
              fabs(rt_f32(p->value)[0] - 0.93661) < 1e-4,
          "adam step 2: w0 = %.7f", rt_f32(p->value)[0]);
    CHECK(fabs(rt_f32(p->value)[1] - (-2.2)) < 2e-6, "adam step 2: w1 = %.7f", rt_f32(p->value)[1]);

    /* zero_grad clears gradients; buffers have none and are not updated. */
    rt_param *buf =
        rt_buffer_new(ps, "running_mean", rt_comm_new(1, (int[]){0}), 1, (int64_t[]){2});
    rt_f32(buf->value)[0] = 3.0f;
    rt_params_zero_grad(ps);
    CHECK(rt_f32(p->grad)[0] == 0.0f && rt_f32(p->grad)[1] == 0.0f, "zero_grad");
    rt_adam_step(ps, &adam);
    CHECK(buf->grad == NULL && rt_f32(buf->value)[0] == 3.0f, "buffers are not trained");

    /* Initialisers: same keys, same values; other layer, other values; within bounds. */
    rt_tensor *a = rt_tensor_new(P, RT_F32, 2, (int64_t[]){64, 25});
    rt_tensor *b = rt_tensor_new(P, RT_F32, 2, (int64_t[]){64, 25});
    rt_init_kaiming_uniform(a, 25, 9, 4, 0);
    rt_init_kaiming_uniform(b, 25, 9, 4, 0);
    CHECK(!memcmp(a->data, b->data, (size_t)a->numel * 4), "init is not deterministic");
    rt_init_kaiming_uniform(b, 25, 9, 5, 0);
    CHECK(memcmp(a->data, b->data, (size_t)a->numel * 4) != 0, "init ignores the layer id");
    double mean = 0, lo = 1, hi = -1;
    for (int64_t i = 0; i < a->numel; i++) {
        mean += rt_f32(a)[i];
        lo = fmin(lo, rt_f32(a)[i]);
        hi = fmax(hi, rt_f32(a)[i]);
    }
    mean /= (double)a->numel;
    CHECK(lo >= -0.2 && hi <= 0.2 && lo < -0.18 && hi > 0.18 && fabs(mean) < 0.02,
          "kaiming uniform(1/sqrt(25)) range [%g, %g] mean %g", lo, hi, mean);
    rt_init_normal(a, 0.0f, 0.02f, 9, 4, 1);
    double ss = 0;
    for (int64_t i = 0; i < a->numel; i++)
        ss += (double)rt_f32(a)[i] * rt_f32(a)[i];
    CHECK(fabs(sqrt(ss / (double)a->numel) - 0.02) < 0.002, "normal init std %g",
          sqrt(ss / (double)a->numel));

    /* Layer keys: a pure function of the name (31 bits of FNV-1a: "conv1" -> 0x1f5c2e02). */
    CHECK(rt_layer_key("conv1") == rt_layer_key("conv1") &&
              rt_layer_key("conv1") != rt_layer_key("conv2") &&
              rt_layer_key("conv1") == 0x1f5c2e02 && rt_layer_key("fc1") >= 0,
          "rt_layer_key(\"conv1\") = %#x", rt_layer_key("conv1"));

    rt_pool_free(P);
    rt_finalize();
    if (check_failures) {
        fprintf(stderr, "test_optim: %d checks failed\n", check_failures);
        return 1;
    }
    printf("test_optim: all checks passed\n");
    return 0;
}
