/* checkpoint.c: atomic per-rank checkpoints. Each rank writes DIR/rank-R.ckpt holding
 * the next step to run, the seed, the Adam step count and, in registration order, every
 * parameter and buffer it holds (name, shape, value, optimizer state). The file is
 * written to rank-R.ckpt.tmp, fsync'd and renamed, so a crash leaves the previous
 * checkpoint intact; a trailing FNV-1a checksum catches torn or foreign files. All
 * random numbers of the runtime are counter-based functions of (seed, step, ...), so
 * the step is the whole RNG state and a resumed run continues bit-identically. */
#include "internal.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "BURSTCK1"

static rt_params *attached;

typedef struct {
    FILE *f;
    uint64_t sum;
    const char *path;
} stream;

static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 0x100000001b3ull;
    }
}

static void put(stream *s, const void *p, size_t n)
{
    if (fwrite(p, 1, n, s->f) != n)
        rt_fatal("checkpoint", "cannot write %s: %s", s->path, strerror(errno));
    fnv(&s->sum, p, n);
}

static void get(stream *s, void *p, size_t n)
{
    if (fread(p, 1, n, s->f) != n)
        rt_fatal("checkpoint", "%s is truncated", s->path);
    fnv(&s->sum, p, n);
}

/* A tensor's elements through a host copy where the backend's memory is not the host's. */
static void put_tensor(stream *s, const rt_tensor *t)
{
    void *h = rt_host_view(t, true, "checkpoint");
    put(s, h, (size_t)t->numel * 4);
    rt_host_done(t, h, false, "checkpoint");
}

static void get_tensor(stream *s, rt_tensor *t)
{
    void *h = rt_host_view(t, false, "checkpoint");
    get(s, h, (size_t)t->numel * 4);
    rt_host_done(t, h, true, "checkpoint");
}

static void file_name(char *out, size_t cap, const char *dir, const char *suffix)
{
    if ((size_t)snprintf(out, cap, "%s/rank-%d.ckpt%s", dir, rt_opts_g.rank, suffix) >= cap)
        rt_fatal("checkpoint", "checkpoint directory name too long: %s", dir);
}

