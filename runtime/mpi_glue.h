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

#endif
