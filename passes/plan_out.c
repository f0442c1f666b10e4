/*
 * plan_out.c: a plan written out for people and tools: the JSON export
 * (`burstc plan --json`) and the predicted per-GPU timeline as a Chrome trace
 * (`burstc plan --trace`, the ideal schedule of passes/timeline.c). Both
 * read a finished, placed plan_result; nothing here plans. tools/cmd_plan.c
 * writes them atomically (temp file, rename).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* A JSON string: s (NULL as empty) with quotes, backslashes and control
 * characters escaped. */
void plan_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", *s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

int plan_trace_ranks(int G, int cap, int *ranks)
{
    if (cap < 2 || G <= cap) {
        int n = G < cap || cap < 2 ? G : cap;
        for (int g = 0; g < n; g++)
            ranks[g] = g;
        return n;
    }
    /* The lowest ranks carry the layers on few GPUs; the rest are sampled
	 * evenly (the last rank included). */
    int head = cap / 2, n = 0;
    for (int g = 0; g < head; g++)
        ranks[n++] = g;
    int rest = cap - head;
    for (int i = 0; i < rest; i++) {
        int g = head + (int)((double)(G - 1 - head) * (i + 1) / rest);
        if (g > ranks[n - 1])
            ranks[n++] = g;
    }
    return n;
}

static void event(FILE *out, bool *first, const char *name, const char *cat, int pid, int tid,
                  double start, double dur, const char *args)
{
    fprintf(out, "%s\n{\"name\":", *first ? "" : ",");
    plan_json_string(out, name);
    fprintf(out, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f%s%s}",
            cat, pid, tid, start * 1e6, dur * 1e6, args ? ",\"args\":" : "", args ? args : "");
    *first = false;
}

static void track_names(FILE *out, bool *first, int pid, const char *process, int ntids,
                        const char *const *tids)
{
    fprintf(out, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
            *first ? "" : ",", pid);
    plan_json_string(out, process);
    fprintf(
        out,
        "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
        pid, pid);
    for (int t = 0; t < ntids; t++)
        fprintf(
            out,
            ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
            pid, t, tids[t]);
    *first = false;
}

/*
 * The ideal schedule of the plan's timeline (timeline.c), one process per
 * shown rank with three tracks: its compute (each op for its own shard's
 * time), its communication (reshards, all-reduces, the loss sum, while they
 * move data) and its idle windows (named by why, with their anchor).
 */
bool plan_write_trace(const plan_problem *p, const plan_result *r, const plan_mux_result *mux,
                      int max_ranks, int *shown, FILE *out, char *err, size_t errlen)
{
    plan_timeline tl;
    if (!plan_timeline_build(p, r, &tl, err, errlen))
        return false;
    int G = tl.G;
    int *ranks = malloc(sizeof(int) * (size_t)G);
    if (!ranks) {
        snprintf(err, errlen, "out of memory");
        plan_timeline_free(&tl);
        return false;
    }
    int n = plan_trace_ranks(G, max_ranks, ranks);
    if (shown)
        *shown = n;
    static const char *const tids[] = {"compute", "communication", "idle", "background"};
    /* The background slices of each rank (mux->slices is by rank, then time). */
    int64_t *bg0 = calloc((size_t)G + 1, sizeof(int64_t));
    if (!bg0) {
        snprintf(err, errlen, "out of memory");
        free(ranks);
        plan_timeline_free(&tl);
        return false;
    }
    for (int64_t k = 0; mux && k < mux->nslices; k++)
        bg0[mux->slices[k].rank + 1]++;
    for (int g = 0; g < G; g++)
        bg0[g + 1] += bg0[g];
    bool first = true;
    fprintf(out,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"ranks\":%d,\"ranks_shown\":%d,"
            "\"iteration_s\":%.9g},\"traceEvents\":[",
            G, n, tl.time);
    char name[512], args[128];
    for (int i = 0; i < n; i++) {
        int g = ranks[i];
        snprintf(name, sizeof name, "rank %d", g);
        track_names(out, &first, g, name, mux ? 4 : 3, tids);
        for (int64_t k = bg0[g]; mux && k < bg0[g + 1]; k++) {
            const plan_mux_slice *sl = &mux->slices[k];
            const plan_mux_copy *cp = &mux->copies[sl->copy];
            snprintf(name, sizeof name, "bg %d slice %d", cp->job, sl->slice);
            snprintf(args, sizeof args, "{\"units\":\"%d..%d\",\"anchor_step\":%d}",
                     cp->cut[sl->slice], cp->cut[sl->slice + 1] - 1, sl->step);
            event(out, &first, name, "background", g, 3, sl->start, sl->dur, args);
        }
        int64_t nst, nw;
        const plan_tl_step *prog = plan_tl_prog(&tl, g, &nst);
        const plan_tl_window *wins = plan_tl_windows(&tl, g, &nw);
        for (int64_t j = 0; j < nst; j++) {
            const plan_tl_step *s = &prog[j];
            const plan_tl_op *o = &tl.op[s->op];
            plan_tl_op_name(&tl, s->op, name, sizeof name);
            if (o->kind == PTL_FWD || o->kind == PTL_BWD) {
                if (s->own > 0)
                    event(out, &first, name, plan_tl_kind_name(o->kind), g, 0, s->start, s->own,
                          NULL);
            } else if (o->kind != PTL_WAIT && s->end > s->start) { /* the start shows it */
                snprintf(args, sizeof args, "{\"bytes\":%.9g,\"ranks\":%d}",
                         o->kind == PTL_RESHARD_FWD || o->kind == PTL_RESHARD_BWD
                             ? o->bytes * (double)p->batch
                             : o->bytes,
                         o->nparts);
                event(out, &first, name, plan_tl_kind_name(o->kind), g, 1, s->start,
                      s->end - s->start, args);
            }
        }
        for (int64_t w = 0; w < nw; w++) {
            const plan_tl_window *x = &wins[w];
            if (x->op >= 0)
                plan_tl_op_name(&tl, x->op, name, sizeof name);
            else
                snprintf(name, sizeof name, "iteration end");
            snprintf(args, sizeof args, "{\"anchor_step\":%d}", x->step);
            char label[600];
            snprintf(label, sizeof label, "%s: %s", plan_tl_wait_name(x->why), name);
            event(out, &first, label, "idle", g, 2, x->start, x->end - x->start, args);
        }
    }
    fprintf(out, "\n]}\n");
    free(ranks);
    free(bg0);
    plan_timeline_free(&tl);
    if (ferror(out)) {
        snprintf(err, errlen, "write error");
        return false;
    }
    return true;
}

