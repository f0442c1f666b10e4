/* test_mpi_defaults.c (mpirun -np 2, and -np 2 with the user's own choice in the
 * environment): rt_init chooses Open MPI's nonblocking all-reduce algorithm
 * (OMPI_MCA_coll_libnbc_iallreduce_algorithm = 3, Rabenseifner) when every rank on
 * the node has a CPU of its own, leaves it alone when the ranks outnumber the CPUs,
 * and never overrides a value the user set (BURSTRT_TEST_USER_ALG names it for the
 * test). Then a gradient all-reduce started and waited for, the way the gradient
 * buckets run, sums to what every rank contributed. */
#include "check.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *user = getenv("BURSTRT_TEST_USER_ALG");
    rt_init(&argc, &argv, "test_mpi_defaults");
    const char *alg = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(local != NULL, "not launched by Open MPI's mpirun");
    if (user)
        CHECK(alg && strcmp(alg, user) == 0, "the user's %s became %s", user, alg ? alg : "unset");
    else if (local && atol(local) <= cpus)
        CHECK(alg && strcmp(alg, "3") == 0, "%s ranks on %ld CPUs: algorithm %s, expected 3", local,
              cpus, alg ? alg : "unset");
    else
        CHECK(alg == NULL, "%s ranks on %ld CPUs: algorithm %s, expected none", local, cpus, alg);

    /* The sum a bucket makes with the chosen algorithm: rank r adds (r + 1) * i. */
    enum { N = 300000 }; /* 1.2 MB, a bucket of fmnist's size */
    float *g = calloc(N, sizeof *g);
    CHECK(g != NULL, "out of memory");
    if (!g)
        return 1;
    int r = rt_rank(), k = rt_world_size();
    for (int i = 0; i < N; i++)
        g[i] = (float)((r + 1) * (i % 1000));
    int ranks[2] = {0, 1};
    rt_check_world_size(2);
    rt_comm *world = rt_comm_new(2, ranks);
    rt_grad_allreduce_start(world, g, N);
    rt_grads_wait();
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += g[i] != (float)((double)k * (k + 1) / 2 * (i % 1000));
    CHECK(bad == 0, "%d of %d sums wrong", bad, (int)N);
    free(g);
    int failed = (int)rt_world_sum(check_failures);
    rt_finalize();
    if (r == 0)
        printf("test_mpi_defaults: %s\n", failed ? "FAILED" : "ok");
    return failed ? 1 : 0;
}
