/* weights.c: weights in and out as safetensors (docs/runtime.md, "Weights in and out").
 *
 * --init FILE loads parameters and buffers by name before the first step, on every rank
 * that holds them: each rank maps the file (safetensors.c checks all of it first) and
 * copies only the tensors of its own parameters, so it reads only their pages. A tensor's
 * name is the parameter's (`conv1.weight`), or the file's metadata maps it to one: that is
 * how `burstc import --weights` keeps a PyTorch model's state_dict names (`layer.param`,
 * `layer.param^T` for a transpose, `layer.param@R` for rows from R on), or, for a tensor
 * the metadata does not map (a plain state_dict has none), the model's weights section,
 * compiled into the program (rt_weight_name). Two whole tensors for one parameter are
 * its names (a tied weight: GPT-2's lm_head.weight is wte.weight), which must hold the
 * same values; --save-weights writes it under both. A parameter the
 * file lacks, a tensor that fits no parameter of any rank, a mismatched shape or a dtype
 * that is no float is a fatal error naming the tensor; --init-partial loads what fits
 * and lists the rest.
 *
 * --save-weights FILE writes every parameter and buffer after the last step: each is
 * sent to rank 0 by the first rank of its set, and rank 0 writes one file atomically
 * (safetensors.c: a temporary file, synced and renamed). The names are those --init read
 * (the same tensors, shapes, dtypes and metadata, so PyTorch's load_state_dict takes the
 * result of an imported model), then the Burst names of parameters no tensor of the
 * --init file held; without --init, the names of the weights section first, so that
 * the file is the model's state_dict. `P.num_batches_tracked` (torch's count of a BatchNorm's batches) is
 * the --init file's value plus --iterations, or --iterations alone. */
#include "mpi_glue.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBT ".num_batches_tracked"

/* One tensor of the --init file as rank 0 keeps it for --save-weights. */
typedef struct mapped {
    char *name, *target; /* the tensor's name; the metadata's target, or NULL */
    char *param;         /* the parameter it starts (target without @R and ^T) */
    int64_t row0;        /* -1: the whole parameter */
    bool transposed;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t count; /* num_batches_tracked: the file's value */
} mapped;

static struct {
    int n;
    mapped *t;
    bool loaded; /* --init was read (the names above are the file's) */
} init_map;

static rt_params *attached;

/* The program's weights table (rt_weight_name): the model's own names for its tensors. */
static struct {
    int n, cap;
    const char **source, **target;
} table;

void rt_weight_name(const char *source, const char *target)
{
    if (table.n == table.cap) {
        table.cap = table.cap ? 2 * table.cap : 64;
        table.source = realloc(table.source, sizeof *table.source * (size_t)table.cap);
        table.target = realloc(table.target, sizeof *table.target * (size_t)table.cap);
        if (!table.source || !table.target)
            rt_fatal("weights", "out of memory");
    }
    table.source[table.n] = source;
    table.target[table.n] = target;
    table.n++;
}

/* What the table maps tensor name to, or NULL. */
static const char *table_target(const char *name)
{
    for (int i = 0; i < table.n; i++)
        if (!strcmp(table.source[i], name))
            return table.target[i];
    return NULL;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = rt_xmalloc(n, "weights");
    memcpy(d, s, n);
    return d;
}

/* "conv1.weight", "attn.w_qkv@16^T" -> the parameter, its first row, transposed. */
static void parse_target(const char *target, mapped *m)
{
    size_t n = st_parse_target(target, &m->row0, &m->transposed);
    m->param = rt_xmalloc(n + 1, "weights");
    memcpy(m->param, target, n);
    m->param[n] = 0;
}

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int d = 0; d < ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

/* The shape without its 1s: [1, T, D] holds what [T, D] does. */
static int squeeze(int ndim, const int64_t *shape, int64_t *out)
{
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] != 1)
            out[n++] = shape[d];
    return n;
}

