/* onednn.c: the CPU backend's oneDNN state (onednn.h): the engine and stream, the cache
 * of primitives keyed by layer shape, the buffers a forward keeps for its backward, and
 * the backend's scratch memory. Everything is made on first use and released by
 * rt_dnnl_finalize, which rt_finalize and the end of the process call. oneDNN's own
 * primitive cache is turned off: this cache already holds every primitive the program
 * needs, made once. */
#include "onednn.h"

#include <stdlib.h>
#include <string.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static rt_pool *own_pool; /* scratch for kernels that take no pool */
static bool exit_hook;

void rt_dnnl_ok(dnnl_status_t s, const char *op, const char *what)
{
    if (s != dnnl_success)
        rt_fatal(op, "oneDNN: %s failed (status %d)", what, (int)s);
}

static void start(void)
{
    if (engine)
        return;
    if (!exit_hook) {
        atexit(rt_dnnl_finalize);
        exit_hook = true;
    }
    rt_dnnl_ok(dnnl_set_primitive_cache_capacity(0), "onednn", "turning its cache off");
    rt_dnnl_ok(dnnl_engine_create(&engine, dnnl_cpu, 0), "onednn", "creating the CPU engine");
    rt_dnnl_ok(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "onednn",
               "creating a stream");
}

dnnl_engine_t rt_dnnl_engine(void)
{
    start();
    return engine;
}

dnnl_memory_desc_t rt_dnnl_plain(int ndims, const int64_t *dims)
{
    static const dnnl_format_tag_t tags[] = {
        dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde};
    if (ndims < 1 || ndims > 5)
        rt_fatal("onednn", "no plain layout of %d dimensions", ndims);
    dnnl_memory_desc_t md;
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++)
        d[i] = dims[i];
    rt_dnnl_ok(dnnl_memory_desc_init_by_tag(&md, ndims, d, dnnl_f32, tags[ndims]), "onednn",
               "describing a plain tensor");
    return md;
}

static void finish(rt_dnnl_prim *pr, const char *op)
{
    rt_dnnl_ok(dnnl_primitive_create(&pr->p, pr->pd), op, "creating a primitive");
    const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pr->pd, dnnl_query_scratchpad_md, 0);
    pr->scratch = s ? dnnl_memory_desc_get_size(s) : 0;
}

bool rt_dnnl_make(rt_dnnl_prim *pr, const void *op_desc, const_dnnl_primitive_desc_t hint,
                  const char *op)
{
    start();
    memset(pr, 0, sizeof *pr);
    dnnl_primitive_attr_t attr;
    rt_dnnl_ok(dnnl_primitive_attr_create(&attr), op, "creating attributes");
    rt_dnnl_ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), op,
               "asking for a user scratchpad");
    dnnl_status_t s = dnnl_primitive_desc_create(&pr->pd, op_desc, attr, engine, hint);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_unimplemented) {
        pr->pd = NULL;
        return false;
    }
    rt_dnnl_ok(s, op, "creating a primitive descriptor");
    finish(pr, op);
    return true;
}

void rt_dnnl_make_reorder(rt_dnnl_prim *pr, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, bool accumulate, const char *op)
{
    start();
    memset(pr, 0, sizeof *pr);
    dnnl_primitive_attr_t attr;
    rt_dnnl_ok(dnnl_primitive_attr_create(&attr), op, "creating attributes");
    rt_dnnl_ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), op,
               "asking for a user scratchpad");
    if (accumulate) {
        dnnl_post_ops_t po;
        rt_dnnl_ok(dnnl_post_ops_create(&po), op, "creating post-ops");
        rt_dnnl_ok(dnnl_post_ops_append_sum(po, 1.0f), op, "appending a sum");
        rt_dnnl_ok(dnnl_primitive_attr_set_post_ops(attr, po), op, "setting post-ops");
        dnnl_post_ops_destroy(po);
    }
    rt_dnnl_ok(dnnl_reorder_primitive_desc_create(&pr->pd, from, engine, to, engine, attr), op,
               "creating a reorder");
    dnnl_primitive_attr_destroy(attr);
    finish(pr, op);
    if (pr->scratch)
        rt_fatal(op, "oneDNN: a reorder asks for %zu bytes of scratchpad", pr->scratch);
}

void rt_dnnl_free(rt_dnnl_prim *pr)
{
    for (int i = 0; i < pr->nmem; i++)
        dnnl_memory_destroy(pr->mem[i]);
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    if (pr->pd)
        dnnl_primitive_desc_destroy(pr->pd);
    memset(pr, 0, sizeof *pr);
}

const dnnl_memory_desc_t *rt_dnnl_md(const rt_dnnl_prim *pr, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pr->pd, what, 0);
}

/* The memory object of argument `arg`, made on first use with the descriptor the
 * primitive gives that argument. */
static dnnl_memory_t arg_memory(rt_dnnl_prim *pr, int arg, const char *op)
{
    for (int i = 0; i < pr->nmem; i++)
        if (pr->arg[i] == arg)
            return pr->mem[i];
    if (pr->nmem == RT_DNNL_MAX_ARGS)
        rt_fatal(op, "oneDNN: more than %d arguments", RT_DNNL_MAX_ARGS);
    const dnnl_memory_desc_t *md =
        dnnl_primitive_desc_query_md(pr->pd, dnnl_query_exec_arg_md, arg);
    if (!md || md->ndims == 0)
        rt_fatal(op, "oneDNN: the primitive takes no argument %d", arg);
    dnnl_memory_t m;
    rt_dnnl_ok(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_NONE), op, "creating a memory");
    pr->arg[pr->nmem] = arg;
    pr->mem[pr->nmem++] = m;
    return m;
}

