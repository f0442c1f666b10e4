/* core.c: the process-wide part of libburstrt. It owns the memory pool (every tensor
 * the generated program allocates, freed at once by rt_pool_free), the shape checks
 * shared by all kernels, the common command-line parser (rt_init), fatal errors that
 * name rank, op and cause, and the watchdog: a thread that aborts the whole MPI job
 * when one step takes longer than --step-timeout, so a dead or hung peer makes every
 * rank exit non-zero with a message instead of waiting forever. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void openblas_set_num_threads(int num_threads);

rt_options rt_opts_g = {
    .iterations = 10, .seed = 1, .threads = 1, .step_timeout = 20.0, .world_size = 1};
static bool mpi_started;

/* ---- errors ------------------------------------------------------------------- */

_Noreturn void rt_fatal(const char *op, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "burstrt: rank %d: %s: ", rt_opts_g.rank, op ? op : "runtime");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *rt_xmalloc(size_t n, const char *op)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu bytes", n);
    return p;
}

void *rt_xcalloc(size_t n, size_t size, const char *op)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void rt_check(const rt_tensor *t, rt_dtype dt, int ndim, const char *op, const char *what)
{
    if (!t)
        rt_fatal(op, "%s is NULL", what);
    if (t->dtype != dt)
        rt_fatal(op, "%s has dtype %s, expected %s", what, t->dtype == RT_F32 ? "f32" : "i32",
                 dt == RT_F32 ? "f32" : "i32");
    if (ndim >= 0 && t->ndim != ndim)
        rt_fatal(op, "%s has %d dimensions, expected %d", what, t->ndim, ndim);
}

void rt_check_numel(const rt_tensor *t, int64_t numel, const char *op, const char *what)
{
    if (t->numel != numel)
        rt_fatal(op, "%s has %lld elements, expected %lld", what, (long long)t->numel,
                 (long long)numel);
}

/* ---- pool and tensors ------------------------------------------------------------ */

struct rt_pool {
    void **blocks;
    size_t n, cap;
    float *scratch;
    size_t scratch_n;
};

rt_pool *rt_pool_new(void)
{
    return rt_xcalloc(1, sizeof(rt_pool), "pool");
}

static void *pool_own(rt_pool *p, void *block)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        void **nb = realloc(p->blocks, p->cap * sizeof *nb);
        if (!nb)
            rt_fatal("pool", "out of memory");
        p->blocks = nb;
    }
    p->blocks[p->n++] = block;
    return block;
}

void rt_pool_free(rt_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->blocks[i]);
    free(p->blocks);
    free(p->scratch);
    free(p);
}

static rt_tensor *tensor_header(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape,
                                const char *op)
{
    if (ndim < 0 || ndim > RT_MAX_DIMS)
        rt_fatal(op, "tensor rank %d outside 0..%d", ndim, RT_MAX_DIMS);
    rt_tensor *t = pool_own(p, rt_xcalloc(1, sizeof *t, op));
    t->dtype = dt;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            rt_fatal(op, "negative dimension %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
        t->numel *= shape[i];
    }
    return t;
}

rt_tensor *rt_tensor_new(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape)
{
    rt_tensor *t = tensor_header(p, dt, ndim, shape, "tensor_new");
    size_t bytes = ((size_t)t->numel * 4 + 63) / 64 * 64;
    void *data = aligned_alloc(64, bytes ? bytes : 64);
    if (!data)
        rt_fatal("tensor_new", "out of memory allocating %zu bytes", bytes);
    memset(data, 0, bytes);
    t->data = pool_own(p, data);
    return t;
}

rt_tensor *rt_tensor_view(rt_pool *p, rt_tensor *src, int ndim, const int64_t *shape)
{
    rt_tensor *t = tensor_header(p, src->dtype, ndim, shape, "tensor_view");
    if (t->numel != src->numel)
        rt_fatal("tensor_view", "view has %lld elements, source %lld", (long long)t->numel,
                 (long long)src->numel);
    t->data = src->data;
    return t;
}

rt_tensor *rt_tensor_slice(rt_pool *p, rt_tensor *src, int64_t s0, int64_t s1)
{
    if (src->ndim < 1 || s0 < 0 || s1 < s0 || s1 > src->shape[0])
        rt_fatal("tensor_slice", "samples [%lld,%lld) outside a tensor of %lld", (long long)s0,
                 (long long)s1, (long long)(src->ndim ? src->shape[0] : 0));
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, src->shape, sizeof shape);
    shape[0] = s1 - s0;
    rt_tensor *t = tensor_header(p, src->dtype, src->ndim, shape, "tensor_slice");
    t->data = (char *)src->data + (size_t)(s0 * rt_tensor_per_sample(src)) * 4;
    return t;
}

void *rt_pool_alloc(rt_pool *p, size_t bytes)
{
    return pool_own(p, rt_xcalloc(1, bytes, "pool"));
}

float *rt_pool_scratch(rt_pool *p, size_t n)
{
    if (n > p->scratch_n) {
        free(p->scratch);
        p->scratch = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
        if (!p->scratch)
            rt_fatal("scratch", "out of memory allocating %zu floats", n);
        p->scratch_n = n;
    }
    return p->scratch;
}

void rt_tensor_zero(rt_tensor *t)
{
    memset(t->data, 0, (size_t)t->numel * 4);
}

void rt_tensor_copy(rt_tensor *dst, const rt_tensor *src)
{
    if (dst->numel != src->numel || dst->dtype != src->dtype)
        rt_fatal("copy", "size or dtype mismatch (%lld vs %lld elements)", (long long)dst->numel,
                 (long long)src->numel);
    memcpy(dst->data, src->data, (size_t)src->numel * 4);
}

