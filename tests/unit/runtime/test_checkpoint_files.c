/* test_checkpoint_files.c: checkpoint rounds on disk and the loader's checks, in one
 * process without MPI. Rounds: a new round replaces the older ones; a round without its
 * commit marker (a job killed during the save, also for real: a child killed by SIGKILL
 * between writing its file and committing) is never resumed from, the previous complete
 * round is; the checkpoint directory and its parents are made at start, and a path that
 * cannot be a directory is an error then. Loading: every header field is checked against
 * the program, each rewritten with a valid checksum (step -5, another round's step, seed,
 * Adam step count, rank, world size, loss scale, the loss scaler's clean steps, optimizer
 * state on a buffer, a huge name), as are a flipped byte, trailing bytes, a truncated file,
 * an empty directory and an old format. */
#include "check.h"
#include "internal.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

static char dir[] = "/tmp/burstrt-test-ckpt-XXXXXX";
static rt_pool *P;

typedef struct {
    rt_params *ps;
    rt_param *w, *b, *buf;
} model;

static model make(float v)
{
    model m = {rt_params_new(P), NULL, NULL, NULL};
    rt_comm *c = rt_comm_new(1, (int[]){0});
    m.w = rt_param_new(m.ps, "layer.weight", c, 2, (int64_t[]){3, 2});
    m.b = rt_param_new(m.ps, "layer.bias", c, 1, (int64_t[]){3});
    m.buf = rt_buffer_new(m.ps, "bn.running_mean", c, 1, (int64_t[]){3});
    rt_init_const(m.w->value, v);
    rt_init_const(m.b->value, v + 1);
    rt_init_const(m.buf->value, v + 2);
    rt_init_const(rt_param_state(m.ps, m.w, 0), v + 3); /* a momentum buffer */
    return m;
}

static char *path_of(int64_t step, const char *leaf)
{
    static char p[512];
    if (leaf)
        snprintf(p, sizeof p, "%s/step-%012lld/%s", dir, (long long)step, leaf);
    else
        snprintf(p, sizeof p, "%s/step-%012lld", dir, (long long)step);
    return p;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int rounds(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += !strncmp(e->d_name, "step-", 5);
    if (d)
        closedir(d);
    return n;
}

/* ---- rewriting a file with a valid checksum -------------------------------------------- */

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    unsigned char *b = malloc(1 << 16);
    *n = f ? fread(b, 1, 1 << 16, f) : 0;
    if (f)
        fclose(f);
    return b;
}

static void spill(const char *p, const unsigned char *b, size_t n, bool fix_sum)
{
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    if (fix_sum) { /* FNV-1a 64 of everything before the last 8 bytes, as checkpoint.c */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n - 8; i++) {
            h ^= c[i];
            h *= 0x100000001b3ull;
        }
        memcpy(c + n - 8, &h, 8);
    }
    FILE *f = fopen(p, "wb");
    fwrite(c, 1, n, f);
    fclose(f);
    free(c);
}

/* The header: magic[8], next step, seed, Adam count (int64), rank, world size, count
 * (int32), loss scale (f64), clean steps (int64), then the first parameter's name length
 * (uint32). */
enum {
    OFF_STEP = 8,
    OFF_SEED = 16,
    OFF_ADAM = 24,
    OFF_RANK = 32,
    OFF_WORLD = 36,
    OFF_SCALE = 44,
    OFF_CLEAN = 52,
    OFF_NAME = 60
};

static const char *load_dir = dir;
static void run_load(void *ctx)
{
    (void)ctx;
    model m = make(0);
    rt_checkpoint_load(load_dir, m.ps);
}

/* Rewrites `len` bytes at `off` (from the end when negative) of round 9's file. */
static void with_field(const char *name, long off, const void *val, size_t len, bool fix_sum,
                       const char *what)
{
    size_t n;
    char *p = path_of(9, "rank-0.ckpt");
    unsigned char *orig = slurp(p, &n), *b = malloc(n);
    memcpy(b, orig, n);
    memcpy(b + (off < 0 ? (long)n + off : off), val, len);
    spill(p, b, n, fix_sum);
    expect_fatal(name, run_load, NULL, what);
    spill(p, orig, n, false);
    free(b);
    free(orig);
}

