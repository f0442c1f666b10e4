/* checkpoint.c: checkpoints in rounds that are complete on every rank or not at all.
 *
 * A round is the directory DIR/step-N (N the next step to run, twelve digits): each rank
 * writes rank-R.ckpt there (to rank-R.ckpt.tmp, fsync, rename, fsync of the directory);
 * after a barrier rank 0 writes the commit marker COMMIT the same way; after a second
 * barrier every rank deletes its files of every other round, and rank 0 the other rounds'
 * markers and empty directories. So a rank killed at any moment leaves the previous
 * complete round intact, and resuming takes the newest round that is committed (rank 0
 * checks the marker) and present on every rank (the ranks agree on the oldest of their
 * newest rounds; where DIR is not shared between nodes each node holds its ranks' files).
 *
 * A rank's file: magic BURSTCK3; the next step, seed, Adam step count, rank and world
 * size, parameter count; the loss scaler's scale (f64, 0 when the run did not scale) and
 * clean-step count (int64); then for every parameter and buffer it holds in registration
 * order: name, shape, which optimizer states exist, values, states (raw little-endian
 * f32); then an FNV-1a checksum of everything before it. Files of the previous format
 * (BURSTCK2, the same without the scaler's fields) still load. Loading checks every field
 * against the program (the round's step, seed, rank, world size, parameter count, a finite
 * scale, names, shapes, which states a parameter can have, the checksum, no trailing
 * bytes) before the step reaches the data or the optimizer. All random numbers of the
 * runtime are counter-based functions of (seed, step, ...), so the step is the whole RNG
 * state and a resumed run continues bit-identically; the loss scaler's two fields are the
 * rest of the training state. */
#include "mpi_glue.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC    "BURSTCK3"
#define MAGIC_V2 "BURSTCK2" /* without the loss scaler's state */

static rt_params *attached;

/* ---- files and directories ------------------------------------------------------------- */

static void path_of(char *out, size_t cap, const char *dir, int64_t step, const char *leaf)
{
    int n = step < 0 ? snprintf(out, cap, "%s/%s", dir, leaf ? leaf : "")
            : leaf   ? snprintf(out, cap, "%s/step-%012lld/%s", dir, (long long)step, leaf)
                     : snprintf(out, cap, "%s/step-%012lld", dir, (long long)step);
    if (n < 0 || (size_t)n >= cap)
        rt_fatal("checkpoint", "checkpoint directory name too long: %s", dir);
}

static void rank_file(char *out, size_t cap, const char *dir, int64_t step, const char *suffix)
{
    char leaf[160];
    int n = snprintf(leaf, sizeof leaf, "rank-%d.ckpt%s", rt_opts_g.rank, suffix);
    if (n < 0 || (size_t)n >= sizeof leaf)
        rt_fatal("checkpoint", "checkpoint file name too long: rank-%d.ckpt%s", rt_opts_g.rank,
                 suffix);
    path_of(out, cap, dir, step, leaf);
}

/* mkdir -p: every missing component of path, then path must be a directory. */
static void make_dirs(const char *path)
{
    char buf[1024];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        rt_fatal("checkpoint", "bad checkpoint directory '%s'", path);
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            rt_fatal("checkpoint", "cannot create directory %s: %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        rt_fatal("checkpoint", "%s is not a directory", path);
}

/* Makes a rename or a new entry in dir durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0)
        rt_fatal("checkpoint", "cannot sync directory %s: %s", dir, strerror(errno));
    close(fd);
}

void rt_checkpoint_check_dir(void)
{
    const char *dir = rt_opts_g.checkpoint_dir;
    if (!dir[0])
        return;
    make_dirs(dir);
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.probe-rank-%d", dir, rt_opts_g.rank);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        rt_fatal("checkpoint", "cannot write checkpoints to %s: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
}

/* The round of a directory entry "step-N", or -1. */
static int64_t round_of(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || !name[5])
        return -1;
    int64_t n = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || n > (INT64_MAX - 9) / 10)
            return -1;
        n = n * 10 + (*p - '0');
    }
    return n;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The newest round in dir that this rank can use: its own file is there and, on rank 0,
 * the commit marker. -1 when there is none. */
static int64_t newest_round(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int64_t best = -1;
    char path[1200];
    for (struct dirent *e; (e = readdir(d));) {
        int64_t n = round_of(e->d_name);
        if (n <= best)
            continue;
        rank_file(path, sizeof path, dir, n, "");
        if (!exists(path))
            continue;
        path_of(path, sizeof path, dir, n, "COMMIT");
        if (rt_opts_g.rank == 0 && !exists(path))
            continue;
        best = n;
    }
    closedir(d);
    return best;
}