int64_t rt_tensor_per_sample(const rt_tensor *t)
{
    return t->ndim == 0 || t->shape[0] == 0 ? 0 : t->numel / t->shape[0];
}

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- watchdog -------------------------------------------------------------------- */

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stop;
    double deadline; /* 0: disarmed */
    double timeout;  /* the limit armed last, for the message */
    int64_t step;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&wd.cv, &wd.mu, &ts);
        if (!wd.stop && wd.deadline > 0 && rt_now() > wd.deadline) {
            fprintf(stderr,
                    "burstrt: rank %d: watchdog: step %lld made no progress for %.1f s "
                    "(in op '%s'); a peer rank has probably died or hung; aborting the job "
                    "(if steps are legitimately this slow, raise --step-timeout)\n",
                    rt_opts_g.rank, (long long)wd.step, wd.timeout, rt_current_op());
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

static void watchdog_arm(int64_t step, double seconds)
{
    pthread_mutex_lock(&wd.mu);
    wd.step = step;
    wd.timeout = seconds;
    wd.deadline = seconds > 0 ? rt_now() + seconds : 0;
    pthread_mutex_unlock(&wd.mu);
}

/* ---- options --------------------------------------------------------------------- */

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

static void parse_options(int argc, char **argv, const char *program)
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

/* The step this rank is in, for the message of a rank that mpirun stops. */
static volatile int64_t current_step = -1;

/* Appends the decimal digits of v (async-signal-safe). */
static size_t put_int(char *buf, size_t at, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
    do
        tmp[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < sizeof tmp);
    if (v < 0)
        buf[at++] = '-';
    while (n)
        buf[at++] = tmp[--n];
    return at;
}

static size_t put_str(char *buf, size_t at, const char *s)
{
    while (*s)
        buf[at++] = *s++;
    return at;
}

/* When one rank dies, mpirun stops the others with SIGTERM: each says which rank it
 * is and the step it was in before it goes, so the job's output shows where every
 * rank stood. Only async-signal-safe calls here. */
static void on_terminate(int sig)
{
    char buf[256];
    size_t n = put_str(buf, 0, "burstrt: rank ");
    n = put_int(buf, n, rt_opts_g.rank);
    n = put_str(buf, n, ": stopped at step ");
    n = put_int(buf, n, current_step);
    n = put_str(buf, n,
                ": the job was terminated (another rank failed, or mpirun was interrupted)\n");
    ssize_t w = write(STDERR_FILENO, buf, n);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

const rt_options *rt_init(int *argc, char ***argv, const char *program)
{
    rt_blas_select(*argv);
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    mpi_started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rt_opts_g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt_opts_g.world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    parse_options(*argc, *argv, program ? program : (*argv)[0]);
    openblas_set_num_threads(rt_opts_g.threads);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_terminate;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    rt_comm_world_init();
    rt_trace_init();
    wd.stop = false;
    if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) != 0)
        rt_fatal("init", "cannot start the watchdog thread");
    wd.running = true;
    return &rt_opts_g;
}

void rt_finalize(void)
{
    if (!mpi_started) {
        /* Used without rt_init (single-process tools and tests): free what exists. */
        rt_trace_write_and_free("");
        rt_comm_free_all();
        return;
    }
    watchdog_arm(-1, rt_opts_g.step_timeout);
    rt_trace_write_and_free(rt_opts_g.trace_path);
    MPI_Barrier(MPI_COMM_WORLD);
    if (wd.running) {
        pthread_mutex_lock(&wd.mu);
        wd.stop = true;
        pthread_cond_signal(&wd.cv);
        pthread_mutex_unlock(&wd.mu);
        pthread_join(wd.thread, NULL);
        wd.running = false;
    }
    rt_comm_free_all();
    MPI_Finalize();
    mpi_started = false;
}

void rt_check_world_size(int needed)
{
    if (rt_opts_g.world_size != needed) {
        if (rt_opts_g.rank == 0)
            fprintf(stderr, "burstrt: plan needs %d ranks, launched with %d (use mpirun -np %d)\n",
                    needed, rt_opts_g.world_size, needed);
        fflush(stderr);
        MPI_Finalize();
        exit(2);
    }
}

int rt_rank(void)
{
    return rt_opts_g.rank;
}
int rt_world_size(void)
{
    return rt_opts_g.world_size;
}

static double step_t0, slowest_step;

/* The deadline of a step: --step-timeout, or three times the slowest step so far when
 * that is longer, so that a model whose steps legitimately take long is not aborted
 * once it has completed a step. */
static double step_deadline(void)
{
    double t = rt_opts_g.step_timeout;
    return t > 0 && 3.0 * slowest_step > t ? 3.0 * slowest_step : t;
}

void rt_step_begin(int64_t step)
{
    current_step = step;
    watchdog_arm(step, step_deadline());
    step_t0 = rt_now();
}

void rt_step_end(int64_t step)
{
    double t1 = rt_now();
    if (t1 - step_t0 > slowest_step)
        slowest_step = t1 - step_t0;
    rt_trace_record_step(step, step_t0, t1);
    watchdog_arm(step, step_deadline());
    rt_checkpoint_maybe_save(step);
    /* Disarmed until the next step or rt_progress: what runs between steps (evaluation,
     * reporting) may legitimately take long. */
    watchdog_arm(step, 0);
}

void rt_progress(void)
{
    watchdog_arm(wd.step, step_deadline());
}