static bool same_squeezed(int na, const int64_t *a, int nb, const int64_t *b)
{
    int64_t sa[ST_MAX_DIMS], sb[ST_MAX_DIMS];
    int ka = squeeze(na, a, sa), kb = squeeze(nb, b, sb);
    return ka == kb && !memcmp(sa, sb, sizeof *sa * (size_t)ka);
}

static rt_param *find_param(rt_params *ps, const char *name)
{
    for (int i = 0; i < rt_params_count(ps); i++)
        if (!strcmp(rt_params_at(ps, i)->name, name))
            return rt_params_at(ps, i);
    return NULL;
}

/* Copies tensor t (as m describes it) into its part of p's host values v; false, with the
 * reason in why, when its shape or dtype does not fit. */
static bool load_one(const st_tensor *t, const mapped *m, const rt_param *p, float *v,
                     bool *rows_done, char *why, size_t cap)
{
    const rt_tensor *pv = p->value;
    char a[200], b[200];
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64) {
        snprintf(why, cap, "dtype %s; parameters load from F32, F16, BF16 or F64",
                 st_dtype_name(t->dtype));
        return false;
    }
    int64_t shape[ST_MAX_DIMS];
    int ndim = t->ndim;
    memcpy(shape, t->shape, sizeof shape);
    if (m->transposed) {
        if (ndim != 2) {
            snprintf(why, cap, "marked transposed (^T) but has %d dimensions", ndim);
            return false;
        }
        shape[0] = t->shape[1];
        shape[1] = t->shape[0];
    }
    int64_t rows = pv->ndim > 0 ? pv->shape[0] : 1, per_row = rows ? pv->numel / rows : 0;
    int64_t r0 = 0, nrows = rows;
    if (m->row0 < 0) {
        if (!same_squeezed(ndim, shape, pv->ndim, pv->shape)) {
            snprintf(why, cap, "shape %s%s, but parameter '%s' is %s",
                     shape_str(t->ndim, t->shape, a, sizeof a), m->transposed ? " (^T)" : "",
                     p->name, shape_str(pv->ndim, pv->shape, b, sizeof b));
            return false;
        }
    } else {
        r0 = m->row0;
        nrows = ndim > 0 ? shape[0] : 1;
        bool fits = ndim >= 1 && ndim == pv->ndim && r0 <= rows && nrows <= rows - r0 &&
                    !memcmp(shape + 1, pv->shape + 1, sizeof *shape * (size_t)(ndim - 1));
        if (!fits) {
            snprintf(why, cap, "shape %s%s does not fit rows %lld.. of parameter '%s' %s",
                     shape_str(t->ndim, t->shape, a, sizeof a), m->transposed ? " (^T)" : "",
                     (long long)r0, p->name, shape_str(pv->ndim, pv->shape, b, sizeof b));
            return false;
        }
    }
    for (int64_t r = r0; r < r0 + nrows; r++)
        if (rows_done[r]) {
            snprintf(why, cap, "row %lld of parameter '%s' comes from two tensors", (long long)r,
                     p->name);
            return false;
        }
    float *f = rt_xmalloc((size_t)(t->numel ? t->numel : 1) * sizeof *f, "weights");
    st_to_f32(t, f);
    float *out = v + r0 * per_row;
    if (m->transposed) {
        int64_t R = t->shape[0], C = t->shape[1]; /* the file's [R, C] is our [C, R] */
        for (int64_t i = 0; i < C; i++)
            for (int64_t j = 0; j < R; j++)
                out[i * R + j] = f[j * C + i];
    } else {
        memcpy(out, f, (size_t)t->numel * sizeof *f);
    }
    free(f);
    for (int64_t r = r0; r < r0 + nrows; r++)
        rows_done[r] = true;
    rt_progress_tick();
    return true;
}

/* A second whole tensor for parameter p, whose host values v the tensor called first
 * filled: one parameter under two names (a tied weight, GPT-2's lm_head.weight that is
 * wte.weight), which must hold the same values. */