/* A child writes its file for the round of step 12 and is killed before committing. */
static void save_killed(void *ctx)
{
    model *m = ctx;
    setenv("BURSTRT_TEST_FAULT", "kill-in-save@0:12", 1);
    rt_checkpoint_save(dir, m->ps, 12);
}

static void check_bad_dir(void *ctx)
{
    snprintf(rt_opts_g.checkpoint_dir, sizeof rt_opts_g.checkpoint_dir, "%s", (char *)ctx);
    rt_checkpoint_check_dir();
}

int main(void)
{
    alarm(50);
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    P = rt_pool_new();

    /* The directory and its parents are made at start. */
    char nested[256];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    snprintf(rt_opts_g.checkpoint_dir, sizeof rt_opts_g.checkpoint_dir, "%s", nested);
    rt_checkpoint_check_dir();
    CHECK(exists(nested), "%s was not made", nested);
    char file_in_way[256];
    snprintf(file_in_way, sizeof file_in_way, "%s/a/b/c/file", dir);
    FILE *f = fopen(file_in_way, "w");
    fclose(f);
    char under_file[300];
    snprintf(under_file, sizeof under_file, "%s/sub", file_in_way);
    expect_fatal("checkpoint dir under a file", check_bad_dir, under_file, ": Not a directory");
    remove(file_in_way);
    rmdir(nested);
    snprintf(nested, sizeof nested, "%s/a/b", dir);
    rmdir(nested);
    snprintf(nested, sizeof nested, "%s/a", dir);
    rmdir(nested);

    /* Rounds replace each other; the newest committed one is resumed. */
    expect_fatal("nothing to resume", run_load, NULL, "no complete checkpoint in");
    model a = make(1);
    rt_checkpoint_save(dir, a.ps, 3);
    CHECK(exists(path_of(3, "COMMIT")) && exists(path_of(3, "rank-0.ckpt")), "round 3");
    rt_init_const(a.w->value, 5);
    rt_checkpoint_save(dir, a.ps, 6);
    CHECK(!exists(path_of(3, NULL)) && rounds() == 1, "round 3 is not cleaned (%d rounds)",
          rounds());
    model b = make(0);
    CHECK(rt_checkpoint_load(dir, b.ps) == 6, "resumes from round 6");
    CHECK(rt_f32(b.w->value)[5] == 5 && rt_f32(b.b->value)[2] == 2 &&
              rt_f32(b.buf->value)[0] == 3 && b.w->state[0] && rt_f32(b.w->state[0])[1] == 4 &&
              !b.b->state[0],
          "restored values");

    /* A round without its marker is not resumed from, whether made by hand or by a rank
     * killed between its file and the commit; the next complete round cleans it. */
    rt_init_const(a.w->value, 7);
    rt_checkpoint_save(dir, a.ps, 9);
    mkdir(path_of(10, NULL), 0777);
    f = fopen(path_of(10, "rank-0.ckpt"), "w");
    fputs("a round that never finished", f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        save_killed(&a);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the save was not killed");
    CHECK(exists(path_of(12, "rank-0.ckpt")) && !exists(path_of(12, "COMMIT")),
          "the killed round should hold a file and no marker");
    model c = make(0);
    CHECK(rt_checkpoint_load(dir, c.ps) == 9 && rt_f32(c.w->value)[0] == 7,
          "resumes from the newest complete round (9)");

    /* Every header field, rewritten with a valid checksum. */
    int64_t v64 = -5;
    with_field("step -5", OFF_STEP, &v64, 8, true,
               "holds step -5, but it belongs to the round of step 9");
    v64 = 12;
    with_field("another round's step", OFF_STEP, &v64, 8, true,
               "holds step 12, but it belongs to the round of step 9");
    v64 = 77;
    with_field("seed", OFF_SEED, &v64, 8, true, "was written with --seed 77, this run uses 1");
    v64 = 10;
    with_field("Adam count", OFF_ADAM, &v64, 8, true, "Adam step count 10 outside 0..9");
    v64 = -1;
    with_field("negative Adam count", OFF_ADAM, &v64, 8, true, "Adam step count -1 outside 0..9");
    int32_t v32 = 1;
    with_field("rank", OFF_RANK, &v32, 4, true, "was written by rank 1 of 1, this is rank 0 of 1");
    v32 = 4;
    with_field("world size", OFF_WORLD, &v32, 4, true,
               "was written by rank 0 of 4, this is rank 0 of 1");
    double scale = -1.0;
    with_field("negative loss scale", OFF_SCALE, &scale, 8, true,
               "loss scale -1 is not a finite scale >= 0");
    scale = NAN;
    with_field("nan loss scale", OFF_SCALE, &scale, 8, true,
               "loss scale nan is not a finite scale >= 0");
    v64 = 10;
    with_field("clean steps", OFF_CLEAN, &v64, 8, true,
               "loss scaler's clean-step count 10 outside 0..9");
    uint32_t huge = 1u << 31;
    with_field("name length", OFF_NAME, &huge, 4, true,
               "parameter 0 has a name of 2147483648 bytes");
    unsigned char flip = 0x41;
    with_field("flipped byte", -20, &flip, 1, false, "corrupt (checksum mismatch)");
    {
        /* The buffer's state flag: it follows its name and shape, right before its values. */
        size_t n;
        unsigned char *orig = slurp(path_of(9, "rank-0.ckpt"), &n);
        const char *key = "bn.running_mean";
        size_t at = 0;
        for (size_t i = 0; i + strlen(key) < n; i++)
            if (!memcmp(orig + i, key, strlen(key)))
                at = i + strlen(key) + 4 + 8; /* ndim, one dimension */
        unsigned char one = 1;
        with_field("state on a buffer", (long)at, &one, 1, true,
                   "'bn.running_mean' claims optimizer state 1, which a buffer cannot have");
        spill(path_of(9, "rank-0.ckpt"), orig, n - 3, false);
        expect_fatal("truncated", run_load, NULL, "rank-0.ckpt is truncated");
        unsigned char *more = malloc(n + 1);
        memcpy(more, orig, n);
        more[n] = 0;
        spill(path_of(9, "rank-0.ckpt"), more, n + 1, false);
        expect_fatal("trailing bytes", run_load, NULL, "corrupt (bytes after the checksum)");
        spill(path_of(9, "rank-0.ckpt"), orig, n, false);
        free(more);
        free(orig);
    }
    model d = make(0);
    CHECK(rt_checkpoint_load(dir, d.ps) == 9, "the restored file loads again");

    /* The next complete round removes every other round, complete or not. */
    rt_checkpoint_save(dir, a.ps, 15);
    CHECK(rounds() == 1 && exists(path_of(15, "COMMIT")), "%d rounds left after round 15",
          rounds());

    /* A checkpoint of the old single-file format is named as such. */
    char old[300];
    snprintf(old, sizeof old, "%s/old", dir);
    mkdir(old, 0777);
    snprintf(old, sizeof old, "%s/old/rank-0.ckpt", dir);
    f = fopen(old, "w");
    fputs("BURSTCK1", f);
    fclose(f);
    char olddir[300];
    snprintf(olddir, sizeof olddir, "%s/old", dir);
    load_dir = olddir;
    expect_fatal("old format", run_load, NULL, "holds a checkpoint of an older burstrt");
    load_dir = dir;
    rt_comm_free_all();
    rt_pool_free(P);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    printf("test_checkpoint_files: %s\n", check_failures ? "FAILED" : "all checks passed");
    return check_failures ? 1 : 0;
}
