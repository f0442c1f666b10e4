/*
 * cmd_export.c: `burstc export CKPT_DIR -o FILE.safetensors --job JOB.burst`, a
 * checkpoint round of a generated program as one safetensors file.
 *
 * A round (docs/runtime.md, "Checkpoints") is one BURSTCK3 file per rank, each holding
 * the parameters and buffers of that rank's layers. This command reads every rank's file
 * of the newest committed round (or of the round CKPT_DIR names), checks each like the
 * runtime's loader does (magic, rank and world size, sizes inside the file, checksum, no
 * trailing bytes), requires every parameter and buffer of the job's model to be in one of
 * them, and writes what --save-weights would have written at that step: under the names,
 * shapes, dtypes and metadata of the --init file given as --names (an imported model's
 * state_dict keys, `P.num_batches_tracked` counted on by the round's step), else under
 * the names of the model's weights section (as --save-weights without --init writes
 * them), else under Burst's names. The file is written atomically (safetensors.c). The compiler never links
 * the runtime, so the reader of the checkpoint format is this file's own.
 */
#include "frontend.h"
#include "import.h"
#include "safetensors.h"
#include "tools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char export_usage[] =
    "usage: burstc export CKPT_DIR -o FILE.safetensors --job JOB.burst [--names INIT.safetensors]\n"
    "       burstc export CKPT_DIR -o FILE.onnx --job JOB.burst --names INIT.safetensors\n"
    "                     --format onnx --onnx MODEL.onnx\n"
    "\n"
    "Writes the parameters and buffers of a checkpoint round (a program's\n"
    "--checkpoint-dir: its newest committed round, or the round step-N named) as one\n"
    "safetensors file, as --save-weights would have at that step.\n"
    "\n"
    "  -o FILE        the safetensors file, written atomically (required)\n"
    "  --job FILE     the job the program was built from (required): its model's\n"
    "                 parameters must all be in the round, its cluster's size is the\n"
    "                 number of rank files\n"
    "  --names FILE   the file the run started from (--init, e.g. what `burstc import\n"
    "                 --weights` wrote): its tensor names, shapes, dtypes and metadata,\n"
    "                 so PyTorch's load_state_dict takes the result (default: the\n"
    "                 names of the model's weights section, else Burst's names,\n"
    "                 `layer.param`; f32)\n"
    "  --format FMT   safetensors (the default) or onnx: with --onnx, an ONNX model\n"
    "  --onnx MODEL   write an ONNX model instead: MODEL (the file imported with\n"
    "                 --names) with the trained weights as its initializers\n"
    "  --help         show this help\n"
    "\n"
    "exit status: 0 success, 1 errors in the input\n";

#define NBT          ".num_batches_tracked"
#define CKPT_NAME    256
#define CKPT_MAXDIMS 6 /* the runtime's RT_MAX_DIMS */

/* One parameter or buffer of the round, from the lowest rank that holds it. */
typedef struct held {
    char *name;
    int ndim;
    int64_t shape[CKPT_MAXDIMS];
    int64_t numel;
    float *v;
    bool used;
} held;

typedef struct round {
    int n, cap;
    held *t;
    int64_t step;
} round;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("burstc export: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static held *find_held(round *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name))
            return &r->t[i];
    return NULL;
}

/* A bounded cursor over a rank file, with its FNV-1a sum. */
typedef struct cursor {
    const unsigned char *b;
    size_t n, at;
    uint64_t sum;
} cursor;

static bool take(cursor *c, void *out, size_t k)
{
    if (k > c->n - c->at)
        return false;
    const unsigned char *p = c->b + c->at;
    for (size_t i = 0; i < k; i++) {
        c->sum ^= p[i];
        c->sum *= 0x100000001b3ull;
    }
    if (out)
        memcpy(out, p, k);
    c->at += k;
    return true;
}

