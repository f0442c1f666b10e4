/* test_checkpoint.c (mpirun -np 2): checkpoint and resume through the common options
 * (--checkpoint-dir, --checkpoint-every 3). A burst-planned MLP (layer 1 on both ranks,
 * layer 2 on rank 1, layer 3 on rank 0) is trained 6 steps uninterrupted; a second run
 * checkpoints via rt_step_end and "crashes" after step 3; a third run starts from
 * zeroed weights, restores the checkpoint and must reproduce steps 3..5 exactly
 * (momentum buffers, step and RNG included). With --corrupt (one rank) the test flips
 * a byte of a checkpoint and expects the load to fail naming the file; ctest matches
 * that message. */
#include "check.h"
#include "mlp_program.h"

#include <mpi.h>

#define BATCH 6

static void zero_all(mlp *m)
{
    rt_param *ps[6] = {m->w1, m->b1, m->w2, m->b2, m->w3, m->b3};
    for (int i = 0; i < 6; i++)
        if (ps[i])
            rt_init_const(ps[i]->value, 0.0f);
}

int main(int argc, char **argv)
{
    bool corrupt = argc > 1 && !strcmp(argv[argc - 1], "--corrupt");
    if (corrupt)
        argc--;
    const rt_options *o = rt_init(&argc, &argv, "test_checkpoint");
    rt_pool *P = rt_pool_new();
    rt_data *d = rt_data_open(o, 1, (int64_t[]){MLP_IN}, RT_F32, 0, MLP_OUT, 1);
    rt_sgd opt = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
    if (corrupt) {
        rt_comm *c = rt_comm_new(1, (int[]){0});
        mlp m = {0};
        mlp_build(&m, P, c, c, c, BATCH, o->seed);
        mlp_step(&m, d, 0, o->seed, &opt);
        rt_checkpoint_save(o->checkpoint_dir, m.ps, 1);
        char path[1024];
        snprintf(path, sizeof path, "%s/step-000000000001/rank-0.ckpt", o->checkpoint_dir);
        FILE *f = fopen(path, "r+b");
        fseek(f, 200, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, 200, SEEK_SET);
        fputc(ch ^ 0x40, f);
        fclose(f);
        rt_checkpoint_load(o->checkpoint_dir, m.ps); /* must not return */
        fprintf(stderr, "test_checkpoint: a corrupt checkpoint was accepted\n");
        return 1;
    }
    rt_check_world_size(2);
    rt_comm *c1 = rt_comm_new(2, (int[]){0, 1}), *c2 = rt_comm_new(1, (int[]){1}),
            *c3 = rt_comm_new(1, (int[]){0});
    double full[6], resumed[6];

    mlp a = {0};
    mlp_build(&a, P, c1, c2, c3, BATCH, o->seed);
    for (int s = 0; s < 6; s++)
        full[s] = mlp_step(&a, d, s, o->seed, &opt);

    mlp b = {0};
    mlp_build(&b, P, c1, c2, c3, BATCH, o->seed);
    CHECK(rt_checkpoint_attach(b.ps) == 0, "attach without --resume starts at step 0");
    for (int s = 0; s < 4; s++) /* checkpoints after step 2; step 3 is lost in the "crash" */
        mlp_step(&b, d, s, o->seed, &opt);

    mlp c = {0};
    mlp_build(&c, P, c1, c2, c3, BATCH, o->seed);
    zero_all(&c);
    int64_t start = rt_checkpoint_load(o->checkpoint_dir, c.ps);
    CHECK(start == 3, "resume from step %lld, expected 3", (long long)start);
    for (int64_t s = start; s < 6; s++) {
        resumed[s] = mlp_step(&c, d, s, o->seed, &opt);
        CHECK(resumed[s] == full[s], "step %lld: resumed loss %.9f, uninterrupted %.9f",
              (long long)s, resumed[s], full[s]);
    }
    rt_data_close(d);
    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    if (rt_rank() == 0)
        printf("test_checkpoint: %s\n", failed ? "FAILED" : "resumed run equals uninterrupted run");
    rt_finalize();
    return failed ? 1 : 0;
}
