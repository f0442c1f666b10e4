/* test_mlp_burst.c (mpirun -np 4): the strongest end-to-end check of the runtime API.
 * A 3-layer MLP trained for 10 SGD steps under a burst plan (layer 1 on 4 ranks, layer 2
 * on ranks {3,1}, layer 3 on rank {2}) must give the same losses, within 1e-5 relative,
 * as the same program with every layer on one rank (computed on rank 0 alongside).
 * Also checks that --trace produced one Chrome trace with events of all 4 ranks. */
#include "check.h"
#include "mlp_program.h"

#include <mpi.h>

#define STEPS 10
#define BATCH 10

static void train(rt_pool *P, const rt_options *o, rt_data *d, const rt_comm *c1, const rt_comm *c2,
                  const rt_comm *c3, double *losses)
{
    mlp m = {0};
    mlp_build(&m, P, c1, c2, c3, BATCH, o->seed);
    rt_sgd opt = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f};
    for (int64_t s = 0; s < STEPS; s++)
        losses[s] = mlp_step(&m, d, s, o->seed, &opt);
}

int main(int argc, char **argv)
{
    const rt_options *o = rt_init(&argc, &argv, "test_mlp_burst");
    rt_check_world_size(4);
    rt_pool *P = rt_pool_new();
    rt_data *d = rt_data_open(o, 1, (int64_t[]){MLP_IN}, RT_F32, 0, MLP_OUT, 1);
    /* Every rank set of both plans is created on every rank, in the same order. */
    rt_comm *c1 = rt_comm_new(4, (int[]){0, 1, 2, 3});
    rt_comm *c2 = rt_comm_new(2, (int[]){3, 1});
    rt_comm *c3 = rt_comm_new(1, (int[]){2});
    rt_comm *one = rt_comm_new(1, (int[]){0});
    double burst[STEPS], ref[STEPS];
    train(P, o, d, c1, c2, c3, burst);
    train(P, o, d, one, one, one, ref);
    if (rt_rank() == 0) {
        for (int s = 0; s < STEPS; s++) {
            double rel = fabs(burst[s] - ref[s]) / fabs(ref[s]);
            CHECK(rel <= 1e-5, "step %d: burst loss %.9f, one-rank loss %.9f (rel %.2g)", s,
                  burst[s], ref[s], rel);
            printf("step %2d  loss burst %.7f  one rank %.7f\n", s, burst[s], ref[s]);
        }
        CHECK(burst[STEPS - 1] < burst[0], "the loss does not decrease");
    }
    rt_data_close(d);
    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    char trace[600];
    snprintf(trace, sizeof trace, "%s", o->trace_path);
    rt_finalize();
    if (trace[0] && !failed) {
        /* rt_finalize wrote the trace; rank 0 checks it holds all ranks. */
        FILE *f = fopen(trace, "r");
        CHECK(f != NULL, "trace file %s missing", trace);
        if (f) {
            static char text[1 << 20];
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = 0;
            fclose(f);
            CHECK(text[0] == '{' && strstr(text, "\"traceEvents\"") && strstr(text, "\"pid\":3") &&
                      strstr(text, "fc1.fwd") && strstr(text, "}\n]}"),
                  "trace is not a Chrome trace with all ranks");
        }
        failed = check_failures;
    }
    if (!failed && rt_rank() == 0)
        printf("test_mlp_burst: losses of the burst plan equal the one-rank run\n");
    return failed ? 1 : 0;
}