/* After round `keep` is committed, the other rounds go: each rank deletes its own files
 * (enough where DIR is local to a node), rank 0 every file and the directories (on a
 * shared DIR). */
static void clean_other_rounds(const char *dir, int64_t keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[1200], file[1600];
    for (struct dirent *e; (e = readdir(d));) {
        int64_t n = round_of(e->d_name);
        if (n < 0 || n == keep)
            continue;
        /* This rank's files (its own and its background copies', rank-R.ckpt*); rank 0
         * every file, then the directory. */
        char mine[64];
        int len = snprintf(mine, sizeof mine, "rank-%d.ckpt", rt_opts_g.rank);
        path_of(path, sizeof path, dir, n, NULL);
        DIR *r = opendir(path);
        for (struct dirent *f; r && (f = readdir(r));)
            if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0 &&
                (rt_opts_g.rank == 0 || strncmp(f->d_name, mine, (size_t)len) == 0)) {
                snprintf(file, sizeof file, "%s/%s", path, f->d_name);
                unlink(file);
            }
        if (r)
            closedir(r);
        if (rt_opts_g.rank == 0)
            rmdir(path);
    }
    closedir(d);
}

/* ---- the stream of one file ------------------------------------------------------------ */

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
    rt_progress_tick();
}

static void get_tensor(stream *s, rt_tensor *t)
{
    void *h = rt_host_view(t, false, "checkpoint");
    get(s, h, (size_t)t->numel * 4);
    rt_host_done(t, h, true, "checkpoint");
    rt_progress_tick();
}

/* Writes `path` through path.tmp: fsync, rename, fsync of its directory. */
static FILE *open_tmp(const char *tmp)
{
    FILE *f = fopen(tmp, "wb");
    if (!f)
        rt_fatal("checkpoint", "cannot open %s: %s", tmp, strerror(errno));
    return f;
}

static void commit_file(FILE *f, const char *tmp, const char *path, const char *dir)
{
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0)
        rt_fatal("checkpoint", "cannot write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0)
        rt_fatal("checkpoint", "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    sync_dir(dir);
}

static void barrier(const char *what)
{
    if (!rt_mpi_running() || rt_opts_g.world_size < 2)
        return;
    rt_wait_begin(what);
    rt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "checkpoint");
    rt_wait_end();
}

/* ---- testing hook ---------------------------------------------------------------------- */

/* BURSTRT_TEST_FAULT=kill-in-save@R:N: rank R kills itself (SIGKILL) during the round of
 * step N, after its own file is written and before the round is committed, so that the
 * tests can check that such a round is not used. */
static void test_fault_in_save(int64_t step)
{
    const char *f = getenv("BURSTRT_TEST_FAULT");
    int rank;
    long long at;
    if (f && sscanf(f, "kill-in-save@%d:%lld", &rank, &at) == 2 && rank == rt_opts_g.rank &&
        at == step) {
        rt_message("checkpoint", "BURSTRT_TEST_FAULT: killing this rank in the round of step %lld",
                   at);
        raise(SIGKILL);
    }
}

/* ---- save ------------------------------------------------------------------------------ */

static void (*also_save)(const char *dir, int64_t round_step);
static void (*also_load)(const char *dir, int64_t round_step);

void rt_checkpoint_also(void (*save)(const char *dir, int64_t round_step),
                        void (*load)(const char *dir, int64_t round_step))
{
    also_save = save;
    also_load = load;
}

void rt_checkpoint_save(const char *dir, const rt_params *ps, int64_t next_step)
{
    rt_grads_wait();
    if (next_step < 0)
        rt_fatal("checkpoint", "cannot checkpoint step %lld", (long long)next_step);
    int64_t was_step;
    rt_phase was = rt_progress_now(&was_step);
    rt_progress_phase(RT_PHASE_SAVE, next_step - 1);
    char round[1100], path[1200], tmp[1200];
    make_dirs(dir);
    path_of(round, sizeof round, dir, next_step, NULL);
    if (mkdir(round, 0777) != 0 && errno != EEXIST)
        rt_fatal("checkpoint", "cannot create directory %s: %s", round, strerror(errno));
    sync_dir(dir);
    rt_checkpoint_write(dir, next_step, "", ps, next_step, rt_opts_g.seed, rt_loss_scaler_get());
    if (also_save)
        also_save(dir, next_step);
    test_fault_in_save(next_step);
    /* Every rank's file is durable: the round can be committed. */
    barrier("checkpoint");
    if (rt_opts_g.rank == 0) {
        path_of(path, sizeof path, dir, next_step, "COMMIT");
        path_of(tmp, sizeof tmp, dir, next_step, "COMMIT.tmp");
        FILE *f = open_tmp(tmp);
        fprintf(f, "step %lld\nranks %d\n", (long long)next_step, rt_opts_g.world_size);
        commit_file(f, tmp, path, round);
    }
    /* The marker is durable: older rounds can go. */
    barrier("checkpoint");
    clean_other_rounds(dir, next_step);
    rt_progress_phase(was, was_step);
}