static unsigned char *slurp(const char *path, size_t *n, char *why, size_t cap)
{
    /* Opened without blocking and checked before a byte is read, so a FIFO or a
     * device named as a checkpoint is an error, not a hang. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, cap, "%s is not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    *n = (size_t)st.st_size;
    unsigned char *b = f ? malloc(*n ? *n : 1) : NULL;
    if (!b || fread(b, 1, *n, f) != *n) {
        free(b);
        if (f)
            fclose(f);
        else
            close(fd);
        snprintf(why, cap, "cannot read %s", path);
        return NULL;
    }
    fclose(f);
    return b;
}

/* Reads rank `rank`'s file of the round into r (what a lower rank held stays); 0 or 1. */
static int read_rank(const char *path, int rank, int world, round *r)
{
    char why[4400]; /* a path of up to 4300 bytes and what went wrong */
    size_t n;
    unsigned char *b = slurp(path, &n, why, sizeof why);
    if (!b)
        return fail("%s", why);
    cursor c = {b, n, 0, 0xcbf29ce484222325ull};
    char magic[8];
    int64_t head[3];
    int32_t who[3];
    int status = 1;
#define BAD(...)                                \
    do {                                        \
        snprintf(why, sizeof why, __VA_ARGS__); \
        fail("%s: %s", path, why);              \
        goto out;                               \
    } while (0)
    if (!take(&c, magic, 8) || !take(&c, head, sizeof head) || !take(&c, who, sizeof who))
        BAD("truncated");
    const bool v2 = !memcmp(magic, "BURSTCK2", 8);
    if (memcmp(magic, "BURSTCK3", 8) && !v2)
        BAD("not a burstrt checkpoint");
    if (head[0] < 0)
        BAD("holds step %lld", (long long)head[0]);
    if (rank > 0 && head[0] != r->step)
        BAD("holds step %lld, rank 0's file step %lld", (long long)head[0], (long long)r->step);
    r->step = head[0];
    if (who[0] != rank || who[1] != world)
        BAD("was written by rank %d of %d, expected rank %d of %d (the job's cluster)", who[0],
            who[1], rank, world);
    if (who[2] < 0)
        BAD("holds %d parameters", who[2]);
    if (!v2 && !take(&c, NULL, 16))
        BAD("truncated");
    for (int i = 0; i < who[2]; i++) {
        uint32_t len;
        char name[CKPT_NAME];
        int32_t nd;
        held t = {0};
        uint8_t st;
        if (!take(&c, &len, sizeof len))
            BAD("truncated");
        if (len == 0 || len >= sizeof name)
            BAD("parameter %d has a name of %u bytes", i, len);
        if (!take(&c, name, len))
            BAD("truncated");
        name[len] = 0;
        if (memchr(name, 0, len))
            BAD("parameter %d has a name with a NUL byte", i);
        if (!take(&c, &nd, sizeof nd))
            BAD("truncated");
        if (nd < 0 || nd > CKPT_MAXDIMS)
            BAD("'%s' has %d dimensions", name, nd);
        if (!take(&c, t.shape, sizeof(int64_t) * (size_t)nd) || !take(&c, &st, 1))
            BAD("truncated");
        t.ndim = nd;
        t.numel = 1;
        for (int d = 0; d < nd; d++) {
            if (t.shape[d] < 0 || (t.shape[d] && t.numel > INT64_MAX / 4 / t.shape[d]))
                BAD("'%s' has a shape of %lld elements in dimension %d", name,
                    (long long)t.shape[d], d);
            t.numel *= t.shape[d];
        }
        if (st > 3)
            BAD("'%s' claims optimizer state %u", name, (unsigned)st);
        const size_t bytes = (size_t)t.numel * 4;
        const size_t states = (size_t)((st & 1) + (st >> 1));
        /* bytes fits in the file before it is tripled, so the product cannot overflow. */
        if (bytes > n - c.at || bytes * (1 + states) > n - c.at)
            BAD("truncated or corrupt ('%s' needs %zu bytes, %zu are left)", name,
                bytes * (1 + states), n - c.at);
        held *have = find_held(r, name);
        const bool fresh = !have;
        if (have &&
            (have->ndim != t.ndim || memcmp(have->shape, t.shape, sizeof(int64_t) * (size_t)nd)))
            BAD("'%s' has another shape than on a lower rank", name);
        if (!have) {
            if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 64;
                held *grown = realloc(r->t, sizeof *r->t * (size_t)r->cap);
                if (!grown)
                    BAD("out of memory");
                r->t = grown;
            }
            t.name = strdup(name);
            t.v = malloc(bytes ? bytes : 1);
            if (!t.name || !t.v) {
                free(t.name);
                free(t.v);
                BAD("out of memory");
            }
            r->t[r->n++] = t;
            have = &r->t[r->n - 1];
        }
        /* A replica's values are checksummed, but the lowest rank's are kept. */
        if (!take(&c, fresh ? have->v : NULL, bytes))
            BAD("truncated");
        if (!take(&c, NULL, bytes * states))
            BAD("truncated");
    }
    uint64_t expect = c.sum, sum;
    if (!take(&c, &sum, sizeof sum))
        BAD("truncated");
    if (sum != expect)
        BAD("corrupt (checksum mismatch)");
    if (c.at != n)
        BAD("corrupt (bytes after the checksum)");
    status = 0;
#undef BAD
out:
    free(b);
    return status;
}

