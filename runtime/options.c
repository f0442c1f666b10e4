/* options.c: the command line every generated program shares (rt_init parses it):
 * iterations, data source, seed, trace, checkpoints, threads per rank, the watchdog's step
 * timeout, the gradient all-reduce's buckets and overlap, background work and its slowdown
 * bound, loss scaling. Both "--opt V" and "--opt=V"; an unknown option or a bad value is
 * a fatal error naming it, and --help prints the usage on rank 0 and exits 0. */
#include "internal.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job's data source, parsed with the command line (so a bad one is reported as an
 * option would be, after MPI has started). */
static char default_data[1100] = "synthetic";

void rt_set_defaults(int64_t iterations, const char *data)
{
    if (iterations > 0)
        rt_opts_g.iterations = iterations;
    if (data)
        snprintf(default_data, sizeof default_data, "%s", data);
}

static void usage(FILE *f, const char *program)
{
    fprintf(f,
            "usage: %s [options]   (run one process per rank under mpirun)\n"
            "  --iterations N        training iterations (default %lld)\n"
            "  --data SOURCE         training data (default %s):\n"
            "                        synthetic, fmnist[:DIR] (default DIR\n"
            "                        /usr/share/datasets/fashion-mnist), or npy:X.npy,Y.npy\n"
            "                        (inputs [N,...] u8/f16/bf16/f32, labels [N] or [N,T]\n"
            "                        integers), images:DIR (DIR/CLASS/*.jpg|png), or\n"
            "                        tokens:FILE / tokens32:FILE (flat uint16 / uint32 ids)\n"
            "  --eval-data SOURCE    the test set (npy:, images: or tokens:) for the accuracy\n"
            "                        printed after training\n"
            "  --augment on|off      images: RandomResizedCrop + flip for training (on), or\n"
            "                        Resize + CenterCrop as for the test set (off)\n"
            "  --data-workers N      images: decoding threads per rank, which also decode\n"
            "                        the next batches during a step (default: --threads)\n"
            "  --skip-bad-data       images: a corrupt image met during training or testing\n"
            "                        is counted (input zeroed, label kept) and reported at\n"
            "                        the end, instead of stopping the run\n"
            "  --mean M[,M,M]        images: normalisation (default ImageNet's for 3\n"
            "  --std S[,S,S]         channels, 0 and 1 for 1 channel)\n"
            "  --seed S              seed of init, data order and dropout (default 1)\n"
            "  --trace FILE          write a Chrome trace (all ranks, pid = rank)\n"
            "  --checkpoint-dir DIR  where checkpoints go (made if missing); one is written\n"
            "                        after the last iteration, and more with:\n"
            "  --checkpoint-every N  checkpoint every N iterations (needs --checkpoint-dir)\n"
            "  --resume              continue from the newest complete checkpoint in DIR\n"
            "  --init FILE           start from the parameters and buffers in FILE\n"
            "                        (safetensors, by name or by the map `burstc import\n"
            "                        --weights` writes); a missing, extra or mis-shaped\n"
            "                        tensor is an error naming it\n"
            "  --init-partial        with --init: load what fits, list the rest\n"
            "  --save-weights FILE   write the parameters and buffers after the last\n"
            "                        iteration to FILE (safetensors, under --init's names)\n"
            "  --threads N           threads per rank for oneDNN and BLAS (default:\n"
            "                        OMP_NUM_THREADS, else the CPUs this rank may use,\n"
            "                        shared among the node's ranks)\n"
            "  --step-timeout SEC    end the job when a rank makes no progress for SEC seconds\n"
            "                        (default 20, or 3x the slowest step; 0: never; at most\n"
            "                        1e9)\n"
            "  --allow-mismatched-launch\n"
            "                        run even when the ranks do not sit on the hosts as the\n"
            "                        plan's nodes do (gpus_per_node ranks a host, in rank\n"
            "                        order); without it such a launch is an error\n"
            "  --bucket-mb MB        gradients are all-reduced in buckets of about MB\n"
            "                        megabytes (default 25; the first of a step 1 MB at most)\n"
            "  --no-overlap          all-reduce the gradients after the backward pass, not\n"
            "                        while it runs\n"
            "  --background on|off   train the plan's background jobs in this rank's idle\n"
            "                        time (default on); off: the foreground alone\n"
            "  --slowdown X          bound on the foreground's step time with background\n"
            "                        work over without it (default: the job's, 1.1)\n"
            "  --loss-scale dynamic|off|S\n"
            "                        loss scaling (default: dynamic when the job's dtype is\n"
            "                        f16, else off): dynamic as PyTorch's GradScaler, or a\n"
            "                        fixed scale S; a step whose gradients hold inf or nan is\n"
            "                        skipped on every rank\n"
            "  --loss-scale-init S   the dynamic scale's first value (default 65536)\n"
            "  --loss-scale-growth X the dynamic scale grows by X (> 1, default 2) after\n"
            "  --loss-scale-interval N\n"
            "                        clean steps in a row (default 2000), and\n"
            "  --loss-scale-backoff X\n"
            "                        shrinks by X (0 < X < 1, default 0.5) on an overflow\n"
            "  --help                this text\n",
            program, (long long)rt_opts_g.iterations, default_data);
}

