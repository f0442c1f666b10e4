/* onednn.h: how the CPU backend's kernels use oneDNN (Debian's libdnnl 2.6, through its C
 * API): one engine and one stream per process; primitives made once per layer shape and
 * kept in a cache keyed by the shape and attributes (so a training step creates none);
 * memory objects bound to the kernels' tensors on each call; scratchpads carved from the
 * runtime's scratch memory; and what a forward keeps for the same layer's backward (the
 * reordered input of a convolution, the argmax of a max-pool), keyed by the layer's cache
 * entry and the input's memory. */
#ifndef BURSTRT_CPU_ONEDNN_H
#define BURSTRT_CPU_ONEDNN_H

#include "cpu.h"

#include <dnnl.h>

/* Fatal unless s is dnnl_success: "OP: oneDNN: WHAT failed (STATUS)". */
void rt_dnnl_ok(dnnl_status_t s, const char *op, const char *what);
dnnl_engine_t rt_dnnl_engine(void);

/* The row-major layout of dims (nchw, oihw, goihw, nc, ...). */
dnnl_memory_desc_t rt_dnnl_plain(int ndims, const int64_t *dims);

/* A primitive with its descriptor, the memory objects of its arguments (made on the first
 * run, rebound to the caller's data on each) and its scratchpad size. */
#define RT_DNNL_MAX_ARGS 8
typedef struct rt_dnnl_prim {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    size_t scratch; /* bytes of user scratchpad */
    int nmem;
    int arg[RT_DNNL_MAX_ARGS];
    dnnl_memory_t mem[RT_DNNL_MAX_ARGS];
} rt_dnnl_prim;

/* Makes pr from an op descriptor (hint: the forward's descriptor for a backward). False,
 * with pr left empty, when oneDNN has no implementation for it (`unimplemented`). */
bool rt_dnnl_make(rt_dnnl_prim *pr, const void *op_desc, const_dnnl_primitive_desc_t hint,
                  const char *op);
/* A reorder from one layout to another; accumulate: the result is added to the destination. */
void rt_dnnl_make_reorder(rt_dnnl_prim *pr, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, bool accumulate, const char *op);
void rt_dnnl_free(rt_dnnl_prim *pr);
/* The descriptor of one of the primitive's memories (dnnl_query_src_md, ...). */
const dnnl_memory_desc_t *rt_dnnl_md(const rt_dnnl_prim *pr, dnnl_query_t what);

typedef struct rt_dnnl_arg {
    int arg;    /* DNNL_ARG_SRC, ... */
    void *data; /* laid out as the primitive's descriptor of that argument says */
} rt_dnnl_arg;
/* Runs pr on args; scratch: at least pr->scratch bytes (NULL when 0). */
void rt_dnnl_run(rt_dnnl_prim *pr, int n, const rt_dnnl_arg *args, void *scratch, const char *op);
/* Runs a reorder (made by rt_dnnl_make_reorder) from src to dst. */
void rt_dnnl_run_reorder(rt_dnnl_prim *pr, const void *src, void *dst, const char *op);

/* ---- the cache of primitives: one entry per layer shape ----------------------------- */

/* A cache key: the kernel (v[0]) and its shapes and attributes; unused slots are zero. */
#define RT_DNNL_KEY_LEN 24
typedef struct rt_dnnl_key {
    int64_t v[RT_DNNL_KEY_LEN];
} rt_dnnl_key;
/* The entry made for key, or NULL. */
void *rt_dnnl_find(const rt_dnnl_key *key);
/* Adds an entry (malloc'd by the caller); destroy frees it and its primitives at the end. */
void rt_dnnl_insert(const rt_dnnl_key *key, void *entry, void (*destroy)(void *));

/* ---- what a forward keeps for the backward of the same layer ------------------------- */

/* The buffer of `bytes` kept for (entry, input), made when absent; the forward fills it
 * before it returns, the backward finds it with rt_dnnl_kept. It lives until the memory of
 * `input` is freed (rt_dnnl_forget) or the process ends. A backward must see the input its
 * forward saw (true of every training step): the kept buffer is not checked against it. */
void *rt_dnnl_keep(const void *entry, const void *input, size_t bytes);
/* The buffer a forward kept for (entry, input), or NULL (no forward since the input's
 * memory was allocated): the backward then computes it afresh. */
void *rt_dnnl_kept(const void *entry, const void *input, size_t bytes);
/* Drops every kept buffer whose input lies in [lo, lo + bytes): that memory was freed. */
void rt_dnnl_forget(const void *lo, size_t bytes);

/* ---- scratch memory and threads -------------------------------------------------------- */

/* Scratch memory of `bytes` (64-byte aligned), valid until the next call: the pool's
 * scratch when the kernel has a pool, else the backend's own. */
void *rt_dnnl_scratch(rt_pool *pool, size_t bytes);
/* Rounds up to a multiple of 64 (for carving several buffers out of one scratch). */
static inline size_t rt_dnnl_align(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

/* Releases everything above (the end of the run, or the process). */
void rt_dnnl_finalize(void);

#endif
