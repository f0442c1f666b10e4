/* test_fault.c: a small job (3 ranks, one parameter all-reduced every step) into which
 * run_fault.sh injects one fault per mode, under mpirun. Every fault must end every rank
 * with a non-zero status, with the specific message that names the rank at fault;
 * run_fault.sh checks the text.
 *   hang          rank 2 sleeps in step 2: its watchdog (or a peer's) names it
 *   stop          rank 2 stops (SIGSTOP) in step 2: a peer's watchdog names it
 *   stop-startup  rank 2 stops right after rt_init, while the others make rank sets
 *   stop-resume   rank 2 stops before loading the checkpoint the others are loading
 *   die           rank 2 exits in step 2: mpirun names it, the others say where they were
 *   badshape      rank 2 hands rt_reshard a shard of the wrong shape: a runtime error
 *   mismatch      rank 2 sums over the world in step 2 where its peers all-reduce the
 *                 gradients: every rank waits, in different calls, and the watchdog says so
 *   evalpause     no fault: a phase after the steps outlasts --step-timeout, and the
 *                 watchdog leaves it alone (exit 0)
 *   pause-all     no fault: the job runs until told to end, so that run_fault.sh can
 *                 suspend and continue it as a whole at its own pace; rank 0 creates
 *                 $BURSTRT_TEST_DIR/started after step 10, and the job ends after the
 *                 step in which rank 0 finds $BURSTRT_TEST_DIR/done (exit 0)
 * With --checkpoint-dir the job checkpoints (every --checkpoint-every steps and after the
 * last) and with --resume it resumes; rank 0 prints "resumed at step N" and the final
 * parameter, so that a resumed run can be compared with an uninterrupted one. */
#include "burstrt.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *modes[] = {"hang",     "stop",      "stop-startup", "stop-resume", "die",
                           "badshape", "evalpause", "mismatch",     "pause-all"};
    const char *mode = "";
    for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof *modes; i++)
        if (!strcmp(argv[argc - 1], modes[i])) {
            mode = modes[i];
            argc--;
        }
    const rt_options *o = rt_init(&argc, &argv, "test_fault");
    const bool me2 = rt_rank() == 2;
    if (me2 && !strcmp(mode, "stop-startup"))
        raise(SIGSTOP);
    int n = rt_world_size();
    int ranks[16];
    for (int i = 0; i < n && i < 16; i++)
        ranks[i] = i;
    rt_comm *all = rt_comm_new(n, ranks);
    rt_comm *first = rt_comm_new(1, ranks);
    rt_pool *P = rt_pool_new();
    int64_t s0, s1;
    rt_comm_shard(all, 8, &s0, &s1);
    /* Rank 2's shard of 8 samples over 3 ranks is 2 samples: give it one too many. */
    int64_t rows = s1 - s0 + (!strcmp(mode, "badshape") && me2 ? 1 : 0);
    rt_tensor *act = rt_tensor_new(P, RT_F32, 2, (int64_t[]){rows, 4});
    rt_tensor *gathered =
        rt_comm_member(first) ? rt_tensor_new(P, RT_F32, 2, (int64_t[]){8, 4}) : NULL;
    rt_params *ps = rt_params_new(P);
    rt_param *w = rt_param_new(ps, "w", all, 1, (int64_t[]){4});
    rt_init_uniform(w->value, 1.0f, o->seed, 1, 0);
    if (me2 && !strcmp(mode, "stop-resume"))
        raise(SIGSTOP);
    int64_t start = rt_checkpoint_attach(ps);
    if (o->resume && rt_rank() == 0)
        printf("resumed at step %lld\n", (long long)start);
    rt_sgd opt = {.lr = 0.1f, .momentum = 0.9f};
    const bool told = !strcmp(mode, "pause-all");
    const char *dir = getenv("BURSTRT_TEST_DIR");
    char started[4096], done[4096];
    if (told &&
        (!dir || snprintf(started, sizeof started, "%s/started", dir) >= (int)sizeof started ||
         snprintf(done, sizeof done, "%s/done", dir) >= (int)sizeof done)) {
        fprintf(stderr, "test_fault: pause-all needs BURSTRT_TEST_DIR (a short path)\n");
        return 2;
    }
    for (int64_t step = start; step < o->iterations; step++) {
        rt_step_begin(step);
        if (step == 2 && me2) {
            if (!strcmp(mode, "hang"))
                sleep(60);
            if (!strcmp(mode, "stop"))
                raise(SIGSTOP);
            if (!strcmp(mode, "die")) {
                fprintf(stderr, "test_fault: rank 2 exits at step 2\n");
                _exit(7);
            }
        }
        rt_params_zero_grad(ps);
        for (int i = 0; i < 4; i++)
            rt_f32(w->grad)[i] = rt_f32(w->value)[i] * (float)(rt_rank() + 1) + (float)step;
        rt_trace_push("grad_allreduce");
        if (step == 2 && me2 && !strcmp(mode, "mismatch"))
            rt_world_sum(1.0); /* its peers never join it: they wait in the all-reduce */
        rt_params_allreduce_grads(ps);
        rt_trace_pop();
        rt_sgd_step(ps, &opt);
        if (step == 2)
            rt_reshard(act, all, gathered, first, 8, 4);
        rt_step_end(step);
        if (told) {
            if (step == 10 && rt_rank() == 0) {
                FILE *f = fopen(started, "w");
                if (f)
                    fclose(f);
            }
            if (rt_world_sum(rt_rank() == 0 && access(done, F_OK) == 0) > 0) {
                if (rt_rank() == 0)
                    printf("told to end after step %lld\n", (long long)step);
                break;
            }
        }
    }
    if (rt_rank() == 0)
        printf("final w %.9g %.9g %.9g %.9g\n", rt_f32(w->value)[0], rt_f32(w->value)[1],
               rt_f32(w->value)[2], rt_f32(w->value)[3]);
    if (!strcmp(mode, "evalpause"))
        sleep((unsigned)o->step_timeout + 2);
    rt_pool_free(P);
    rt_finalize();
    return 0;
}