static int64_t parse_int(const char *opt, const char *v, int64_t lo)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < lo)
        rt_fatal("options", "%s expects an integer >= %lld, got '%s'", opt, (long long)lo, v);
    return x;
}

/* A finite number in (lo, hi) (open at each end, or closed where *_closed). */
static double parse_real(const char *opt, const char *v, double lo, bool lo_closed, double hi,
                         bool hi_closed, const char *expect)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !isfinite(x) || (lo_closed ? x < lo : x <= lo) ||
        (hi_closed ? x > hi : x >= hi))
        rt_fatal("options", "%s expects %s, got '%s'", opt, expect, v);
    return x;
}

static void copy_str(char *dst, size_t cap, const char *opt, const char *v)
{
    if (strlen(v) >= cap)
        rt_fatal("options", "%s: value too long", opt);
    strcpy(dst, v);
}

/* A data source as --data (or the job's data, `opt`) spells it. */
static void parse_data(rt_options *o, const char *opt, const char *val)
{
    if (!strcmp(val, "synthetic")) {
        o->data = RT_DATA_SYNTHETIC;
    } else if (!strncmp(val, "fmnist", 6) && (val[6] == 0 || val[6] == ':')) {
        o->data = RT_DATA_FMNIST;
        if (val[6] == ':')
            copy_str(o->data_path, sizeof o->data_path, opt, val + 7);
    } else if (!strncmp(val, "images:", 7)) {
        if (!val[7])
            rt_fatal("options", "%s: images expects images:DIR, got '%s'", opt, val);
        o->data = RT_DATA_IMAGES;
        copy_str(o->data_path, sizeof o->data_path, opt, val + 7);
    } else if (!strncmp(val, "tokens:", 7) || !strncmp(val, "tokens32:", 9)) {
        const char *path = strchr(val, ':') + 1;
        if (!*path)
            rt_fatal("options", "%s: tokens expects tokens:FILE, got '%s'", opt, val);
        o->data = val[6] == ':' ? RT_DATA_TOKENS : RT_DATA_TOKENS32;
        copy_str(o->data_path, sizeof o->data_path, opt, path);
    } else if (!strncmp(val, "npy:", 4)) {
        const char *comma = strchr(val + 4, ',');
        if (!comma || comma == val + 4 || !comma[1] || strchr(comma + 1, ','))
            rt_fatal("options", "%s: npy expects npy:X.npy,Y.npy (two paths, one comma), got '%s'",
                     opt, val);
        o->data = RT_DATA_NPY;
        copy_str(o->data_path, sizeof o->data_path, opt, val + 4);
    } else {
        rt_fatal("options",
                 "%s expects synthetic, fmnist[:DIR], npy:X.npy,Y.npy, images:DIR or "
                 "tokens[32]:FILE, got '%s'",
                 opt, val);
    }
}

/* --mean / --std: one number per channel, or one for all. */
static int parse_floats(const char *opt, const char *v, float out[3], bool positive)
{
    int n = 0;
    const char *p = v;
    while (n < 3) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x) || (positive && !(x > 0)))
            break;
        out[n++] = (float)x;
        if (*end == 0 && n != 2)
            return n;
        if (*end != ',')
            break;
        p = end + 1;
    }
    rt_fatal("options", "%s expects 1 or 3 %snumbers separated by commas, got '%s'", opt,
             positive ? "positive " : "", v);
}

