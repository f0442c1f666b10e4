/* mpi.h (single-rank stand-in): the handful of MPI declarations libburstrt uses, for
 * building a CUDA program that runs as ONE rank without an MPI library or mpirun (the
 * GPU check machine has neither). Only scripts/gpu-check's build puts this directory
 * on the include path, and links mpi_single.c instead of libmpi. Collectives over one
 * rank are copies; point-to-point messages do not exist in a one-rank world, so they
 * are errors. */
#ifndef BURSTRT_MPI_SINGLE_H
#define BURSTRT_MPI_SINGLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef int MPI_Win;
typedef long MPI_Aint;
typedef struct {
    int MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_Status;

#define MPI_SUCCESS          0
#define MPI_ERR_OTHER        15
#define MPI_MAX_ERROR_STRING 256
#define MPI_COMM_NULL        0
#define MPI_COMM_WORLD       1
#define MPI_UNDEFINED        (-32766)
#define MPI_THREAD_FUNNELED  1
#define MPI_ERRORS_RETURN    1
#define MPI_STATUSES_IGNORE  ((MPI_Status *)0)
#define MPI_STATUS_IGNORE    ((MPI_Status *)0)
#define MPI_IN_PLACE         ((void *)1)
#define MPI_INFO_NULL        0
#define MPI_COMM_TYPE_SHARED 1

/* A datatype's value is its size in bytes times 16 plus a distinct tag. */
#define MPI_BYTE      (16 * 1 + 0)
#define MPI_CHAR      (16 * 1 + 1)
#define MPI_INT       (16 * 4 + 2)
#define MPI_FLOAT     (16 * 4 + 3)
#define MPI_DOUBLE    (16 * 8 + 4)
#define MPI_INT64_T   (16 * 8 + 5)
#define MPI_LONG_LONG (16 * 8 + 6)

#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3

int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out);
int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *base,
                            MPI_Win *win);
int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *base);
int MPI_Win_free(MPI_Win *win);
int MPI_Error_string(int code, char *msg, int *len);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm);
int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                  MPI_Comm comm);
int MPI_Reduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm);
int MPI_Gather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount,
               MPI_Datatype rt, int root, MPI_Comm comm);
int MPI_Allgather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount,
                  MPI_Datatype rt, MPI_Comm comm);
int MPI_Gatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts,
                const int *displs, MPI_Datatype rt, int root, MPI_Comm comm);
int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request *req);
int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
              MPI_Request *req);
int MPI_Waitall(int n, MPI_Request *reqs, MPI_Status *st);
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req);
int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st);
int MPI_Testall(int n, MPI_Request *reqs, int *flag, MPI_Status *st);
int MPI_Wait(MPI_Request *req, MPI_Status *st);

#ifdef __cplusplus
}
#endif
#endif
