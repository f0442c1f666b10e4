/* trace.c: per-op timers and the Chrome trace writer. rt_trace_push/pop bracket every
 * op the generated program runs; each pop adds the time to a per-op table (printed by
 * rt_timers_report) and, with --trace FILE, records a complete event. At rt_finalize
 * every rank serialises its events to JSON text, rank 0 gathers them and writes one
 * file (pid = rank; tid 0 the foreground, tid 1.. each background copy's slices and
 * ops, rt_trace_track; tid 65.. the data loader's workers) through FILE.tmp + rename,
 * loadable in Perfetto and chrome://tracing. Times are relative to rank 0's clock at rt_init (all ranks of a
 * CPU run share the machine's monotonic clock). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STACK_MAX  32
#define TABLE_SIZE 1024

typedef struct {
    const char *name;
    double t0, t1;
    int tid;
} event;

/* The foreground, up to 64 background copies, the data workers. */
#define TRACKS (RT_TRACE_DATA_TID + RT_TRACE_DATA_TRACKS)

typedef struct {
    const char *name;
    double total;
    int64_t count;
} op_stat;

static struct {
    const char *stack_name[STACK_MAX];
    double stack_t0[STACK_MAX];
    int depth;
    op_stat table[TABLE_SIZE];
    event *events;
    size_t n, cap;
    bool recording;
    double base;
    double step_total;
    int64_t steps;
    int track; /* where events go now */
    const char *track_name[TRACKS];
} tr;

