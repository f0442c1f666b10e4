/*
 * slice_allreduce.c: what one small all-reduce costs after compute when a
 * node's ranks outnumber its cores (the fit of a cluster's `slice`,
 * PLAN_SLICE_DEFAULT in passes/plan.h; docs/plan.md, "Ranks sharing cores").
 *
 * Every rank burns WORK_MS of its own CPU time, then joins NAR 8-byte
 * MPI_Allreduce calls; 60 steps after 10 of warm-up, the slowest rank's mean
 * step. The extra of one all-reduce is the step with NAR = 1 minus the step
 * with NAR = 0; the cost model's all-reduce of 8 bytes among 4 ranks is a
 * tree of 4 steps, so slice = extra / 4. Not built by CMake (it needs only
 * MPI):
 *
 *   mpicc -O2 tests/bench/sim/slice_allreduce.c -o /tmp/slice_allreduce
 *   for n in 0 1 2; do flock /tmp/measure.lock setsid nice -n -20 \
 *       mpirun --oversubscribe -np 4 /tmp/slice_allreduce 5 $n; done
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile double sink;

/* Busy work until this thread has run `s` seconds of CPU time. */
static void work(double s)
{
    double t0 = cpu_seconds(), x = 0;
    while (cpu_seconds() - t0 < s)
        for (int i = 0; i < 1000; i++)
            x += i * 1e-9;
    sink = x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int r, k;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &k);
    if (argc != 3) {
        if (r == 0)
            fprintf(stderr, "usage: slice_allreduce WORK_MS NAR\n");
        MPI_Finalize();
        return 2;
    }
    double w = atof(argv[1]) * 1e-3, b[1] = {0}, t0 = 0;
    int nar = atoi(argv[2]), it = 60;
    for (int i = 0; i < it + 10; i++) {
        if (i == 10) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        work(w);
        for (int j = 0; j < nar; j++)
            MPI_Allreduce(MPI_IN_PLACE, b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double t = (MPI_Wtime() - t0) / it, mx;
    MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (r == 0)
        printf("ranks %d, %.1f ms of CPU each, %d all-reduces: step %.3f ms\n", k, w * 1e3, nar,
               mx * 1e3);
    MPI_Finalize();
    return 0;
}