static void same_as_loaded(const char *path, const st_tensor *t, const mapped *m, const rt_param *p,
                           const float *v, const char *first)
{
    int64_t numel = p->value->numel, rows = p->value->ndim > 0 ? p->value->shape[0] : 1;
    float *mine = rt_xmalloc((size_t)(numel ? numel : 1) * sizeof *mine, "weights");
    bool *rows_done = rt_xmalloc((size_t)(rows ? rows : 1), "weights");
    memset(rows_done, 0, (size_t)(rows ? rows : 1));
    char why[800];
    if (!load_one(t, m, p, mine, rows_done, why, sizeof why))
        rt_fatal("init", "%s: tensor '%s': %s", path, m->name, why);
    if (memcmp(mine, v, (size_t)numel * sizeof *mine))
        rt_fatal("init",
                 "%s: tensors '%s' and '%s' both hold parameter '%s' (one weight under two "
                 "names, as a tied head is), but their values differ",
                 path, first, m->name, p->name);
    free(rows_done);
    free(mine);
}

static void init_from_file(rt_params *ps)
{
    const rt_options *o = &rt_opts_g;
    const char *path = o->init_path;
    st_file f;
    char err[1024];
    if (!st_open(path, &f, err, sizeof err))
        rt_fatal("init", "%s", err);
    int nt = f.ntensors;
    mapped *ms = rt_xmalloc(sizeof *ms * (size_t)(nt ? nt : 1), "weights");
    memset(ms, 0, sizeof *ms * (size_t)(nt ? nt : 1));
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = &f.tensors[i];
        ms[i].name = xstrdup(t->name);
        for (int k = 0; k < f.nmeta; k++)
            if (!strcmp(f.meta[k].key, t->name))
                ms[i].target = xstrdup(f.meta[k].value);
        /* A plain state_dict has no metadata: the model's weights section maps it. */
        if (!ms[i].target && table_target(t->name))
            ms[i].target = xstrdup(table_target(t->name));
        parse_target(ms[i].target ? ms[i].target : t->name, &ms[i]);
        ms[i].dtype = t->dtype;
        ms[i].ndim = t->ndim;
        memcpy(ms[i].shape, t->shape, sizeof ms[i].shape);
    }
    int *used = rt_xmalloc(sizeof *used * (size_t)(nt ? nt : 1), "weights");
    memset(used, 0, sizeof *used * (size_t)(nt ? nt : 1));
    int missing = 0;
    char first_missing[600] = "";
    for (int k = 0; k < rt_params_count(ps); k++) {
        rt_param *p = rt_params_at(ps, k);
        rt_tensor *pv = p->value;
        int64_t rows = pv->ndim > 0 ? pv->shape[0] : 1;
        bool *rows_done = rt_xmalloc((size_t)(rows ? rows : 1), "weights");
        memset(rows_done, 0, (size_t)(rows ? rows : 1));
        float *v = rt_host_view(pv, true, "init");
        int pieces = 0, whole = -1;
        for (int i = 0; i < nt; i++) {
            if (strcmp(ms[i].param, p->name))
                continue;
            char why[800];
            if (whole >= 0 && ms[i].row0 < 0)
                same_as_loaded(path, &f.tensors[i], &ms[i], p, v, ms[whole].name);
            else if (!load_one(&f.tensors[i], &ms[i], p, v, rows_done, why, sizeof why))
                rt_fatal("init", "%s: tensor '%s': %s", path, ms[i].name, why);
            else if (ms[i].row0 < 0)
                whole = i;
            used[i] = 1;
            pieces++;
        }
        int64_t done = 0;
        for (int64_t r = 0; r < rows; r++)
            done += rows_done[r];
        rt_host_done(pv, v, pieces > 0, "init");
        free(rows_done);
        char shape[200];
        if (pieces > 0 && done != rows)
            rt_fatal("init", "%s: the tensors for parameter '%s' %s fill %lld of its %lld rows",
                     path, p->name, shape_str(pv->ndim, pv->shape, shape, sizeof shape),
                     (long long)done, (long long)rows);
        if (pieces == 0) {
            if (!missing)
                snprintf(first_missing, sizeof first_missing, "'%s' %s", p->name,
                         shape_str(pv->ndim, pv->shape, shape, sizeof shape));
            missing++;
            if (o->init_partial && p->comm && p->comm->index == 0)
                fprintf(stderr,
                        "burstrt: rank %d: init: %s has no tensor for '%s' %s: kept "
                        "its own initialisation\n",
                        o->rank, path, p->name, shape);
        }
    }
    /* A BatchNorm's count of batches: used where its running mean is held. */
    for (int i = 0; i < nt; i++) {
        size_t n = strlen(ms[i].param), s = strlen(NBT);
        if (n <= s || strcmp(ms[i].param + n - s, NBT))
            continue;
        char mean[600];
        snprintf(mean, sizeof mean, "%.*s.running_mean", (int)(n - s), ms[i].param);
        const st_tensor *t = &f.tensors[i];
        if (!find_param(ps, mean))
            continue;
        if (t->numel != 1 || (t->dtype != ST_I64 && t->dtype != ST_F32))
            rt_fatal("init", "%s: tensor '%s': a count of batches is one I64, not %s %s", path,
                     ms[i].name, st_dtype_name(t->dtype),
                     shape_str(t->ndim, t->shape, mean, sizeof mean));
        int64_t c = 0;
        if (t->dtype == ST_I64)
            memcpy(&c, t->data, 8);
        else
            c = (int64_t) * (const float *)t->data;
        ms[i].count = c;
        used[i] = 1;
    }
    if (missing && !o->init_partial)
        rt_fatal("init",
                 "%s has no tensor for parameter %s%s (--init-partial keeps the program's "
                 "own initialisation for those)",
                 path, first_missing, missing > 1 ? " and others" : "");
    if (o->world_size > 1)
        rt_mpi_check(MPI_Allreduce(MPI_IN_PLACE, used, nt, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                     "init");
    bool reported = false;
    for (int i = 0; i < nt; i++) {
        if (used[i] || o->rank != 0)
            continue;
        if (!o->init_partial && !reported)
            rt_fatal("init",
                     "%s: tensor '%s'%s%s%s fits no parameter of this program "
                     "(--init-partial loads what fits)",
                     path, ms[i].name, ms[i].target ? " (for " : "",
                     ms[i].target ? ms[i].target : "", ms[i].target ? ")" : "");
        fprintf(stderr,
                "burstrt: rank 0: init: tensor '%s' of %s fits no parameter: not "
                "loaded\n",
                ms[i].name, path);
        reported = true;
    }
    /* Errors on one rank end the job; the others wait here for the verdict. */
    if (o->world_size > 1)
        rt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "init");
    st_close(&f);
    free(used);
    init_map.n = nt;
    init_map.t = ms;
    init_map.loaded = true;
}