void rt_trace_check_path(void)
{
    const char *path = rt_opts_g.trace_path;
    if (!path[0] || rt_opts_g.rank != 0)
        return;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        rt_fatal("trace", "cannot write the trace to %s: not a regular file", path);
    char tmp[600];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        rt_fatal("trace", "trace path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        rt_fatal("trace", "cannot write the trace to %s: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
}

void rt_trace_init(void)
{
    tr.recording = rt_opts_g.trace_path[0] != 0;
    double base = rt_now();
    rt_wait_begin("trace");
    MPI_Bcast(&base, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    rt_wait_end();
    tr.base = base;
}

const char *rt_current_op(void)
{
    return tr.depth > 0 ? tr.stack_name[tr.depth - 1] : "between ops";
}

static void record(const char *name, double t0, double t1)
{
    if (!tr.recording)
        return;
    if (tr.n == tr.cap) {
        tr.cap = tr.cap ? 2 * tr.cap : 4096;
        event *ne = realloc(tr.events, tr.cap * sizeof *ne);
        if (!ne)
            rt_fatal("trace", "out of memory for %zu events", tr.cap);
        tr.events = ne;
    }
    tr.events[tr.n++] = (event){name, t0, t1, tr.track};
}

void rt_trace_track(int tid, const char *name)
{
    if (tid < 0 || tid >= TRACKS)
        rt_fatal("trace", "track %d out of range", tid);
    tr.track = tid;
    if (name && !tr.track_name[tid])
        tr.track_name[tid] = name;
}

void rt_trace_name_track(int tid, const char *name)
{
    if (tid < 0 || tid >= TRACKS)
        rt_fatal("trace", "track %d out of range", tid);
    if (!tr.track_name[tid])
        tr.track_name[tid] = name;
}

void rt_trace_event(int tid, const char *name, double t0, double t1)
{
    int was = tr.track;
    rt_trace_track(tid, NULL);
    record(name, t0, t1);
    tr.track = was;
}

void rt_trace_push(const char *name)
{
    rt_dev.op_begin(name);
    rt_progress_op(name);
    if (tr.depth == STACK_MAX)
        rt_fatal("trace", "rt_trace_push nested deeper than %d (missing rt_trace_pop?)", STACK_MAX);
    tr.stack_name[tr.depth] = name;
    tr.stack_t0[tr.depth] = rt_now();
    tr.depth++;
}

void rt_trace_pop(void)
{
    if (tr.depth == 0)
        rt_fatal("trace", "rt_trace_pop without rt_trace_push");
    const char *name = tr.stack_name[tr.depth - 1];
    rt_dev.op_end(name); /* under --trace a GPU waits for the op's kernels here */
    if (rt_net.progress)
        rt_net.progress(); /* started all-reduces and reshards advance between ops */
    double t1 = rt_now();
    tr.depth--;
    rt_progress_op(tr.depth > 0 ? tr.stack_name[tr.depth - 1] : "");
    double t0 = tr.stack_t0[tr.depth];
    /* Names are string literals, so the pointer identifies the op. */
    size_t h = ((uintptr_t)name >> 3) % TABLE_SIZE;
    for (size_t k = 0; k < TABLE_SIZE; k++, h = (h + 1) % TABLE_SIZE) {
        op_stat *s = &tr.table[h];
        if (s->name == NULL || s->name == name) {
            s->name = name;
            s->total += t1 - t0;
            s->count++;
            break;
        }
    }
    record(name, t0, t1);
}

void rt_trace_record_step(int64_t step, double t0, double t1)
{
    (void)step;
    tr.step_total += t1 - t0;
    tr.steps++;
    record("iteration", t0, t1);
}

void rt_report_loss(int64_t step, double loss)
{
    if (rt_opts_g.rank == 0) {
        printf("step %lld loss %.9g\n", (long long)step, loss);
        fflush(stdout);
    }
}

void rt_timers_report(void)
{
    rt_message("timers", "mean iteration %.3f ms over %lld steps",
               tr.steps ? 1e3 * tr.step_total / (double)tr.steps : 0.0, (long long)tr.steps);
    for (size_t i = 0; i < TABLE_SIZE; i++)
        if (tr.table[i].name)
            rt_message("timers", "  %-28s %10.3f ms/call  %8lld calls", tr.table[i].name,
                       1e3 * tr.table[i].total / (double)tr.table[i].count,
                       (long long)tr.table[i].count);
}

/* Serialises this rank's events as comma-terminated JSON objects. */
static char *serialise(size_t *len)
{
    size_t cap = tr.n * 160 + 256 + TRACKS * 200, n = 0;
    char *buf = rt_xmalloc(cap, "trace");
    n += (size_t)snprintf(buf + n, cap - n,
                          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"name\":\"rank %d\"}},\n",
                          rt_opts_g.rank, rt_opts_g.rank);
    for (int t = 1; t < TRACKS; t++)
        if (tr.track_name[t]) {
            char name[96];
            size_t k = 0;
            for (const char *p = tr.track_name[t]; *p && k + 2 < sizeof name; p++)
                if (*p != '"' && *p != '\\' && (unsigned char)*p >= 32)
                    name[k++] = *p;
            name[k] = 0;
            n += (size_t)snprintf(buf + n, cap - n,
                                  "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                                  "\"args\":{\"name\":\"%s\"}},\n",
                                  rt_opts_g.rank, t, name);
        }
    for (size_t i = 0; i < tr.n; i++) {
        char name[96];
        size_t k = 0;
        for (const char *p = tr.events[i].name; *p && k + 2 < sizeof name; p++)
            if (*p != '"' && *p != '\\' && (unsigned char)*p >= 32)
                name[k++] = *p;
        name[k] = 0;
        n += (size_t)snprintf(buf + n, cap - n,
                              "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                              "\"ts\":%.3f,\"dur\":%.3f},\n",
                              name, rt_opts_g.rank, tr.events[i].tid,
                              1e6 * (tr.events[i].t0 - tr.base),
                              1e6 * (tr.events[i].t1 - tr.events[i].t0));
    }
    *len = n;
    return buf;
}

void rt_trace_write_and_free(const char *path)
{
    if (tr.recording) {
        size_t len;
        char *mine = serialise(&len);
        int size = rt_opts_g.world_size, rank = rt_opts_g.rank;
        if (len > (size_t)1 << 30)
            rt_fatal("trace", "trace of this rank exceeds 1 GiB");
        int ilen = (int)len;
        int *lens = rank == 0 ? rt_xcalloc((size_t)size, sizeof(int), "trace") : NULL;
        int *offs = rank == 0 ? rt_xcalloc((size_t)size, sizeof(int), "trace") : NULL;
        MPI_Gather(&ilen, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
        char *all = NULL;
        if (rank == 0) {
            size_t total = 0;
            for (int r = 0; r < size; r++) {
                offs[r] = (int)total;
                total += (size_t)lens[r];
            }
            if (total > (size_t)2000000000)
                rt_fatal("trace", "trace exceeds 2 GB");
            all = rt_xmalloc(total + 1, "trace");
        }
        MPI_Gatherv(mine, ilen, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            size_t total = (size_t)offs[size - 1] + (size_t)lens[size - 1];
            char tmp[600];
            snprintf(tmp, sizeof tmp, "%s.tmp", path);
            FILE *f = fopen(tmp, "w");
            if (!f)
                rt_fatal("trace", "cannot write %s: %s", tmp, strerror(errno));
            fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
            /* Drop the final ",\n" so the array is valid JSON. */
            if (total >= 2)
                fwrite(all, 1, total - 2, f);
            fputs("\n]}\n", f);
            if (fclose(f) != 0 || rename(tmp, path) != 0)
                rt_fatal("trace", "cannot write %s: %s", path, strerror(errno));
        }
        free(all);
        free(lens);
        free(offs);
        free(mine);
    }
    free(tr.events);
    tr.events = NULL;
    tr.n = tr.cap = 0;
}