/* The round directory: CKPT_DIR itself when it holds COMMIT, else its newest step-N that
 * does. NULL (reported) when there is none. */
static char *round_dir(const char *dir)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/COMMIT", dir);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        return strdup(dir);
    DIR *d = opendir(dir);
    if (!d) {
        fail("cannot read %s: %s", dir, strerror(errno));
        return NULL;
    }
    long long best = -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "step-", 5) || !e->d_name[5])
            continue;
        long long k = 0;
        const char *p = e->d_name + 5;
        for (; *p >= '0' && *p <= '9' && k <= (INT64_MAX - 9) / 10; p++)
            k = k * 10 + (*p - '0');
        if (*p || k <= best)
            continue;
        snprintf(path, sizeof path, "%s/%s/COMMIT", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            best = k;
    }
    closedir(d);
    if (best < 0) {
        fail("%s holds no committed checkpoint round (step-N/COMMIT)", dir);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/step-%012lld", dir, best);
    return strdup(path);
}

/* "layer.param@R^T" of --names' metadata, as --init reads it (runtime/weights.c). */
typedef struct target {
    char param[CKPT_NAME];
    int64_t row0; /* -1: the whole parameter */
    bool transposed;
} target;

static void parse_target(const char *s, target *t)
{
    size_t n = st_parse_target(s, &t->row0, &t->transposed);
    if (n >= sizeof t->param)
        n = sizeof t->param - 1;
    memcpy(t->param, s, n);
    t->param[n] = 0;
}

/* The bytes of tensor nt (its dtype and shape, as --names holds it) from h's values; NULL
 * (reported) when they do not fit. */
static void *unmap(const st_tensor *nt, const target *tg, const held *h)
{
    int64_t numel = nt->numel;
    int64_t per_row = h->ndim > 0 && h->shape[0] ? h->numel / h->shape[0] : h->numel;
    int64_t from = tg->row0 > 0 ? tg->row0 * per_row : 0;
    if (from > h->numel || numel > h->numel - from || (tg->row0 < 0 && numel != h->numel) ||
        (tg->transposed && nt->ndim != 2)) {
        fail("tensor '%s' of --names (%lld elements) does not fit parameter '%s' of the "
             "checkpoint (%lld)",
             nt->name, (long long)numel, h->name, (long long)h->numel);
        return NULL;
    }
    void *b =
        st_from_param(h->v, per_row, tg->row0, tg->transposed, nt->dtype, nt->ndim, nt->shape);
    if (!b)
        fail("out of memory (tensor '%s')", nt->name);
    return b;
}

/* The count a --names tensor P.num_batches_tracked holds (I64 or I32 scalar). */
static int64_t count_of(const st_tensor *t)
{
    if (t->dtype == ST_I64 && t->numel == 1) {
        int64_t v;
        memcpy(&v, t->data, 8);
        return v;
    }
    if (t->dtype == ST_I32 && t->numel == 1) {
        int32_t v;
        memcpy(&v, t->data, 4);
        return v;
    }
    return 0;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n > k && !strcmp(s + n - k, tail);
}