void rt_dnnl_run(rt_dnnl_prim *pr, int n, const rt_dnnl_arg *args, void *scratch, const char *op)
{
    dnnl_exec_arg_t ex[RT_DNNL_MAX_ARGS + 1];
    if (n > RT_DNNL_MAX_ARGS)
        rt_fatal(op, "oneDNN: more than %d arguments", RT_DNNL_MAX_ARGS);
    for (int i = 0; i < n; i++) {
        dnnl_memory_t m = arg_memory(pr, args[i].arg, op);
        rt_dnnl_ok(dnnl_memory_set_data_handle(m, args[i].data), op, "binding a tensor");
        ex[i] = (dnnl_exec_arg_t){args[i].arg, m};
    }
    if (pr->scratch) {
        dnnl_memory_t m = arg_memory(pr, DNNL_ARG_SCRATCHPAD, op);
        rt_dnnl_ok(dnnl_memory_set_data_handle(m, scratch), op, "binding the scratchpad");
        ex[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m};
    }
    rt_dnnl_ok(dnnl_primitive_execute(pr->p, stream, n, ex), op, "running a primitive");
    rt_dnnl_ok(dnnl_stream_wait(stream), op, "waiting for a primitive");
}

void rt_dnnl_run_reorder(rt_dnnl_prim *pr, const void *src, void *dst, const char *op)
{
    rt_dnnl_run(pr, 2, (rt_dnnl_arg[]){{DNNL_ARG_FROM, (void *)src}, {DNNL_ARG_TO, dst}}, NULL, op);
}

/* ---- the cache ------------------------------------------------------------------------- */

typedef struct slot {
    rt_dnnl_key key;
    void *entry; /* NULL: free */
    void (*destroy)(void *);
} slot;
static slot *slots;
static size_t nslots, used;

static size_t key_hash(const rt_dnnl_key *k)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < RT_DNNL_KEY_LEN; i++)
        h = rt_hash64(h ^ (uint64_t)k->v[i]);
    return (size_t)h;
}

void *rt_dnnl_find(const rt_dnnl_key *key)
{
    if (!nslots)
        return NULL;
    for (size_t i = key_hash(key) & (nslots - 1);; i = (i + 1) & (nslots - 1)) {
        if (!slots[i].entry)
            return NULL;
        if (memcmp(&slots[i].key, key, sizeof *key) == 0)
            return slots[i].entry;
    }
}

static void place(slot s)
{
    size_t i = key_hash(&s.key) & (nslots - 1);
    while (slots[i].entry)
        i = (i + 1) & (nslots - 1);
    slots[i] = s;
}

void rt_dnnl_insert(const rt_dnnl_key *key, void *entry, void (*destroy)(void *))
{
    if (2 * (used + 1) > nslots) { /* at most half full */
        size_t old = nslots;
        slot *prev = slots;
        nslots = old ? 2 * old : 64;
        slots = rt_xcalloc(nslots, sizeof *slots, "onednn");
        for (size_t i = 0; i < old; i++)
            if (prev[i].entry)
                place(prev[i]);
        free(prev);
    }
    place((slot){*key, entry, destroy});
    used++;
}

/* ---- kept buffers ------------------------------------------------------------------------ */

typedef struct kept {
    const void *entry, *input;
    size_t bytes;
    void *buf;
} kept;
static kept *keeps;
static size_t nkeeps, capkeeps;

void *rt_dnnl_kept(const void *entry, const void *input, size_t bytes)
{
    for (size_t i = 0; i < nkeeps; i++)
        if (keeps[i].entry == entry && keeps[i].input == input && keeps[i].bytes == bytes)
            return keeps[i].buf;
    return NULL;
}

void *rt_dnnl_keep(const void *entry, const void *input, size_t bytes)
{
    void *b = rt_dnnl_kept(entry, input, bytes);
    if (b)
        return b;
    if (nkeeps == capkeeps) {
        capkeeps = capkeeps ? 2 * capkeeps : 32;
        kept *n = realloc(keeps, capkeeps * sizeof *n);
        if (!n)
            rt_fatal("onednn", "out of memory");
        keeps = n;
    }
    b = aligned_alloc(64, rt_dnnl_align(bytes ? bytes : 1));
    if (!b)
        rt_fatal("onednn", "out of memory keeping %zu bytes for a backward", bytes);
    keeps[nkeeps++] = (kept){entry, input, bytes, b};
    return b;
}

void rt_dnnl_forget(const void *lo, size_t bytes)
{
    const char *a = lo, *b = a + bytes;
    for (size_t i = 0; i < nkeeps;) {
        const char *p = keeps[i].input;
        if (p >= a && p < b) {
            free(keeps[i].buf);
            keeps[i] = keeps[--nkeeps];
        } else {
            i++;
        }
    }
}

/* ---- scratch and the end ------------------------------------------------------------------ */

void *rt_dnnl_scratch(rt_pool *pool, size_t bytes)
{
    if (!pool) {
        if (!own_pool)
            own_pool = rt_pool_new();
        pool = own_pool;
    }
    return rt_pool_scratch(pool, (bytes + 3) / 4);
}

void rt_dnnl_finalize(void)
{
    for (size_t i = 0; i < nslots; i++)
        if (slots[i].entry)
            slots[i].destroy(slots[i].entry);
    free(slots);
    slots = NULL;
    nslots = used = 0;
    for (size_t i = 0; i < nkeeps; i++)
        free(keeps[i].buf);
    free(keeps);
    keeps = NULL;
    nkeeps = capkeeps = 0;
    rt_pool_free(own_pool);
    own_pool = NULL;
    if (stream)
        dnnl_stream_destroy(stream);
    if (engine)
        dnnl_engine_destroy(engine);
    stream = NULL;
    engine = NULL;
}
