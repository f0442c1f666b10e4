/*
 * trace.c: the Chrome trace of a simulated run (`burstc sim --trace`),
 * readable by Perfetto and chrome://tracing.
 *
 * One process per shown GPU with three tracks (its compute stream's
 * foreground kernels, its background slices, its communication stream)
 * and one process per node with a shown GPU, with a track per link (each
 * shown GPU's port out and in, the node's network interface out and in;
 * an event there is a transfer's bandwidth phase on that link). With many
 * GPUs only some are shown (plan_trace_ranks: the lowest and an even
 * sample of the rest); the trace's otherData says how many.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_trace {
    FILE *out;
    const plan_timeline *tl;
    int G, gpn;
    unsigned char *gpu_shown, *link_shown;
    bool first;
    char name[512];
};

static void meta(sim_trace *t, const char *what, int pid, int tid, const char *key,
                 const char *name, int sort)
{
    fprintf(t->out, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d", t->first ? "" : ",", what, pid);
    if (tid >= 0)
        fprintf(t->out, ",\"tid\":%d", tid);
    fprintf(t->out, ",\"args\":{\"%s\":", key);
    if (name)
        plan_json_string(t->out, name);
    else
        fprintf(t->out, "%d", sort);
    fprintf(t->out, "}}");
    t->first = false;
}

static void event(sim_trace *t, const char *name, const char *cat, int pid, int tid, double start,
                  double end, double bytes)
{
    fprintf(t->out, "%s\n{\"name\":", t->first ? "" : ",");
    plan_json_string(t->out, name);
    fprintf(t->out, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
            cat, pid, tid, start * 1e6, (end - start) * 1e6);
    if (bytes > 0)
        fprintf(t->out, ",\"args\":{\"bytes\":%.9g}", bytes);
    fputc('}', t->out);
    t->first = false;
}

sim_trace *sim_trace_open(FILE *out, const plan_timeline *tl, int max_gpus, int *shown)
{
    sim_trace *t = plan_xcalloc(1, sizeof *t);
    int G = tl->G, gpn = tl->p->cluster.gpus_per_node > 0 ? tl->p->cluster.gpus_per_node : 1;
    int nodes = (G + gpn - 1) / gpn;
    int *ranks = plan_xcalloc((size_t)G, sizeof(int));
    t->out = out;
    t->tl = tl;
    t->G = G;
    t->gpn = gpn;
    t->first = true;
    t->gpu_shown = plan_xcalloc((size_t)G, 1);
    t->link_shown = plan_xcalloc(2 * (size_t)G + 2 * (size_t)nodes, 1);
    int n = plan_trace_ranks(G, max_gpus, ranks);
    *shown = n;
    fprintf(out,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"gpus\":%d,\"gpus_shown\":%d},"
            "\"traceEvents\":[",
            G, n);
    for (int i = 0; i < n; i++) {
        int g = ranks[i], nd = g / gpn;
        t->gpu_shown[g] = 1;
        t->link_shown[sim_link_gpu_out(g)] = t->link_shown[sim_link_gpu_in(g)] = 1;
        snprintf(t->name, sizeof t->name, "GPU %d", g);
        meta(t, "process_name", g, -1, "name", t->name, 0);
        meta(t, "process_sort_index", g, -1, "sort_index", NULL, g);
        meta(t, "thread_name", g, 0, "name", "compute (foreground)", 0);
        meta(t, "thread_name", g, 1, "name", "compute (background)", 0);
        meta(t, "thread_name", g, 2, "name", "communication stream", 0);
        int pid = G + nd;
        snprintf(t->name, sizeof t->name, "GPU %d port out", g);
        meta(t, "thread_name", pid, 2 * (g % gpn), "name", t->name, 0);
        snprintf(t->name, sizeof t->name, "GPU %d port in", g);
        meta(t, "thread_name", pid, 2 * (g % gpn) + 1, "name", t->name, 0);
        if (!t->link_shown[sim_link_nic_out(G, nd)]) {
            t->link_shown[sim_link_nic_out(G, nd)] = t->link_shown[sim_link_nic_in(G, nd)] = 1;
            snprintf(t->name, sizeof t->name, "node %d links", nd);
            meta(t, "process_name", pid, -1, "name", t->name, 0);
            meta(t, "process_sort_index", pid, -1, "sort_index", NULL, pid);
            meta(t, "thread_name", pid, 2 * gpn, "name", "network out", 0);
            meta(t, "thread_name", pid, 2 * gpn + 1, "name", "network in", 0);
        }
    }
    free(ranks);
    return t;
}

void sim_trace_kernel(sim_trace *t, int gpu, bool bg, int64_t tag, double start, double end)
{
    if (!t->gpu_shown[gpu])
        return;
    if (bg)
        snprintf(t->name, sizeof t->name, "background slice %lld", (long long)tag);
    else
        plan_tl_op_name(t->tl, (int)tag, t->name, sizeof t->name);
    event(t, t->name, bg ? "background" : plan_tl_kind_name(t->tl->op[tag].kind), gpu, bg ? 1 : 0,
          start, end, 0);
}

void sim_trace_coll(sim_trace *t, int op, double start, double end)
{
    const plan_tl_op *o = &t->tl->op[op];
    plan_tl_op_name(t->tl, op, t->name, sizeof t->name);
    for (int i = 0; i < o->nparts; i++) {
        int g = t->tl->part[o->part0 + i];
        if (t->gpu_shown[g])
            event(t, t->name, plan_tl_kind_name(o->kind), g, 2, start, end, 0);
    }
}

void sim_trace_link(sim_trace *t, int link, int op, double bytes, double start, double end)
{
    if (!t->link_shown[link])
        return;
    int G = t->G, pid, tid;
    if (link < 2 * G) {
        pid = G + (link / 2) / t->gpn;
        tid = 2 * ((link / 2) % t->gpn) + (link & 1);
    } else {
        pid = G + (link - 2 * G) / 2;
        tid = 2 * t->gpn + (link & 1);
    }
    plan_tl_op_name(t->tl, op, t->name, sizeof t->name);
    event(t, t->name, "link", pid, tid, start, end, bytes);
}

bool sim_trace_close(sim_trace *t)
{
    fprintf(t->out, "\n]}\n");
    bool ok = !ferror(t->out);
    free(t->gpu_shown);
    free(t->link_shown);
    free(t);
    return ok;
}