void rt_checkpoint_save(const char *dir, const rt_params *ps, int64_t next_step)
{
    char path[1024], tmp[1024];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        rt_fatal("checkpoint", "cannot create directory %s: %s", dir, strerror(errno));
    file_name(path, sizeof path, dir, "");
    file_name(tmp, sizeof tmp, dir, ".tmp");
    stream s = {fopen(tmp, "wb"), 0xcbf29ce484222325ull, tmp};
    if (!s.f)
        rt_fatal("checkpoint", "cannot open %s: %s", tmp, strerror(errno));
    put(&s, MAGIC, 8);
    int64_t head[3] = {next_step, (int64_t)rt_opts_g.seed, rt_params_adam_step(ps)};
    put(&s, head, sizeof head);
    int32_t n = rt_params_count(ps);
    put(&s, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        const rt_param *p = rt_params_at(ps, i);
        uint32_t len = (uint32_t)strlen(p->name);
        put(&s, &len, sizeof len);
        put(&s, p->name, len);
        int32_t nd = p->value->ndim;
        put(&s, &nd, sizeof nd);
        put(&s, p->value->shape, sizeof(int64_t) * (size_t)nd);
        uint8_t st = (uint8_t)((p->state[0] ? 1 : 0) | (p->state[1] ? 2 : 0));
        put(&s, &st, 1);
        put_tensor(&s, p->value);
        for (int k = 0; k < 2; k++)
            if (p->state[k])
                put_tensor(&s, p->state[k]);
    }
    uint64_t sum = s.sum;
    put(&s, &sum, sizeof sum);
    if (fflush(s.f) != 0 || fsync(fileno(s.f)) != 0 || fclose(s.f) != 0)
        rt_fatal("checkpoint", "cannot write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0)
        rt_fatal("checkpoint", "cannot rename %s to %s: %s", tmp, path, strerror(errno));
}

int64_t rt_checkpoint_load(const char *dir, rt_params *ps)
{
    char path[1024];
    file_name(path, sizeof path, dir, "");
    stream s = {fopen(path, "rb"), 0xcbf29ce484222325ull, path};
    if (!s.f)
        rt_fatal("checkpoint", "cannot open %s: %s", path, strerror(errno));
    char magic[8];
    get(&s, magic, 8);
    if (memcmp(magic, MAGIC, 8) != 0)
        rt_fatal("checkpoint", "%s is not a burstrt checkpoint", path);
    int64_t head[3];
    get(&s, head, sizeof head);
    if ((uint64_t)head[1] != rt_opts_g.seed)
        rt_fatal("checkpoint", "%s was written with --seed %lld, this run uses %llu", path,
                 (long long)head[1], (unsigned long long)rt_opts_g.seed);
    int32_t n;
    get(&s, &n, sizeof n);
    if (n != rt_params_count(ps))
        rt_fatal("checkpoint", "%s holds %d parameters, this rank has %d", path, n,
                 rt_params_count(ps));
    for (int i = 0; i < n; i++) {
        rt_param *p = rt_params_at(ps, i);
        uint32_t len;
        char name[256];
        get(&s, &len, sizeof len);
        if (len >= sizeof name)
            rt_fatal("checkpoint", "%s: corrupt parameter name", path);
        get(&s, name, len);
        name[len] = 0;
        if (strcmp(name, p->name) != 0)
            rt_fatal("checkpoint", "%s: parameter %d is '%s', expected '%s'", path, i, name,
                     p->name);
        int32_t nd;
        int64_t shape[RT_MAX_DIMS];
        get(&s, &nd, sizeof nd);
        if (nd != p->value->ndim)
            rt_fatal("checkpoint", "%s: '%s' has %d dimensions, expected %d", path, name, nd,
                     p->value->ndim);
        get(&s, shape, sizeof(int64_t) * (size_t)nd);
        if (memcmp(shape, p->value->shape, sizeof(int64_t) * (size_t)nd) != 0)
            rt_fatal("checkpoint", "%s: '%s' has a different shape", path, name);
        uint8_t st;
        get(&s, &st, 1);
        get_tensor(&s, p->value);
        for (int k = 0; k < 2; k++) {
            if (!(st & (1 << k)))
                continue;
            /* Optimizer state is created lazily; make it now so the first resumed
             * step continues the momentum instead of restarting it. */
            get_tensor(&s, rt_param_state(ps, p, k));
        }
    }
    uint64_t expect = s.sum, sum;
    get(&s, &sum, sizeof sum);
    if (sum != expect || fgetc(s.f) != EOF)
        rt_fatal("checkpoint", "%s is corrupt (checksum mismatch)", path);
    fclose(s.f);
    rt_params_set_adam_step(ps, head[2]);
    int64_t step = head[0], lo = step, hi = step;
    if (rt_mpi_running() && rt_opts_g.world_size > 1) {
        MPI_Allreduce(&step, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&step, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    }
    if (lo != hi)
        rt_fatal("checkpoint",
                 "ranks' checkpoints disagree on the step (%lld..%lld): a "
                 "checkpoint was interrupted; delete %s and restart",
                 (long long)lo, (long long)hi, dir);
    return step;
}

int64_t rt_checkpoint_attach(rt_params *ps)
{
    attached = ps;
    if (rt_opts_g.resume)
        return rt_checkpoint_load(rt_opts_g.checkpoint_dir, ps);
    return 0;
}

void rt_checkpoint_maybe_save(int64_t step)
{
    if (!attached || rt_opts_g.checkpoint_every <= 0)
        return;
    if ((step + 1) % rt_opts_g.checkpoint_every == 0)
        rt_checkpoint_save(rt_opts_g.checkpoint_dir, attached, step + 1);
}
