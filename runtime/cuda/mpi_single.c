/* mpi_single.c: a one-rank implementation of the MPI subset in mpi_single/mpi.h, linked
 * into CUDA programs built by scripts/gpu-check so that a one-rank program starts as a
 * plain process on a machine without MPI. Every collective over one rank is a copy from
 * the send to the receive buffer (or nothing, in place); communicators are integers;
 * point-to-point calls have no partner in a one-rank world and fail loudly. */
#include "mpi_single/mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int initialised, finalised, next_comm = 2;

static size_t type_size(MPI_Datatype t)
{
    return (size_t)(t / 16);
}

int MPI_Init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    initialised = 1;
    return MPI_SUCCESS;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    *provided = required;
    return MPI_Init(argc, argv);
}

int MPI_Initialized(int *flag)
{
    *flag = initialised;
    return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
    *flag = finalised;
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    finalised = 1;
    return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int code)
{
    (void)comm;
    fflush(stdout);
    fflush(stderr);
    exit(code ? code : 1);
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    (void)comm;
    *rank = 0;
    return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    (void)comm;
    *size = 1;
    return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h)
{
    (void)comm;
    (void)h;
    return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    (void)comm;
    *out = next_comm++;
    return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    (void)comm;
    (void)key;
    *out = color == MPI_UNDEFINED ? MPI_COMM_NULL : next_comm++;
    return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

/* The shared-memory progress board of the watchdog is for worlds of two or more ranks;
 * a one-rank world never asks for it. */
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out)
{
    (void)type;
    (void)key;
    (void)info;
    return MPI_Comm_dup(comm, out);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *base,
                            MPI_Win *win)
{
    (void)size;
    (void)disp_unit;
    (void)info;
    (void)comm;
    *(void **)base = NULL;
    *win = 0;
    return MPI_ERR_OTHER;
}

int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *base)
{
    (void)win;
    (void)rank;
    *size = 0;
    *disp_unit = 1;
    *(void **)base = NULL;
    return MPI_ERR_OTHER;
}

int MPI_Win_free(MPI_Win *win)
{
    *win = 0;
    return MPI_SUCCESS;
}

int MPI_Error_string(int code, char *msg, int *len)
{
    *len =
        snprintf(msg, MPI_MAX_ERROR_STRING, "single-rank MPI stand-in: error %d (%s)", code,
                 code == MPI_ERR_OTHER ? "point-to-point message in a one-rank world" : "unknown");
    return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
    (void)comm;
    return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    (void)buf;
    (void)count;
    (void)t;
    (void)root;
    (void)comm;
    return MPI_SUCCESS;
}

static void copy_in(const void *send, void *recv, int count, MPI_Datatype t)
{
    if (send != MPI_IN_PLACE && send != recv && count > 0)
        memmove(recv, send, (size_t)count * type_size(t));
}

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    (void)op;
    (void)comm;
    copy_in(send, recv, count, t);
    return MPI_SUCCESS;
}

int MPI_Reduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm)
{
    (void)root;
    return MPI_Allreduce(send, recv, count, t, op, comm);
}

int MPI_Gather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount,
               MPI_Datatype rt, int root, MPI_Comm comm)
{
    (void)rcount;
    (void)rt;
    (void)root;
    (void)comm;
    copy_in(send, recv, scount, st);
    return MPI_SUCCESS;
}

int MPI_Allgather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount,
                  MPI_Datatype rt, MPI_Comm comm)
{
    (void)rcount;
    (void)rt;
    (void)comm;
    copy_in(send, recv, scount, st);
    return MPI_SUCCESS;
}

int MPI_Gatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts,
                const int *displs, MPI_Datatype rt, int root, MPI_Comm comm)
{
    (void)rcounts;
    (void)root;
    (void)comm;
    copy_in(send, (char *)recv + (size_t)displs[0] * type_size(rt), scount, st);
    return MPI_SUCCESS;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    (void)buf;
    (void)count;
    (void)t;
    (void)dest;
    (void)tag;
    (void)comm;
    *req = 0;
    return MPI_ERR_OTHER;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    return MPI_Isend(buf, count, t, src, tag, comm, req);
}

int MPI_Waitall(int n, MPI_Request *reqs, MPI_Status *st)
{
    (void)n;
    (void)reqs;
    (void)st;
    return MPI_SUCCESS;
}

/* One rank: a non-blocking all-reduce is complete when it starts. */
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    *req = 0;
    return MPI_Allreduce(send, recv, count, t, op, comm);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    (void)req;
    (void)st;
    *flag = 1;
    return MPI_SUCCESS;
}

/* Every request of one rank is complete when it starts (MPI_Iallreduce above). */
int MPI_Testall(int n, MPI_Request *reqs, int *flag, MPI_Status *st)
{
    (void)n;
    (void)reqs;
    (void)st;
    *flag = 1;
    return MPI_SUCCESS;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    (void)req;
    (void)st;
    return MPI_SUCCESS;
}