/* ---- --save-weights ------------------------------------------------------------------ */

typedef struct gathered {
    char *name;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t numel;
    bool buffer;
    bool written, counted; /* under a name of --init; its count of batches too */
    float *v;
} gathered;

typedef struct blob {
    char *b;
    size_t n, cap;
} blob;

static void put(blob *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        char *nb = realloc(b->b, cap);
        if (!nb)
            rt_fatal("save-weights", "out of memory (%zu bytes)", cap);
        b->b = nb;
        b->cap = cap;
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

/* What this rank sends: every parameter and buffer whose set it leads. */
static void pack_owned(rt_params *ps, blob *b)
{
    for (int k = 0; k < rt_params_count(ps); k++) {
        rt_param *p = rt_params_at(ps, k);
        if (p->comm && p->comm->index != 0)
            continue;
        uint32_t len = (uint32_t)strlen(p->name);
        int32_t ndim = p->value->ndim;
        uint8_t buffer = p->grad == NULL;
        put(b, &len, 4);
        put(b, p->name, len);
        put(b, &ndim, 4);
        put(b, p->value->shape, sizeof(int64_t) * (size_t)ndim);
        put(b, &buffer, 1);
        float *v = rt_host_view(p->value, true, "save-weights");
        put(b, v, (size_t)p->value->numel * 4);
        rt_host_done(p->value, v, false, "save-weights");
        rt_progress_tick();
    }
}

static void unpack(const blob *b, gathered **gs, int *n, int *cap)
{
    size_t at = 0;
    while (at < b->n) {
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *gs = realloc(*gs, sizeof **gs * (size_t)*cap);
            if (!*gs)
                rt_fatal("save-weights", "out of memory");
        }
        gathered *g = &(*gs)[(*n)++];
        memset(g, 0, sizeof *g);
        uint32_t len;
        int32_t ndim;
        uint8_t buffer;
        memcpy(&len, b->b + at, 4);
        at += 4;
        g->name = rt_xmalloc(len + 1, "save-weights");
        memcpy(g->name, b->b + at, len);
        g->name[len] = 0;
        at += len;
        memcpy(&ndim, b->b + at, 4);
        at += 4;
        g->ndim = ndim;
        memcpy(g->shape, b->b + at, sizeof(int64_t) * (size_t)ndim);
        at += sizeof(int64_t) * (size_t)ndim;
        memcpy(&buffer, b->b + at, 1);
        at += 1;
        g->buffer = buffer;
        g->numel = 1;
        for (int d = 0; d < ndim; d++)
            g->numel *= g->shape[d];
        g->v = rt_xmalloc((size_t)(g->numel ? g->numel : 1) * 4, "save-weights");
        memcpy(g->v, b->b + at, (size_t)g->numel * 4);
        at += (size_t)g->numel * 4;
    }
}