/* The ONNX model onnx with the tensors ts[0..nnamed) (those --names named, in their
 * dtypes) as its initializers, written atomically to output; 0 or 1. A tensor that
 * second[] marks is another name of a parameter an earlier one holds (a tied weight),
 * which ONNX keeps once. */
static int write_onnx(const char *output, const char *onnx, const st_tensor *ts, const bool *second,
                      int nnamed)
{
    imp_weight *w = calloc((size_t)nnamed + 1, sizeof *w);
    if (!w)
        return fail("out of memory");
    int nw = 0;
    for (int i = 0; i < nnamed; i++)
        if (!ends_with(ts[i].name, NBT) && !second[i]) /* ONNX keeps no count of batches */
            w[nw++] = (imp_weight){ts[i].name, ts[i].data,
                                   (size_t)ts[i].numel * st_dtype_size(ts[i].dtype)};
    unsigned char *bytes;
    size_t len;
    char err[1200];
    int status = 1;
    if (!imp_onnx_set_weights(onnx, w, nw, &bytes, &len, err, sizeof err)) {
        fail("--onnx: %s", err);
    } else {
        out_file out;
        if (out_open(&out, output)) {
            if (fwrite(bytes, 1, len, out.fp) != len)
                out_abort(&out);
            else
                status = out_commit(&out) ? 0 : 1;
        }
        free(bytes);
    }
    free(w);
    return status;
}

