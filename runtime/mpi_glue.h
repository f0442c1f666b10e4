/* mpi_glue.h: what the files that call MPI share (the shared code and the backends'
 * transports; never the .cu files, whose C++ must not see mpi.h): a rank set's
 * communicator and MPI errors turned into fatal errors that name the rank, the op and
 * MPI's error string. */
#ifndef BURSTRT_MPI_GLUE_H
#define BURSTRT_MPI_GLUE_H

#include "internal.h"

#include <mpi.h>

struct rt_comm_mpi {
    MPI_Comm comm; /* MPI_COMM_NULL on non-members and before MPI starts */
};

static inline MPI_Comm rt_comm_mpi(const rt_comm *c)
{
    return c->mpi->comm;
}

/* Fatal error unless err is MPI_SUCCESS. */
void rt_mpi_check(int err, const char *op);

/* Set by a backend whose ranks' threads outnumber the node's CPUs (cpu/device.c): a
 * rank that waits for another then sleeps between polls instead of spinning. */
extern bool rt_mpi_wait_sleeps;
/* Waits for n requests: MPI_Waitall while every rank has a CPU of its own and no
 * background work may run; otherwise polls, running one background slice between
 * polls while there is one (background.c), and after 64 empty polls sleeping between
 * them when rt_mpi_wait_sleeps (1 us, doubling up to 100 us). */
void rt_mpi_wait(int n, MPI_Request *req, const char *op);

/* nodes.c: where every rank runs and the heartbeat sockets, after MPI_Init (collective
 * over the world; node: MPI's shared-memory split). */
void rt_nodes_setup(MPI_Comm node);

#endif