#define CHUNK ((size_t)1 << 30)

/* Rank 0 receives every other rank's blob (its size first, then chunks under 2^31). */
static void gather_blobs(rt_params *ps, gathered **gs, int *n)
{
    const rt_options *o = &rt_opts_g;
    blob mine = {0};
    pack_owned(ps, &mine);
    int cap = 0;
    if (o->rank == 0)
        unpack(&mine, gs, n, &cap);
    for (int r = 1; r < o->world_size; r++) {
        if (o->rank != 0 && o->rank != r)
            continue;
        int64_t size = (int64_t)mine.n;
        MPI_Request req;
        if (o->rank == r) {
            rt_mpi_check(MPI_Isend(&size, 1, MPI_INT64_T, 0, 7100, MPI_COMM_WORLD, &req),
                         "save-weights");
            rt_mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "save-weights");
            for (size_t at = 0; at < mine.n; at += CHUNK) {
                size_t c = mine.n - at < CHUNK ? mine.n - at : CHUNK;
                rt_mpi_check(
                    MPI_Isend(mine.b + at, (int)c, MPI_BYTE, 0, 7101, MPI_COMM_WORLD, &req),
                    "save-weights");
                rt_mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "save-weights");
            }
            continue;
        }
        rt_mpi_check(MPI_Irecv(&size, 1, MPI_INT64_T, r, 7100, MPI_COMM_WORLD, &req),
                     "save-weights");
        rt_mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "save-weights");
        blob theirs = {.b = rt_xmalloc((size_t)(size ? size : 1), "save-weights"),
                       .n = (size_t)size,
                       .cap = (size_t)size};
        for (size_t at = 0; at < theirs.n; at += CHUNK) {
            size_t c = theirs.n - at < CHUNK ? theirs.n - at : CHUNK;
            rt_mpi_check(MPI_Irecv(theirs.b + at, (int)c, MPI_BYTE, r, 7101, MPI_COMM_WORLD, &req),
                         "save-weights");
            rt_mpi_check(MPI_Wait(&req, MPI_STATUS_IGNORE), "save-weights");
        }
        unpack(&theirs, gs, n, &cap);
        free(theirs.b);
    }
    free(mine.b);
}