/* The options and whether each takes a value. */
static const struct {
    const char *name;
    bool value;
} known[] = {
    {"--help", false},
    {"--resume", false},
    {"--skip-bad-data", false},
    {"--init", true},
    {"--init-partial", false},
    {"--save-weights", true},
    {"--iterations", true},
    {"--seed", true},
    {"--threads", true},
    {"--checkpoint-every", true},
    {"--trace", true},
    {"--checkpoint-dir", true},
    {"--step-timeout", true},
    {"--data", true},
    {"--eval-data", true},
    {"--augment", true},
    {"--data-workers", true},
    {"--mean", true},
    {"--std", true},
    {"--bucket-mb", true},
    {"--no-overlap", false},
    {"--allow-mismatched-launch", false},
    {"--background", true},
    {"--slowdown", true},
    {"--loss-scale", true},
    {"--loss-scale-init", true},
    {"--loss-scale-growth", true},
    {"--loss-scale-backoff", true},
    {"--loss-scale-interval", true},
};

bool rt_parse_options(int argc, char **argv, const char *program)
{
    rt_options *o = &rt_opts_g;
    strcpy(o->data_path, "/usr/share/datasets/fashion-mnist");
    parse_data(o, "the job's data", default_data);
    o->augment = true;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *arg = argv[i], *val = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) != 0)
            rt_fatal("options", "unexpected argument '%s' (see --help)", arg);
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        int k = -1;
        for (size_t j = 0; j < sizeof known / sizeof *known && len < sizeof name; j++)
            if (strlen(known[j].name) == len && !strncmp(known[j].name, arg, len))
                k = (int)j;
        if (k < 0)
            rt_fatal("options", "unknown option '%.*s' (see --help)", (int)(len < 200 ? len : 200),
                     arg);
        memcpy(name, arg, len);
        name[len] = 0;
        if (!known[k].value && eq)
            rt_fatal("options", "%s takes no value, got '%s'", name, arg);
        if (known[k].value) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                rt_fatal("options", "%s needs a value", name);
        }
        if (!strcmp(name, "--help")) {
            if (o->rank == 0)
                usage(stdout, program);
            fflush(stdout);
            return false;
        } else if (!strcmp(name, "--resume")) {
            o->resume = true;
        } else if (!strcmp(name, "--skip-bad-data")) {
            o->skip_bad_data = true;
        } else if (!strcmp(name, "--allow-mismatched-launch")) {
            o->allow_mismatched_launch = true;
        } else if (!strcmp(name, "--init")) {
            copy_str(o->init_path, sizeof o->init_path, name, val);
        } else if (!strcmp(name, "--init-partial")) {
            o->init_partial = true;
        } else if (!strcmp(name, "--save-weights")) {
            copy_str(o->save_weights, sizeof o->save_weights, name, val);
        } else if (!strcmp(name, "--no-overlap")) {
            o->no_overlap = true;
        } else if (!strcmp(name, "--bucket-mb")) {
            char *end;
            o->bucket_mb = strtod(val, &end);
            if (*end || end == val || !(o->bucket_mb > 0) || o->bucket_mb > 1e6)
                rt_fatal("options", "--bucket-mb expects megabytes > 0 (at most 1e6), got '%s'",
                         val);
        } else if (!strcmp(name, "--iterations")) {
            o->iterations = parse_int(name, val, 0);
        } else if (!strcmp(name, "--seed")) {
            o->seed = (uint64_t)parse_int(name, val, 0);
        } else if (!strcmp(name, "--threads")) {
            o->threads = (int)parse_int(name, val, 1);
        } else if (!strcmp(name, "--checkpoint-every")) {
            o->checkpoint_every = parse_int(name, val, 0);
        } else if (!strcmp(name, "--trace")) {
            copy_str(o->trace_path, sizeof o->trace_path, name, val);
        } else if (!strcmp(name, "--checkpoint-dir")) {
            copy_str(o->checkpoint_dir, sizeof o->checkpoint_dir, name, val);
        } else if (!strcmp(name, "--step-timeout")) {
            char *end;
            o->step_timeout = strtod(val, &end);
            if (*end || end == val || !(o->step_timeout >= 0) ||
                o->step_timeout > RT_STEP_TIMEOUT_MAX)
                rt_fatal("options", "--step-timeout expects seconds from 0 to %g, got '%s'",
                         RT_STEP_TIMEOUT_MAX, val);
        } else if (!strcmp(name, "--background")) {
            if (strcmp(val, "on") && strcmp(val, "off"))
                rt_fatal("options", "--background expects on or off, got '%s'", val);
            o->background = !strcmp(val, "on");
        } else if (!strcmp(name, "--slowdown")) {
            char *end;
            o->slowdown = strtod(val, &end);
            if (*end || end == val || !(o->slowdown >= 1) || o->slowdown > 1e6)
                rt_fatal("options", "--slowdown expects a number >= 1, got '%s'", val);
        } else if (!strcmp(name, "--loss-scale")) {
            if (!strcmp(val, "dynamic")) {
                o->loss_scale = RT_LOSS_SCALE_DYNAMIC;
            } else if (!strcmp(val, "off")) {
                o->loss_scale = RT_LOSS_SCALE_OFF;
            } else {
                o->loss_scale = RT_LOSS_SCALE_FIXED;
                o->loss_scale_init =
                    parse_real(name, val, 0, false, FLT_MAX, true, "dynamic, off or a scale > 0");
            }
        } else if (!strcmp(name, "--loss-scale-init")) {
            o->loss_scale_init = parse_real(name, val, 0, false, FLT_MAX, true, "a scale > 0");
        } else if (!strcmp(name, "--loss-scale-growth")) {
            o->loss_scale_growth = parse_real(name, val, 1, false, 1e6, true, "a factor > 1");
        } else if (!strcmp(name, "--loss-scale-backoff")) {
            o->loss_scale_backoff =
                parse_real(name, val, 0, false, 1, false, "a factor between 0 and 1 (exclusive)");
        } else if (!strcmp(name, "--eval-data")) {
            rt_options e = *o;
            parse_data(&e, name, val);
            if (e.data == RT_DATA_SYNTHETIC || e.data == RT_DATA_FMNIST)
                rt_fatal("options",
                         "--eval-data expects npy:X.npy,Y.npy, images:DIR or tokens[32]:FILE, got "
                         "'%s'",
                         val);
            o->eval_data = e.data;
            memcpy(o->eval_path, e.data_path, sizeof o->eval_path);
            o->eval_set = true;
        } else if (!strcmp(name, "--augment")) {
            if (strcmp(val, "on") && strcmp(val, "off"))
                rt_fatal("options", "--augment expects on or off, got '%s'", val);
            o->augment = !strcmp(val, "on");
        } else if (!strcmp(name, "--data-workers")) {
            o->data_workers = (int)parse_int(name, val, 1);
            if (o->data_workers > 256)
                rt_fatal("options", "--data-workers expects 1 to 256 threads, got '%s'", val);
        } else if (!strcmp(name, "--mean")) {
            o->nmean = parse_floats(name, val, o->mean, false);
        } else if (!strcmp(name, "--std")) {
            o->nstd = parse_floats(name, val, o->std, true);
        } else if (!strcmp(name, "--loss-scale-interval")) {
            o->loss_scale_interval = parse_int(name, val, 1);
        } else {
            strcpy(o->data_path, "/usr/share/datasets/fashion-mnist");
            parse_data(o, name, val);
        }
    }
    if (o->checkpoint_every > 0 && !o->checkpoint_dir[0])
        rt_fatal("options", "--checkpoint-every needs --checkpoint-dir");
    if (o->resume && !o->checkpoint_dir[0])
        rt_fatal("options", "--resume needs --checkpoint-dir");
    if (o->init_partial && !o->init_path[0])
        rt_fatal("options", "--init-partial needs --init");
    if (o->trace_path[0] && o->checkpoint_dir[0] && !strcmp(o->trace_path, o->checkpoint_dir))
        rt_fatal("options", "--trace and --checkpoint-dir name the same path '%s'", o->trace_path);
    return true;
}