/* Writes the file (ONNX where onnx is the model to copy); 0 or 1. */
static int write_export(const char *output, round *r, const st_file *names, const char *onnx)
{
    const int cap = (names ? names->ntensors : 0) + 2 * r->n + 1;
    st_tensor *ts = calloc((size_t)cap, sizeof *ts);
    st_meta *meta = calloc((size_t)cap, sizeof *meta);
    void **owned = calloc((size_t)cap, sizeof *owned);
    int64_t *counts = calloc((size_t)cap, sizeof *counts);
    bool *counted = calloc((size_t)r->n + 1, sizeof *counted);
    bool *second = calloc((size_t)cap, sizeof *second);
    int nt = 0, nmeta = 0, nowned = 0, status = 1;
    if (!ts || !meta || !owned || !counts || !counted || !second) {
        fail("out of memory");
        goto out;
    }
    for (int i = 0; names && i < names->ntensors; i++) {
        const st_tensor *src = &names->tensors[i];
        const char *tgt = src->name;
        for (int k = 0; k < names->nmeta; k++)
            if (!strcmp(names->meta[k].key, src->name))
                tgt = names->meta[k].value;
        target tg;
        parse_target(tgt, &tg);
        st_tensor *t = &ts[nt];
        *t = *src;
        if (ends_with(tg.param, NBT)) {
            char mean[CKPT_NAME + 16];
            snprintf(mean, sizeof mean, "%.*s.running_mean", (int)(strlen(tg.param) - strlen(NBT)),
                     tg.param);
            held *h = find_held(r, mean);
            if (!h) {
                fail("tensor '%s' of --names counts the batches of a BatchNorm ('%s') that "
                     "the checkpoint does not hold",
                     src->name, mean);
                goto out;
            }
            counts[nt] = count_of(src) + r->step;
            t->dtype = ST_I64;
            t->data = &counts[nt];
            counted[h - r->t] = true;
        } else {
            held *h = find_held(r, tg.param);
            if (!h) {
                fail("tensor '%s' of --names maps to '%s', which the checkpoint does not hold",
                     src->name, tg.param);
                goto out;
            }
            if (src->dtype != ST_F32 && src->dtype != ST_F16 && src->dtype != ST_BF16 &&
                src->dtype != ST_F64) {
                fail("tensor '%s' of --names: dtype %s, not a float", src->name,
                     st_dtype_name(src->dtype));
                goto out;
            }
            void *bytes = unmap(src, &tg, h);
            if (!bytes)
                goto out;
            owned[nowned++] = bytes;
            t->data = bytes;
            second[nt] = h->used && tg.row0 < 0;
            h->used = true;
        }
        if (tgt != src->name) {
            meta[nmeta].key = src->name;
            meta[nmeta].value = tgt;
            nmeta++;
        }
        nt++;
    }
    if (onnx) {
        for (int i = 0; i < r->n; i++)
            if (!r->t[i].used) {
                fail("'%s' is in no tensor of --names, so the ONNX model has no initializer "
                     "for it",
                     r->t[i].name);
                goto out;
            }
        status = write_onnx(output, onnx, ts, second, nt);
        goto out;
    }
    /* What --names did not name, under Burst's names, and a count of batches for each
     * BatchNorm that had none. */
    for (int i = 0; i < r->n; i++) {
        held *h = &r->t[i];
        if (!h->used) {
            ts[nt] = (st_tensor){.name = h->name, .dtype = ST_F32, .ndim = h->ndim, .data = h->v};
            memcpy(ts[nt].shape, h->shape, sizeof(int64_t) * (size_t)h->ndim);
            nt++;
        }
        if (counted[i] || !ends_with(h->name, ".running_mean"))
            continue;
        size_t base = strlen(h->name) - strlen(".running_mean");
        char *count = malloc(base + strlen(NBT) + 1);
        if (!count) {
            fail("out of memory");
            goto out;
        }
        snprintf(count, base + strlen(NBT) + 1, "%.*s%s", (int)base, h->name, NBT);
        owned[nowned++] = count;
        counts[nt] = r->step;
        ts[nt] = (st_tensor){.name = count, .dtype = ST_I64, .ndim = 0, .data = &counts[nt]};
        nt++;
    }
    char err[1200];
    if (!st_write(output, ts, nt, meta, nmeta, err, sizeof err))
        fail("%s", err);
    else
        status = 0;
out:
    for (int i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(counts);
    free(counted);
    free(second);
    free(ts);
    free(meta);
    return status;
}

/* Every parameter and buffer of the job's model is in the round, with its shape. */
/* The model's weights section as the --names file it stands for: each tensor f32 in
 * its parameter's shape (transposed, or the rows up to the parameter's next row block,
 * as its target says), a count of batches an I64 0, and the section as metadata; what
 * --save-weights writes without --init. Everything in arena a. */
static void names_from_table(arena *a, const ir_graph *g, st_file *f)
{
    static const int64_t zero = 0;
    f->tensors = arena_alloc(a, sizeof *f->tensors * (size_t)(g->nweights + 1));
    f->meta = arena_alloc(a, sizeof *f->meta * (size_t)(g->nweights + 1));
    const char **targets = arena_alloc(a, sizeof *targets * (size_t)(g->nweights + 1));
    for (int i = 0; i < g->nweights; i++)
        targets[i] = g->weights[i].target;
    for (int i = 0; i < g->nweights; i++) {
        const ir_weight *w = &g->weights[i];
        st_tensor *t = &f->tensors[f->ntensors];
        t->name = w->source;
        t->numel = 1;
        if (!strcmp(w->param, "num_batches_tracked")) {
            t->dtype = ST_I64;
            t->data = &zero;
        } else {
            ir_param ps[IR_MAX_OP_PARAMS];
            int op = ir_op_find(g, w->layer),
                np = op < 0 ? 0 : ir_op_param_list(g, &g->ops[op], ps);
            int k = 0;
            while (k < np && strcmp(ps[k].name, w->param))
                k++;
            if (k == np)
                continue; /* checked when the job was read: not reached */
            t->dtype = ST_F32;
            t->ndim =
                st_target_shape(w->target, targets, g->nweights, ps[k].ndim, ps[k].dim, t->shape);
            for (int d = 0; d < t->ndim; d++)
                t->numel *= t->shape[d];
        }
        f->meta[f->nmeta++] = (st_meta){.key = w->source, .value = w->target};
        f->ntensors++;
    }
}

static int check_model(const ir_graph *g, round *r, const char *job)
{
    int missing = 0;
    for (int k = 0; k < g->nops; k++) {
        const ir_op *op = &g->ops[k];
        ir_param ps[IR_MAX_OP_PARAMS];
        int np = ir_op_param_list(g, op, ps);
        for (int j = 0; j < np; j++) {
            char name[CKPT_NAME + 64];
            snprintf(name, sizeof name, "%s.%s", op->name, ps[j].name);
            held *h = find_held(r, name);
            if (!h) {
                fail("the checkpoint holds no '%s', a %s of %s's model", name,
                     ps[j].buffer ? "buffer" : "parameter", job);
                missing++;
                continue;
            }
            bool same = h->ndim == ps[j].ndim;
            for (int d = 0; same && d < ps[j].ndim; d++)
                same = h->shape[d] == ps[j].dim[d];
            if (!same) {
                fail("the checkpoint's '%s' has another shape than in %s's model", name, job);
                missing++;
            }
        }
    }
    return missing ? 1 : 0;
}

int cmd_export(int argc, char **argv)
{
    const char *ckpt = NULL, *output = NULL, *jobfile = NULL, *names_path = NULL, *onnx = NULL,
               *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(export_usage, stdout);
            return 0;
        } else if ((v = tool_opt_value("burstc export", argc, argv, &i, "-o"))) {
            output = v;
        } else if ((v = tool_opt_value("burstc export", argc, argv, &i, "--job"))) {
            jobfile = v;
        } else if ((v = tool_opt_value("burstc export", argc, argv, &i, "--names"))) {
            names_path = v;
        } else if ((v = tool_opt_value("burstc export", argc, argv, &i, "--onnx"))) {
            onnx = v;
        } else if ((v = tool_opt_value("burstc export", argc, argv, &i, "--format"))) {
            format = v;
        } else if (!tool_input_arg("burstc export", argv[i], &ckpt)) {
            return 1;
        }
    }
    if (!ckpt)
        return fail("no checkpoint directory\n%s", export_usage);
    if (!output)
        return fail("no output file (-o FILE.safetensors)");
    if (!jobfile)
        return fail("no job (--job JOB.burst: the job the program was built from)");
    if (format && strcmp(format, "onnx") && strcmp(format, "safetensors"))
        return fail("--format %s: the formats are safetensors and onnx", format);
    if (format && !strcmp(format, "onnx") && !onnx)
        return fail("--format onnx needs --onnx MODEL.onnx (the model `burstc import` read: "
                    "its graph, with the trained initializers)");
    if (format && !strcmp(format, "safetensors") && onnx)
        return fail("--onnx writes an ONNX model, not --format safetensors");
    if (onnx && !names_path)
        return fail("--onnx needs --names (the file `burstc import --weights` wrote from it)");
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    round r = {0};
    st_file names = {0};
    char *dir = NULL;
    ir_module *m = load_input(a, jobfile, &d);
    if (!m || d.nerrors) {
        diag_summary(&d);
        goto out;
    }
    if (m->njobs != 1) {
        fail("%s has %d jobs; export needs the file of one", jobfile, m->njobs);
        goto out;
    }
    const ir_job *job = &m->jobs[0];
    const ir_cluster *cl = &m->clusters[job->cluster];
    const int world = cl->nodes * cl->gpus_per_node;
    if (!(dir = round_dir(ckpt)))
        goto out;
    for (int rank = 0; rank < world; rank++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/rank-%d.ckpt", dir, rank);
        if (read_rank(path, rank, world, &r))
            goto out;
    }
    if (check_model(m->graphs[job->graph], &r, job->name))
        goto out;
    char err[1200];
    if (names_path && !st_open(names_path, &names, err, sizeof err)) {
        fail("--names: %s", err);
        goto out;
    }
    st_file table = {0};
    const ir_graph *g = m->graphs[job->graph];
    if (!names_path && g->nweights)
        names_from_table(a, g, &table);
    status = write_export(output, &r, names_path ? &names : g->nweights ? &table : NULL, onnx);
out:
    st_close(&names);
    for (int i = 0; i < r.n; i++) {
        free(r.t[i].name);
        free(r.t[i].v);
    }
    free(r.t);
    free(dir);
    arena_free(a);
    return status;
}