static gathered *find_gathered(gathered *gs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(gs[i].name, name))
            return &gs[i];
    return NULL;
}

/* The bytes of tensor m (dtype, shape as --init read it) from parameter values g. */
static void *unmap(const mapped *m, const gathered *g)
{
    int64_t per_row = g->ndim > 0 && g->shape[0] ? g->numel / g->shape[0] : g->numel;
    void *b = st_from_param(g->v, per_row, m->row0, m->transposed, m->dtype, m->ndim, m->shape);
    if (!b)
        rt_fatal("save-weights", "out of memory (tensor '%s')", m->name);
    return b;
}

/* Without --init, the map --save-weights writes by is the weights table's: each
 * tensor in f32 in its parameter's shape, transposed or cut into rows as its target
 * says (a row block ends where the parameter's next one starts), and a count of
 * batches as one I64. Entries whose parameter no rank holds are left out. */
static void map_from_table(gathered *gs, int n)
{
    mapped *ms = rt_xmalloc(sizeof *ms * (size_t)(table.n ? table.n : 1), "save-weights");
    memset(ms, 0, sizeof *ms * (size_t)(table.n ? table.n : 1));
    int nm = 0;
    for (int i = 0; i < table.n; i++) {
        mapped *m = &ms[nm];
        parse_target(table.target[i], m);
        size_t pn = strlen(m->param), s = strlen(NBT);
        if (pn > s && !strcmp(m->param + pn - s, NBT)) {
            m->dtype = ST_I64;
        } else {
            const gathered *g = find_gathered(gs, n, m->param);
            if (!g || (m->transposed && g->ndim != 2)) {
                free(m->param);
                continue;
            }
            m->dtype = ST_F32;
            m->ndim = st_target_shape(table.target[i], table.target, table.n, g->ndim, g->shape,
                                      m->shape);
        }
        m->name = xstrdup(table.source[i]);
        m->target = xstrdup(table.target[i]);
        nm++;
    }
    init_map.n = nm;
    init_map.t = ms;
}

static bool write_file(gathered *gs, int n, char *err, size_t errlen)
{
    const rt_options *o = &rt_opts_g;
    int cap = init_map.n + 2 * n + 1, nt = 0, nmeta = 0;
    st_tensor *ts = rt_xmalloc(sizeof *ts * (size_t)cap, "save-weights");
    st_meta *meta = rt_xmalloc(sizeof *meta * (size_t)cap, "save-weights");
    void **owned = rt_xmalloc(sizeof *owned * (size_t)cap, "save-weights");
    int64_t *counts = rt_xmalloc(sizeof *counts * (size_t)cap, "save-weights");
    int nowned = 0;
    memset(ts, 0, sizeof *ts * (size_t)cap);
    for (int i = 0; i < init_map.n; i++) {
        const mapped *m = &init_map.t[i];
        size_t pn = strlen(m->param), s = strlen(NBT);
        st_tensor *t = &ts[nt];
        if (pn > s && !strcmp(m->param + pn - s, NBT)) {
            char mean[600];
            snprintf(mean, sizeof mean, "%.*s.running_mean", (int)(pn - s), m->param);
            gathered *g = find_gathered(gs, n, mean);
            if (!g)
                continue;
            counts[nt] = m->count + o->iterations;
            t->data = &counts[nt];
            g->counted = true;
        } else {
            gathered *g = find_gathered(gs, n, m->param);
            if (!g)
                continue; /* --init-partial: a tensor of another model */
            owned[nowned++] = (void *)(t->data = unmap(m, g));
            g->written = true;
        }
        t->name = m->name;
        t->dtype = m->dtype;
        t->ndim = m->ndim;
        memcpy(t->shape, m->shape, sizeof t->shape);
        if (m->target) {
            meta[nmeta].key = m->name;
            meta[nmeta].value = m->target;
            nmeta++;
        }
        nt++;
    }
    /* Parameters no tensor of --init held, under their Burst names, and the count of
     * batches of each BatchNorm whose count the file had not. */
    for (int i = 0; i < n; i++) {
        gathered *g = &gs[i];
        if (!g->written) {
            ts[nt] = (st_tensor){.name = g->name, .dtype = ST_F32, .ndim = g->ndim, .data = g->v};
            memcpy(ts[nt].shape, g->shape, sizeof(int64_t) * (size_t)g->ndim);
            nt++;
        }
        size_t len = strlen(g->name), s = strlen(".running_mean");
        if (g->counted || !g->buffer || len <= s || strcmp(g->name + len - s, ".running_mean"))
            continue;
        char *count = rt_xmalloc(len - s + strlen(NBT) + 1, "save-weights");
        snprintf(count, len - s + strlen(NBT) + 1, "%.*s%s", (int)(len - s), g->name, NBT);
        owned[nowned++] = count;
        counts[nt] = o->iterations;
        ts[nt] = (st_tensor){.name = count, .dtype = ST_I64, .ndim = 0, .data = &counts[nt]};
        nt++;
    }
    bool ok = st_write(o->save_weights, ts, nt, meta, nmeta, err, errlen);
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(counts);
    free(ts);
    free(meta);
    return ok;
}

