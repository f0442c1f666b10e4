/*
 * plan_out.c: a plan written out for people and tools: the JSON export
 * (`burstc plan --json`) and the predicted per-GPU timeline as a Chrome trace
 * (`burstc plan --trace`). Both read a finished, placed plan_result; nothing
 * here plans. tools/cmd_plan.c writes them atomically (temp file, rename).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", *s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

static void event(FILE *out, bool *first, const char *name, const char *cat, int rank, double start,
                  double dur)
{
    fprintf(out, "%s\n{\"name\":", *first ? "" : ",");
    json_str(out, name);
    fprintf(out, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", cat,
            rank, start * 1e6, dur * 1e6);
    *first = false;
}

/*
 * The timeline is a list schedule: forward in topological order, each layer
 * starting when its inputs have been resharded to it and its ranks are free;
 * backward in reverse; each gradient all-reduce on a communication track of
 * its ranks as soon as the layer's backward is done. Edges are indexed by
 * their ends (CSR) so a long model is linear, not quadratic.
 */
bool plan_write_trace(const plan_problem *p, const plan_result *r, FILE *out)
{
    int n = r->nlayers, G = p->cluster.gpus;
    double *busy = calloc((size_t)G, sizeof(double)), *comm = calloc((size_t)G, sizeof(double));
    double *fend = calloc((size_t)n + 1, sizeof(double)),
           *bend = calloc((size_t)n + 1, sizeof(double));
    int *in0 = calloc((size_t)n + 2, sizeof(int)), *out0 = calloc((size_t)n + 2, sizeof(int));
    int *ine = calloc((size_t)p->nedges + 1, sizeof(int)),
        *oute = calloc((size_t)p->nedges + 1, sizeof(int));
    bool ok = busy && comm && fend && bend && in0 && out0 && ine && oute;
    if (ok) {
        for (int e = 0; e < p->nedges; e++) {
            in0[p->edges[e].to + 2]++;
            out0[p->edges[e].from + 2]++;
        }
        for (int l = 0; l < n; l++) {
            in0[l + 2] += in0[l + 1];
            out0[l + 2] += out0[l + 1];
        }
        for (int e = 0; e < p->nedges; e++) {
            ine[in0[p->edges[e].to + 1]++] = e;
            oute[out0[p->edges[e].from + 1]++] = e;
        }
    }
    bool first = true;
    if (ok)
        fprintf(out, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (int g = 0; ok && g < G && g < 4096; g++) {
        fprintf(
            out,
            "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"rank %d\"}}",
            first ? "" : ",", g, g);
        first = false;
    }
    for (int l = 0; ok && l < n; l++) {
        const plan_layer_result *lr = &r->layer[l];
        double ready = 0;
        for (int q = in0[l]; q < in0[l + 1]; q++)
            if (fend[p->edges[ine[q]].from] > ready)
                ready = fend[p->edges[ine[q]].from];
        double rs = lr->reshard / 2;
        for (int i = 0; i < lr->k; i++)
            if (busy[lr->first + i] > ready - rs)
                ready = busy[lr->first + i] + rs;
        if (rs > 0)
            for (int i = 0; i < lr->k; i++)
                event(out, &first, "reshard", "comm", lr->first + i, ready - rs, rs);
        for (int i = 0; i < lr->k; i++) {
            event(out, &first, p->layers[l].name, "forward", lr->first + i, ready, lr->fwd);
            busy[lr->first + i] = ready + lr->fwd;
        }
        fend[l] = ready + lr->fwd;
    }
    for (int l = n - 1; ok && l >= 0; l--) {
        const plan_layer_result *lr = &r->layer[l];
        double ready = 0;
        for (int q = out0[l]; q < out0[l + 1]; q++) {
            int to = p->edges[oute[q]].to;
            if (bend[to] + r->layer[to].reshard / 2 > ready)
                ready = bend[to] + r->layer[to].reshard / 2;
        }
        for (int i = 0; i < lr->k; i++)
            if (busy[lr->first + i] > ready)
                ready = busy[lr->first + i];
        for (int i = 0; i < lr->k; i++) {
            event(out, &first, p->layers[l].name, "backward", lr->first + i, ready, lr->bwd);
            busy[lr->first + i] = ready + lr->bwd;
        }
        bend[l] = ready + lr->bwd;
        if (lr->allreduce > 0) {
            double s = bend[l];
            for (int i = 0; i < lr->k; i++)
                if (comm[lr->first + i] > s)
                    s = comm[lr->first + i];
            for (int i = 0; i < lr->k; i++) {
                event(out, &first, "allreduce", "comm", G + lr->first + i, s, lr->allreduce);
                comm[lr->first + i] = s + lr->allreduce;
            }
        }
    }
    if (ok)
        fprintf(out, "\n]}\n");
    free(busy);
    free(comm);
    free(fend);
    free(bend);
    free(in0);
    free(out0);
    free(ine);
    free(oute);
    return ok && !ferror(out);
}

bool plan_write_json(const plan_problem *p, const plan_result *const *rs, int nrs, FILE *out)
{
    fprintf(out, "{\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n  \"batch\": %lld,\n  \"plans\": [",
            p->cluster.gpus, p->cluster.gpus_per_node, (long long)p->batch);
    for (int i = 0; i < nrs; i++) {
        const plan_result *r = rs[i];
        fprintf(
            out,
            "%s\n    {\"strategy\": \"%s\", \"exact\": %s, \"time_s\": %.9g, \"gpu_seconds\": %.9g, "
            "\"samples_per_s\": %.9g, \"cross_node_bytes\": %.9g, \"peak_mem_bytes\": %.9g, \"layers\": [",
            i ? "," : "", plan_strategy_name(r->strategy), r->exact ? "true" : "false", r->time,
            r->gpu_seconds, r->samples_per_s, r->cross_node_bytes, r->peak_mem);
        for (int l = 0; l < r->nlayers; l++) {
            const plan_layer_result *lr = &r->layer[l];
            fprintf(out, "%s\n      {\"name\": ", l ? "," : "");
            json_str(out, p->layers[l].name);
            fprintf(
                out,
                ", \"gpus\": %d, \"first_rank\": %d, \"shard\": %lld, \"fwd_s\": %.9g, \"bwd_s\": %.9g, "
                "\"reshard_s\": %.9g, \"allreduce_s\": %.9g, \"allreduce_exposed_s\": %.9g, "
                "\"amplification\": %.6g, \"mem_bytes\": %.9g}",
                lr->k, lr->first, (long long)lr->shard, lr->fwd, lr->bwd, lr->reshard,
                lr->allreduce, lr->ar_exposed, lr->amplification, lr->mem_bytes);
        }
        fprintf(out, "\n    ]}");
    }
    fprintf(out, "\n  ]\n}\n");
    return !ferror(out);
}
