/* mlp_losses.c: end-to-end check of the CUDA backend against the CPU backend. The
 * 3-layer MLP program of the runtime tests (tests/unit/runtime/mlp_program.h: linear,
 * relu, dropout, cross entropy, SGD with momentum; every layer on all ranks of the
 * world) is trained for 10 steps on synthetic data and prints "step S loss L". Built
 * twice: mlp_losses_cpu (CPU backend) and test_cuda_mlp (CUDA backend). With
 * BURSTRT_EXPECT_LOSSES=FILE (the CPU run's output), the CUDA run requires its losses
 * to match within 1e-5 relative (f32), 2e-2 (BURSTRT_COMPUTE_DTYPE=bf16/f16) or 5e-2
 * (also BURSTRT_STORAGE=16: activations in 16 bits). Without
 * a visible GPU the CUDA build prints "no GPU visible: skipped" and exits 77, unless
 * BURSTRT_TEST_NO_SKIP=1 asks for the runtime's own error (a test of that path). */
#include "../runtime/mlp_program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 10
#define BATCH 24

#ifndef MLP_CPU
int rt_cuda_visible_devices(void);
#endif

int main(int argc, char **argv)
{
#ifndef MLP_CPU
    const char *noskip = getenv("BURSTRT_TEST_NO_SKIP");
    if (!(noskip && !strcmp(noskip, "1")) && rt_cuda_visible_devices() == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
#endif
    const rt_options *o = rt_init(&argc, &argv, "mlp_losses");
    rt_pool *P = rt_pool_new();
    rt_data *d = rt_data_open(o, 1, (int64_t[]){MLP_IN}, RT_F32, 0, MLP_OUT, 1);
    int n = rt_world_size();
    int *ranks = malloc((size_t)n * sizeof *ranks);
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    rt_comm *all = rt_comm_new(n, ranks);
    free(ranks);
    mlp m = {0};
    mlp_build(&m, P, all, all, all, BATCH, o->seed);
    rt_sgd opt = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f};
    double losses[STEPS];
    for (int64_t s = 0; s < STEPS && s < o->iterations; s++) {
        losses[s] = mlp_step(&m, d, s, o->seed, &opt);
        rt_report_loss(s, losses[s]);
    }
    int failed = 0;
    const char *expect = getenv("BURSTRT_EXPECT_LOSSES");
    if (expect && rt_rank() == 0) {
        const char *dt = getenv("BURSTRT_COMPUTE_DTYPE");
        double tol = rt_storage_dtype() != RT_F32                        ? 5e-2
                     : dt && (!strcmp(dt, "bf16") || !strcmp(dt, "f16")) ? 2e-2
                                                                         : 1e-5;
        FILE *f = fopen(expect, "r");
        if (!f) {
            perror(expect);
            failed = 1;
        }
        long long s;
        double want;
        int seen = 0;
        while (f && fscanf(f, "step %lld loss %lf\n", &s, &want) == 2) {
            if (s < 0 || s >= STEPS || s >= o->iterations)
                continue;
            double rel = fabs(losses[s] - want) / fabs(want);
            seen++;
            if (!(rel <= tol)) {
                printf("FAIL step %lld: loss %.9g, CPU backend %.9g (relative %.2e > %.0e)\n", s,
                       losses[s], want, rel, tol);
                failed = 1;
            }
        }
        if (f)
            fclose(f);
        if (!seen) {
            printf("FAIL: no losses in %s\n", expect);
            failed = 1;
        }
        if (!failed)
            printf("mlp: %d losses equal the CPU backend's within %.0e\n", seen, tol);
    }
    rt_data_close(d);
    rt_pool_free(P);
    rt_finalize();
    return failed;
}