static void save(rt_params *ps, int64_t next_step)
{
    const rt_options *o = &rt_opts_g;
    rt_grads_wait();
    int64_t was_step;
    rt_phase was = rt_progress_now(&was_step);
    rt_progress_phase(RT_PHASE_SAVE, next_step - 1);
    gathered *gs = NULL;
    int n = 0;
    gather_blobs(ps, &gs, &n);
    char err[1024] = "";
    int ok = 1;
    if (o->rank == 0 && !init_map.loaded && !init_map.t)
        map_from_table(gs, n);
    if (o->rank == 0)
        ok = write_file(gs, n, err, sizeof err);
    for (int i = 0; i < n; i++) {
        free(gs[i].name);
        free(gs[i].v);
    }
    free(gs);
    if (o->world_size > 1)
        rt_mpi_check(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD), "save-weights");
    if (!ok && o->rank == 0)
        rt_fatal("save-weights", "%s", err);
    if (!ok)
        rt_fatal("save-weights", "rank 0 could not write %s", o->save_weights);
    rt_progress_phase(was, was_step);
}

/* ---- the program's hooks ------------------------------------------------------------- */

void rt_weights_check_output(void)
{
    const char *path = rt_opts_g.save_weights;
    if (!path[0] || rt_opts_g.rank != 0)
        return;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        rt_fatal("save-weights", "cannot write %s: not a regular file", path);
    char tmp[600];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.check.tmp", path) >= sizeof tmp)
        rt_fatal("save-weights", "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0)
        rt_fatal("save-weights", "cannot write %s: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
}

void rt_weights_attach(rt_params *ps)
{
    attached = ps;
    if (rt_opts_g.init_path[0])
        init_from_file(ps);
}

void rt_weights_maybe_save(int64_t next_step)
{
    if (attached && rt_opts_g.save_weights[0] && next_step >= rt_opts_g.iterations)
        save(attached, next_step);
}

void rt_weights_free(void)
{
    for (int i = 0; i < init_map.n; i++) {
        free(init_map.t[i].name);
        free(init_map.t[i].target);
        free(init_map.t[i].param);
    }
    free(init_map.t);
    init_map.n = 0;
    init_map.t = NULL;
    attached = NULL;
    free(table.source);
    free(table.target);
    table.source = table.target = NULL;
    table.n = table.cap = 0;
}
