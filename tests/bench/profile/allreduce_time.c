/*
 * allreduce_time.c: what a blocking MPI_Allreduce of f32 sums costs on this
 * machine at the sizes a plan's gradients have, against the cost model's
 * price on a link of ALPHA_US latency and GBPS bandwidth (passes/commcost.c:
 * min(ring, tree), ring = 2(k-1)/k bytes/bw + 2(k-1) alpha, tree =
 * 2 ceil(log2 k) alpha + 2 bytes/bw). It tells whether a cluster's link (the
 * `shm` of examples/clusters/cpu.burst: 5 GB/s @ 1 us) prices the collective
 * itself right, apart from the ranks' skew that a program's gradient wait
 * also holds (docs/plan.md, "Measuring a profile").
 *
 * Every size: a barrier, then one all-reduce, timed; 5 untimed, REPS timed;
 * rank 0 prints the median and the minimum, and the median of the same sum
 * made with MPI_Iallreduce + MPI_Wait (what the runtime's gradient buckets
 * use, runtime/cpu/grad_mpi.c), waited for at once. Not built by CMake (it needs
 * only MPI):
 *
 *   mpicc -O2 tests/bench/profile/allreduce_time.c -o /tmp/allreduce_time
 *   flock /tmp/measure.lock setsid nice -n -20 \
 *       mpirun -np 2 --bind-to core /tmp/allreduce_time 1 5
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { WARMUP = 5, REPS = 31 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double model(int k, double bytes, double alpha, double bw)
{
    if (k <= 1)
        return 0;
    double ring = 2.0 * (k - 1) / k * bytes / bw + 2.0 * (k - 1) * alpha;
    double tree = 2.0 * ceil(log2(k)) * alpha + 2.0 * bytes / bw;
    return ring < tree ? ring : tree;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, k;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k);
    double alpha = (argc > 1 ? atof(argv[1]) : 1) * 1e-6;
    double bw = (argc > 2 ? atof(argv[2]) : 5) * 1e9;
    /* 8 B (a loss), 5 KB (fmnist's fc2), 74 KB (its conv2), 1.6 MB (its fc1),
     * 1.7 MB (every gradient of fmnist_cnn), 4 MB */
    static const long sizes[] = {8, 5160, 73984, 1606144, 1686568, 4194304};
    if (rank == 0)
        printf("%d ranks, model link %.3g us @ %.3g GB/s\n%10s %12s %12s %12s %10s %14s\n", k,
               alpha * 1e6, bw * 1e-9, "bytes", "median us", "min us", "model us", "med/model",
               "Iallreduce us");
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        long n = sizes[s] / 4;
        float *buf = calloc((size_t)n, sizeof *buf);
        double t[REPS], u[REPS];
        if (!buf)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (int i = 0; i < WARMUP + REPS; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (i >= WARMUP)
                t[i - WARMUP] = MPI_Wtime() - t0;
        }
        for (int i = 0; i < WARMUP + REPS; i++) {
            MPI_Request req;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (i >= WARMUP)
                u[i - WARMUP] = MPI_Wtime() - t0;
        }
        qsort(t, REPS, sizeof *t, cmp_double);
        qsort(u, REPS, sizeof *u, cmp_double);
        double m = model(k, (double)n * 4, alpha, bw);
        if (rank == 0)
            printf("%10ld %12.1f %12.1f %12.1f %10.2f %14.1f\n", n * 4, t[REPS / 2] * 1e6,
                   t[0] * 1e6, m * 1e6, m > 0 ? t[REPS / 2] / m : 0, u[REPS / 2] * 1e6);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