void rt_checkpoint_write(const char *dir, int64_t round_step, const char *suffix,
                         const rt_params *ps, int64_t step, uint64_t seed, const rt_loss_scaler *ls)
{
    char round[1100], path[1200], tmp[1200], tsuffix[104];
    path_of(round, sizeof round, dir, round_step, NULL);
    if (snprintf(tsuffix, sizeof tsuffix, "%s.tmp", suffix) >= (int)sizeof tsuffix)
        rt_fatal("checkpoint", "checkpoint file suffix too long: %s", suffix);
    rank_file(path, sizeof path, dir, round_step, suffix);
    rank_file(tmp, sizeof tmp, dir, round_step, tsuffix);
    stream s = {open_tmp(tmp), 0xcbf29ce484222325ull, tmp};
    put(&s, MAGIC, 8);
    int64_t head[3] = {step, (int64_t)seed, rt_params_adam_step(ps)};
    put(&s, head, sizeof head);
    int32_t who[3] = {rt_opts_g.rank, rt_opts_g.world_size, rt_params_count(ps)};
    put(&s, who, sizeof who);
    double scale = ls && ls->on ? ls->scale : 0.0;
    int64_t clean = ls && ls->on ? ls->clean : 0;
    put(&s, &scale, sizeof scale);
    put(&s, &clean, sizeof clean);
    for (int i = 0; i < who[2]; i++) {
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
    commit_file(s.f, tmp, path, round);
}

/* ---- load ------------------------------------------------------------------------------ */

static _Noreturn void bad(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static _Noreturn void bad(const char *path, const char *fmt, ...)
{
    char why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    rt_fatal("checkpoint", "%s: %s", path, why);
}

static int64_t agree_min(int64_t v)
{
    int64_t lo = v;
    if (rt_mpi_running() && rt_opts_g.world_size > 1) {
        rt_wait_begin("checkpoint");
        rt_mpi_check(MPI_Allreduce(&v, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD), "checkpoint");
        rt_wait_end();
    }
    return lo;
}

int64_t rt_checkpoint_load(const char *dir, rt_params *ps)
{
    int64_t was_step;
    rt_phase was = rt_progress_now(&was_step);
    rt_progress_phase(RT_PHASE_LOAD, -1);
    const char *f = getenv("BURSTRT_TEST_FAULT");
    int frank;
    if (f && sscanf(f, "stop-in-load@%d", &frank) == 1 && frank == rt_opts_g.rank) {
        rt_message("checkpoint", "BURSTRT_TEST_FAULT: stopping this rank while loading");
        raise(SIGSTOP);
    }
    int64_t mine = newest_round(dir), step = agree_min(mine);
    if (step < 0) {
        char old[1200];
        rank_file(old, sizeof old, dir, -1, "");
        if (mine < 0 && exists(old))
            rt_fatal("checkpoint",
                     "%s holds a checkpoint of an older burstrt (%s); it cannot be resumed", dir,
                     old);
        if (mine < 0)
            rt_fatal("checkpoint", "no complete checkpoint in %s to resume from", dir);
        rt_fatal("checkpoint",
                 "no checkpoint round in %s is complete on every rank (this rank's newest is "
                 "step %lld)",
                 dir, (long long)mine);
    }
    rt_checkpoint_read(dir, step, "", ps, step, rt_opts_g.seed, rt_loss_scaler_get());
    if (also_load)
        also_load(dir, step);
    rt_progress_phase(was, was_step);
    return step;
}

int64_t rt_checkpoint_read(const char *dir, int64_t round_step, const char *suffix, rt_params *ps,
                           int64_t step, uint64_t seed, rt_loss_scaler *ls)
{
    char path[1200];
    rank_file(path, sizeof path, dir, round_step, suffix);
    stream s = {fopen(path, "rb"), 0xcbf29ce484222325ull, path};
    if (!s.f) {
        if (step < 0 && errno == ENOENT)
            return -1;
        rt_fatal("checkpoint", "cannot open %s: %s", path, strerror(errno));
    }
    char magic[8];
    get(&s, magic, 8);
    const bool v2 = memcmp(magic, MAGIC_V2, 8) == 0;
    if (memcmp(magic, MAGIC, 8) != 0 && !v2)
        bad(path, "not a burstrt checkpoint");
    int64_t head[3];
    get(&s, head, sizeof head);
    int32_t who[3];
    get(&s, who, sizeof who);
    if (step >= 0 && head[0] != step)
        bad(path, "holds step %lld, but it belongs to the round of step %lld", (long long)head[0],
            (long long)step);
    if (head[0] < 0)
        bad(path, "holds step %lld", (long long)head[0]);
    if ((uint64_t)head[1] != seed)
        bad(path, "was written with %s %llu, this run uses %llu",
            suffix[0] ? "the background copy's seed" : "--seed", (unsigned long long)head[1],
            (unsigned long long)seed);
    if (head[2] < 0 || head[2] > head[0])
        bad(path, "Adam step count %lld outside 0..%lld", (long long)head[2], (long long)head[0]);
    if (who[0] != rt_opts_g.rank || who[1] != rt_opts_g.world_size)
        bad(path, "was written by rank %d of %d, this is rank %d of %d", who[0], who[1],
            rt_opts_g.rank, rt_opts_g.world_size);
    const int n = rt_params_count(ps);
    if (who[2] != n)
        bad(path, "holds %d parameters, this rank has %d", who[2], n);
    double scale = 0.0;
    int64_t clean = 0;
    if (!v2) {
        get(&s, &scale, sizeof scale);
        get(&s, &clean, sizeof clean);
        if (!(scale >= 0.0 && scale <= FLT_MAX))
            bad(path, "loss scale %g is not a finite scale >= 0", scale);
        if (clean < 0 || clean > head[0])
            bad(path, "loss scaler's clean-step count %lld outside 0..%lld", (long long)clean,
                (long long)head[0]);
    }
    for (int i = 0; i < n; i++) {
        rt_param *p = rt_params_at(ps, i);
        uint32_t len;
        char name[256];
        get(&s, &len, sizeof len);
        if (len >= sizeof name)
            bad(path, "parameter %d has a name of %u bytes", i, len);
        get(&s, name, len);
        name[len] = 0;
        if (strcmp(name, p->name) != 0)
            bad(path, "parameter %d is '%s', expected '%s'", i, name, p->name);
        int32_t nd;
        int64_t shape[RT_MAX_DIMS];
        get(&s, &nd, sizeof nd);
        if (nd != p->value->ndim)
            bad(path, "'%s' has %d dimensions, expected %d", name, nd, p->value->ndim);
        get(&s, shape, sizeof(int64_t) * (size_t)nd);
        if (memcmp(shape, p->value->shape, sizeof(int64_t) * (size_t)nd) != 0)
            bad(path, "'%s' has a different shape", name);
        uint8_t st;
        get(&s, &st, 1);
        if (st > 3 || (st && !p->grad))
            bad(path, "'%s' claims optimizer state %u, which a %s cannot have", name, (unsigned)st,
                p->grad ? "parameter" : "buffer");
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
    if (sum != expect)
        bad(path, "corrupt (checksum mismatch)");
    if (fgetc(s.f) != EOF)
        bad(path, "corrupt (bytes after the checksum)");
    fclose(s.f);
    rt_params_set_adam_step(ps, head[2]);
    /* A dynamic scale continues where it was; a fixed one is the command line's; a file
     * of a run without scaling leaves the scaler at its start. */
    if (ls && ls->on && ls->dynamic && scale > 0.0) {
        ls->scale = scale;
        ls->clean = clean;
    }
    return head[0];
}

int64_t rt_checkpoint_attach(rt_params *ps)
{
    attached = ps;
    rt_weights_attach(ps);
    int64_t first = rt_opts_g.resume ? rt_checkpoint_load(rt_opts_g.checkpoint_dir, ps) : 0;
    rt_weights_maybe_save(first); /* --iterations reached before any step */
    return first;
}

/* Every --checkpoint-every steps, and after the last step (--iterations) whenever there
 * is a checkpoint directory. */
void rt_checkpoint_maybe_save(int64_t step)
{
    const rt_options *o = &rt_opts_g;
    if (!attached || !o->checkpoint_dir[0])
        return;
    if ((o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0) ||
        step + 1 == o->iterations)
        rt_checkpoint_save(o->checkpoint_dir, attached, step + 1);
}