/* A plan's multiplexing as the JSON object of plan --json's "mux". */
static void write_mux(FILE *out, const plan_mux_result *x, double slowdown)
{
    fprintf(out,
            "{\"slowdown\": %.9g, \"slice_bound_s\": %.9g, \"fg_time_s\": %.9g, "
            "\"fg_time_bg_s\": %.9g, \"fg_samples_per_s\": %.9g, \"bg_samples_per_s\": %.9g, "
            "\"cluster_samples_per_s\": %.9g, \"gpu_equivalents\": %.9g, "
            "\"time_limit_s\": %.9g, \"idle\": %.9g, \"idle_bg\": %.9g, "
            "\"copies\": %d, \"refusals\": %d, \"slices_per_iter\": %lld}",
            slowdown, x->slice_bound, x->fg_time, x->fg_time_bg, x->fg_samples_per_s,
            x->bg_samples_per_s, x->cluster_samples_per_s, x->gpu_equivalents, x->time_limit,
            x->idle, x->idle_bg, x->ncopies, x->nrefusals, (long long)x->nslices);
}

bool plan_write_frontier_json(const plan_problem *p, const plan_mux_point *pts, int n,
                              double slowdown, FILE *out)
{
    fprintf(out,
            "{\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n  \"batch\": %lld,\n  \"frontier\": [",
            p->cluster.gpus, p->cluster.gpus_per_node, (long long)p->batch);
    for (int i = 0; i < n; i++) {
        const plan_mux_point *x = &pts[i];
        fprintf(out, "%s\n    {\"from\": ", i ? "," : "");
        plan_json_string(out, x->from);
        if (x->vertex && isinf(x->price))
            fprintf(out, ", \"price\": \"inf\"");
        else if (x->vertex)
            fprintf(out, ", \"price\": %.9g", x->price);
        else
            fprintf(out, ", \"price\": null");
        fprintf(out,
                ", \"vertex\": %s, \"fit_only\": %s, \"pareto\": %s, \"time_s\": %.9g, "
                "\"gpu_seconds\": %.9g, \"samples_per_s\": %.9g, \"mux\": ",
                x->vertex ? "true" : "false", x->fit_only ? "true" : "false",
                x->pareto ? "true" : "false", x->r.time, x->r.gpu_seconds, x->r.samples_per_s);
        write_mux(out, &x->mux, slowdown);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ]\n}\n");
    return !ferror(out);
}

bool plan_write_json(const plan_problem *p, const plan_result *const *rs,
                     const plan_mux_result *const *mux, int nrs, double slowdown, FILE *out)
{
    fprintf(out, "{\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n  \"batch\": %lld,\n  \"plans\": [",
            p->cluster.gpus, p->cluster.gpus_per_node, (long long)p->batch);
    for (int i = 0; i < nrs; i++) {
        const plan_result *r = rs[i];
        fprintf(
            out,
            "%s\n    {\"strategy\": \"%s\", \"found_by\": \"%s\", \"exact\": %s, \"time_s\": %.9g, \"eval_time_s\": %.9g, "
            "\"gpu_seconds\": %.9g, \"samples_per_s\": %.9g, \"cross_node_bytes\": %.9g, "
            "\"peak_mem_bytes\": %.9g, \"layers\": [",
            i ? "," : "", plan_strategy_name(r->strategy), plan_strategy_name(r->found_by),
            r->exact ? "true" : "false", r->time, r->eval_time, r->gpu_seconds, r->samples_per_s,
            r->cross_node_bytes, r->peak_mem);
        for (int l = 0; l < r->nlayers; l++) {
            const plan_layer_result *lr = &r->layer[l];
            fprintf(out, "%s\n      {\"name\": ", l ? "," : "");
            plan_json_string(out, p->layers[l].name);
            fprintf(
                out,
                ", \"gpus\": %d, \"first_rank\": %d, \"shard\": %lld, \"fwd_s\": %.9g, \"bwd_s\": %.9g, "
                "\"data_s\": %.9g, \"update_s\": %.9g, \"reshard_s\": %.9g, \"allreduce_s\": %.9g, "
                "\"allreduce_exposed_s\": %.9g, \"amplification\": %.6g, \"mem_bytes\": %.9g}",
                lr->k, lr->first, (long long)lr->shard, lr->fwd, lr->bwd, lr->data, lr->update,
                lr->reshard, lr->allreduce, lr->ar_exposed, lr->amplification, lr->mem_bytes);
        }
        fprintf(out, "\n    ]");
        const plan_mux_result *x = mux ? mux[i] : NULL;
        if (x) {
            fprintf(out, ", \"mux\": ");
            write_mux(out, x, slowdown);
        }
        fprintf(out, "}");
    }
    fprintf(out, "\n  ]\n}\n");
    return !ferror(out);
}
