/* options.c: the command line every generated program shares (rt_init parses it):
 * iterations, data source, seed, trace, checkpoints, BLAS threads, the watchdog's step
 * timeout. Both "--opt V" and "--opt=V"; an unknown option or a bad value is a fatal error
 * naming it, and --help prints the usage on rank 0 and exits 0. */
#include "internal.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_set_defaults(int64_t iterations, rt_data_kind data)
{
    if (iterations > 0)
        rt_opts_g.iterations = iterations;
    rt_opts_g.data = data;
}

static void usage(FILE *f, const char *program)
{
    fprintf(f,
            "usage: %s [options]   (run one process per rank under mpirun)\n"
            "  --iterations N        training iterations (default %lld)\n"
            "  --data synthetic|fmnist[:DIR]\n"
            "                        input data (default %s; fmnist reads DIR, default\n"
            "                        /usr/share/datasets/fashion-mnist)\n"
            "  --seed S              seed of init, data order and dropout (default 1)\n"
            "  --trace FILE          write a Chrome trace (all ranks, pid = rank)\n"
            "  --checkpoint-dir DIR  where checkpoints go\n"
            "  --checkpoint-every N  checkpoint every N iterations (needs --checkpoint-dir)\n"
            "  --resume              continue from the checkpoint in --checkpoint-dir\n"
            "  --threads N           BLAS threads per rank (default 1)\n"
            "  --step-timeout SEC    abort the job when a step takes longer (default 20)\n"
            "  --help                this text\n",
            program, (long long)rt_opts_g.iterations,
            rt_opts_g.data == RT_DATA_FMNIST ? "fmnist" : "synthetic");
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

static void copy_str(char *dst, size_t cap, const char *opt, const char *v)
{
    if (strlen(v) >= cap)
        rt_fatal("options", "%s: value too long", opt);
    strcpy(dst, v);
}

void rt_parse_options(int argc, char **argv, const char *program)
{
    rt_options *o = &rt_opts_g;
    strcpy(o->data_dir, "/usr/share/datasets/fashion-mnist");
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *arg = argv[i], *val = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) != 0)
            rt_fatal("options", "unexpected argument '%s' (see --help)", arg);
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof name)
            rt_fatal("options", "unknown option '%s' (see --help)", arg);
        memcpy(name, arg, len);
        name[len] = 0;
        bool flag = !strcmp(name, "--help") || !strcmp(name, "--resume");
        if (!flag) {
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
            MPI_Finalize();
            exit(0);
        } else if (!strcmp(name, "--resume")) {
            o->resume = true;
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
            if (*end || end == val || !(o->step_timeout >= 0))
                rt_fatal("options", "--step-timeout expects seconds >= 0, got '%s'", val);
        } else if (!strcmp(name, "--data")) {
            if (!strcmp(val, "synthetic")) {
                o->data = RT_DATA_SYNTHETIC;
            } else if (!strncmp(val, "fmnist", 6) && (val[6] == 0 || val[6] == ':')) {
                o->data = RT_DATA_FMNIST;
                if (val[6] == ':')
                    copy_str(o->data_dir, sizeof o->data_dir, name, val + 7);
            } else {
                rt_fatal("options", "--data expects synthetic or fmnist[:DIR], got '%s'", val);
            }
        } else {
            rt_fatal("options", "unknown option '%s' (see --help)", name);
        }
    }
    if (o->checkpoint_every > 0 && !o->checkpoint_dir[0])
        rt_fatal("options", "--checkpoint-every needs --checkpoint-dir");
    if (o->resume && !o->checkpoint_dir[0])
        rt_fatal("options", "--resume needs --checkpoint-dir");
}
