/* test_fault.c: a job in which one rank fails at step 2, run by run_fault.sh under
 * mpirun. `hang`: rank 2 stops making progress (sleeps), so the others block in the
 * gradient all-reduce until their watchdog (--step-timeout) aborts the job. `die`:
 * rank 2 exits abruptly. `badshape`: rank 2 hands rt_reshard a tensor of the wrong
 * shape, a runtime error. Every rank must be gone, with a non-zero exit and a message
 * naming the rank (and the step or the op), well within 30 s. `evalpause`: no fault,
 * but a phase after the steps (like test-set evaluation) outlasts --step-timeout; the
 * watchdog must leave it alone and the job exit 0. */
#include "burstrt.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[argc - 1] : "";
    bool hang = !strcmp(mode, "hang"), die = !strcmp(mode, "die");
    bool badshape = !strcmp(mode, "badshape"), evalpause = !strcmp(mode, "evalpause");
    if (hang || die || badshape || evalpause)
        argc--;
    const rt_options *o = rt_init(&argc, &argv, "test_fault");
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
    int64_t rows = s1 - s0 + (badshape && rt_rank() == 2 ? 1 : 0);
    rt_tensor *act = rt_tensor_new(P, RT_F32, 2, (int64_t[]){rows, 4});
    rt_tensor *gathered =
        rt_comm_member(first) ? rt_tensor_new(P, RT_F32, 2, (int64_t[]){8, 4}) : NULL;
    float g[4] = {1, 2, 3, 4};
    for (int64_t step = 0; step < o->iterations; step++) {
        rt_step_begin(step);
        if (step == 2 && rt_rank() == 2) {
            if (hang)
                sleep(60);
            if (die) {
                fprintf(stderr, "test_fault: rank 2 exits at step 2\n");
                _exit(7);
            }
        }
        rt_trace_push("grad_allreduce");
        rt_allreduce_sum(all, g, 4);
        rt_trace_pop();
        if (step == 2)
            rt_reshard(act, all, gathered, first, 8, 4);
        rt_step_end(step);
    }
    if (evalpause)
        sleep((unsigned)o->step_timeout + 2);
    rt_pool_free(P);
    rt_finalize();
    return 0;
}
