/*
 * job.c: the one table of a job's fields, and the rules every reader of a
 * job applies through it.
 *
 * A job is written as Burst source (frontend/decl.c), as IR text (read.c,
 * print.c) or changed from the command line (tools/options.c, applied by
 * passes/pipeline.c). All of them know the fields from the table below:
 * name, kind, default, range and a line of documentation; and all of them
 * set a field through ir_job_set_*(), which converts and checks a value
 * with the same rules and the same messages. ir_job_check() applies those
 * rules to a whole job again: the verifier runs it on every job, so a pass
 * or an override that breaks a job is caught like a typo in the source.
 */
#include "ir.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRED NULL

const ir_job_field ir_job_fields[IR_JOB_NFIELDS] = {
    {"model", offsetof(ir_job, graph), JK_MODEL, REQUIRED, 0, 0, false,
     "the model to train (a model's name)"},
    {"cluster", offsetof(ir_job, cluster), JK_CLUSTER, REQUIRED, 0, 0, false,
     "the cluster it trains on (a cluster's name)"},
    {"batch", offsetof(ir_job, batch), JK_INT, REQUIRED, 1, IR_MAX_BATCH, false,
     "the global batch: samples per step over all GPUs"},
    {"dtype", offsetof(ir_job, dtype), JK_DTYPE, "f32", 0, 0, false,
     "the compute type: f32, tf32, f16 or bf16"},
    {"optimizer", offsetof(ir_job, optimizer), JK_OPTIMIZER, "sgd", 0, 0, false, "sgd or adam"},
    {"lr", offsetof(ir_job, lr), JK_REAL, "0.01", 0, 0, true, "the learning rate"},
    {"momentum", offsetof(ir_job, momentum), JK_REAL, "0", 0, 0, true, "SGD's momentum"},
    {"weight_decay", offsetof(ir_job, weight_decay), JK_REAL, "0", 0, 0, true, "L2 weight decay"},
    {"amplification", offsetof(ir_job, amplification), JK_AMPLIFICATION, "none", 0, 0, false,
     "the limit on each layer's GPU-time amplification: a number >= 1, auto or none"},
    {"iterations", offsetof(ir_job, iterations), JK_INT, "100", 1, IR_MAX_ITERATIONS, false,
     "training steps the program runs unless told otherwise"},
    {"data", offsetof(ir_job, data), JK_DATA, "synthetic", 0, 0, false,
     "synthetic, fmnist or a dataset file"},
    {"background", offsetof(ir_job, background), JK_BACKGROUND, "[]", 1, IR_MAX_BATCH, false,
     "background jobs: [model @ batch, ...], each batch from 1 to 2^31"},
    {"slowdown", offsetof(ir_job, slowdown), JK_REAL, "1.1", 1, 0, false,
     "the bound on the foreground's iteration time with background work over its time alone"},
};

int ir_job_field_find(const char *key)
{
    for (int k = 0; k < IR_JOB_NFIELDS; k++)
        if (strcmp(ir_job_fields[k].key, key) == 0)
            return k;
    return -1;
}

static const char *const optimizer_names[] = {[OPT_SGD] = "sgd", [OPT_ADAM] = "adam"};

void ir_job_defaults(ir_job *j)
{
    j->graph = j->cluster = -1;
    j->batch = 0;
    j->dtype = DT_F32;
    j->optimizer = OPT_SGD;
    j->lr = 0.01;
    j->momentum = j->weight_decay = 0;
    j->amplification = 0;
    j->iterations = 100;
    j->data = "synthetic";
    j->nbackground = 0;
    j->background = NULL;
    j->slowdown = IR_SLOWDOWN_DEFAULT;
}

/* What a field holds, for "'%s' must be ..." */
static const char *kind_text(ir_job_kind kind)
{
    switch (kind) {
    case JK_MODEL: return "a model's name";
    case JK_CLUSTER: return "a cluster's name";
    case JK_INT: return "an integer";
    case JK_REAL: return "a number";
    case JK_DTYPE: return "a dtype (f32, tf32, f16 or bf16)";
    case JK_OPTIMIZER: return "sgd or adam";
    case JK_AMPLIFICATION: return "a number, auto or none";
    case JK_DATA: return "synthetic, fmnist or a dataset file";
    case JK_BACKGROUND: return "a list [model @ batch, ...]";
    }
    return "?";
}

static bool kind_error(const ir_job_field *f, char *msg, size_t n)
{
    snprintf(msg, n, "'%s' must be %s", f->key, kind_text(f->kind));
    return false;
}

bool ir_job_kind_error(int k, char *msg, size_t n)
{
    return kind_error(&ir_job_fields[k], msg, n);
}

/* ---- the rules, one per kind ---- */

static bool int_ok(const ir_job_field *f, int64_t v, char *msg, size_t n)
{
    if (v >= f->min && v <= f->max)
        return true;
    snprintf(msg, n, "'%s' is %lld; it must be between %lld and %lld", f->key, (long long)v,
             (long long)f->min, (long long)f->max);
    return false;
}

/* A real is finite and at least the field's min: 0 (lr, momentum,
 * weight_decay) or 1 (slowdown, a ratio of times). */
static bool real_ok(const ir_job_field *f, double v, char *msg, size_t n)
{
    if (v >= (double)f->min && isfinite(v))
        return true;
    if (!isfinite(v))
        snprintf(msg, n, "'%s' must be a finite number", f->key);
    else if (f->min == 0)
        snprintf(msg, n, "'%s' cannot be negative", f->key);
    else
        snprintf(msg, n, "'%s' is %g; it must be at least %lld", f->key, v, (long long)f->min);
    return false;
}

static bool amplification_error(char *msg, size_t n)
{
    snprintf(msg, n, "'amplification' must be at least 1.0, or auto, or none");
    return false;
}

/* As stored: auto (IR_AMP_AUTO), none (0) or a limit of at least 1. */
static bool amplification_ok(double v, char *msg, size_t n)
{
    return v == IR_AMP_AUTO || v == 0 || (v >= 1 && isfinite(v)) || amplification_error(msg, n);
}

bool ir_job_background_batch_ok(int64_t batch, char *msg, size_t n)
{
    const ir_job_field *f = &ir_job_fields[ir_job_field_find("background")];
    if (batch >= f->min && batch <= f->max)
        return true;
    snprintf(msg, n, "a background batch is %lld; it must be between %lld and %lld",
             (long long)batch, (long long)f->min, (long long)f->max);
    return false;
}

/* Field k of j as stored. */
static void *slot(const ir_job *j, int k)
{
    return (char *)j + ir_job_fields[k].offset;
}

/* ---- setting a field from a value as written ---- */

bool ir_job_set_int(ir_job *j, int k, int64_t v, char *msg, size_t n)
{
    const ir_job_field *f = &ir_job_fields[k];
    switch (f->kind) {
    case JK_INT:
        if (!int_ok(f, v, msg, n))
            return false;
        *(int64_t *)slot(j, k) = v;
        return true;
    case JK_REAL:
    case JK_AMPLIFICATION: return ir_job_set_real(j, k, (double)v, msg, n);
    default: return kind_error(f, msg, n);
    }
}

bool ir_job_set_real(ir_job *j, int k, double v, char *msg, size_t n)
{
    const ir_job_field *f = &ir_job_fields[k];
    switch (f->kind) {
    case JK_REAL:
        if (!real_ok(f, v, msg, n))
            return false;
        *(double *)slot(j, k) = v;
        return true;
    case JK_AMPLIFICATION: /* a number is a limit: none and auto are words */
        if (!(v >= 1 && isfinite(v)))
            return amplification_error(msg, n);
        j->amplification = v;
        return true;
    default: return kind_error(f, msg, n);
    }
}

bool ir_job_set_name(const ir_module *m, ir_job *j, int k, const char *name, char *msg, size_t n)
{
    const ir_job_field *f = &ir_job_fields[k];
    switch (f->kind) {
    case JK_MODEL:
    case JK_CLUSTER: {
        int id = f->kind == JK_MODEL ? ir_graph_find(m, name) : ir_cluster_find(m, name);
        if (id < 0) {
            snprintf(msg, n, "unknown %s '%s'", f->key, name);
            return false;
        }
        *(int *)slot(j, k) = id;
        return true;
    }
    case JK_DTYPE:
        if (!ir_dtype_lookup(name, &j->dtype)) {
            snprintf(msg, n, "unknown dtype '%s' (f32, tf32, f16, bf16)", name);
            return false;
        }
        return true;
    case JK_OPTIMIZER:
        for (int o = 0; o < (int)(sizeof optimizer_names / sizeof *optimizer_names); o++)
            if (strcmp(optimizer_names[o], name) == 0) {
                j->optimizer = (ir_optim)o;
                return true;
            }
        snprintf(msg, n, "unknown optimizer '%s' (sgd or adam)", name);
        return false;
    case JK_AMPLIFICATION:
        if (strcmp(name, "auto") == 0)
            j->amplification = IR_AMP_AUTO;
        else if (strcmp(name, "none") == 0)
            j->amplification = 0;
        else
            return amplification_error(msg, n);
        return true;
    case JK_DATA:
        if (!*name) {
            snprintf(msg, n, "'data' must be %s, not empty", kind_text(JK_DATA));
            return false;
        }
        j->data = name;
        return true;
    default: return kind_error(f, msg, n);
    }
}

bool ir_job_set_text(const ir_module *m, ir_job *j, int k, const char *text, char *msg, size_t n)
{
    char *end;
    long long i = strtoll(text, &end, 10);
    if (*text && !*end)
        return ir_job_set_int(j, k, i, msg, n);
    double r = strtod(text, &end);
    if (*text && !*end)
        return ir_job_set_real(j, k, r, msg, n);
    return ir_job_set_name(m, j, k, text, msg, n);
}

void ir_job_copy_field(ir_job *dst, const ir_job *src, int k)
{
    size_t size;
    switch (ir_job_fields[k].kind) {
    case JK_MODEL:
    case JK_CLUSTER: size = sizeof dst->graph; break;
    case JK_INT: size = sizeof dst->batch; break;
    case JK_REAL:
    case JK_AMPLIFICATION: size = sizeof dst->lr; break;
    case JK_DTYPE: size = sizeof dst->dtype; break;
    case JK_OPTIMIZER: size = sizeof dst->optimizer; break;
    case JK_DATA: size = sizeof dst->data; break;
    case JK_BACKGROUND:
        dst->nbackground = src->nbackground;
        size = sizeof dst->background;
        break;
    default: ice("job field %d", k);
    }
    memcpy(slot(dst, k), slot(src, k), size);
}

/* ---- a whole job ---- */

bool ir_job_check(const ir_module *m, const ir_job *j, diag_ctx *d)
{
    int before = d->nerrors;
    char msg[256];
    for (int k = 0; k < IR_JOB_NFIELDS; k++) {
        const ir_job_field *f = &ir_job_fields[k];
        bool ok = true;
        switch (f->kind) {
        case JK_MODEL:
        case JK_CLUSTER: {
            int id = f->kind == JK_MODEL ? j->graph : j->cluster;
            int count = f->kind == JK_MODEL ? m->ngraphs : m->nclusters;
            if (id < 0 || id >= count) {
                snprintf(msg, sizeof msg, "job '%s' needs a field '%s'", j->name, f->key);
                ok = false;
            }
            break;
        }
        case JK_INT: ok = int_ok(f, *(const int64_t *)slot(j, k), msg, sizeof msg); break;
        case JK_REAL: ok = real_ok(f, *(const double *)slot(j, k), msg, sizeof msg); break;
        case JK_DTYPE:
            ok = (int)j->dtype >= 0 && j->dtype < DT_COUNT;
            if (!ok)
                kind_error(f, msg, sizeof msg);
            break;
        case JK_OPTIMIZER:
            ok = j->optimizer == OPT_SGD || j->optimizer == OPT_ADAM;
            if (!ok)
                kind_error(f, msg, sizeof msg);
            break;
        case JK_AMPLIFICATION: ok = amplification_ok(j->amplification, msg, sizeof msg); break;
        case JK_DATA:
            ok = j->data && *j->data;
            if (!ok)
                snprintf(msg, sizeof msg, "'data' must be %s, not empty", kind_text(JK_DATA));
            break;
        case JK_BACKGROUND:
            for (int b = 0; ok && b < j->nbackground; b++) {
                const ir_background *bg = &j->background[b];
                ok = ir_job_background_batch_ok(bg->batch, msg, sizeof msg);
                if (ok && (bg->graph < 0 || bg->graph >= m->ngraphs)) {
                    kind_error(f, msg, sizeof msg);
                    ok = false;
                }
            }
            break;
        }
        if (!ok)
            diag_error(d, j->loc, "%s", msg);
    }
    return d->nerrors == before;
}

bool ir_job_check_required(const ir_job *j, const bool *given, src_loc loc, diag_ctx *d)
{
    bool ok = true;
    for (int k = 0; k < IR_JOB_NFIELDS; k++)
        if (!ir_job_fields[k].dflt && !given[k]) {
            diag_error(d, loc, "job '%s' needs a field '%s'", j->name, ir_job_fields[k].key);
            ok = false;
        }
    return ok;
}

/* ---- the IR's text ---- */

void ir_job_print(FILE *out, const ir_module *m, const ir_job *j)
{
    fprintf(out, "job %s {", j->name);
    for (int k = 0; k < IR_JOB_NFIELDS; k++) {
        const ir_job_field *f = &ir_job_fields[k];
        fprintf(out, "%s%s = ", k ? ", " : "", f->key);
        const void *v = slot(j, k);
        switch (f->kind) {
        case JK_MODEL: fputs(m->graphs[j->graph]->name, out); break;
        case JK_CLUSTER: fputs(m->clusters[j->cluster].name, out); break;
        case JK_INT: fprintf(out, "%lld", (long long)*(const int64_t *)v); break;
        case JK_REAL: ir_print_real(out, *(const double *)v); break;
        case JK_DTYPE: fputs(ir_dtype_name(j->dtype), out); break;
        case JK_OPTIMIZER: fputs(optimizer_names[j->optimizer], out); break;
        case JK_AMPLIFICATION:
            if (j->amplification == IR_AMP_AUTO)
                fputs("auto", out);
            else if (j->amplification == 0)
                fputs("none", out);
            else
                ir_print_real(out, j->amplification);
            break;
        case JK_DATA: ir_print_string(out, j->data ? j->data : "synthetic"); break;
        case JK_BACKGROUND:
            fputc('[', out);
            for (int b = 0; b < j->nbackground; b++)
                fprintf(out, "%s%s @ %lld", b ? ", " : "", m->graphs[j->background[b].graph]->name,
                        (long long)j->background[b].batch);
            fputc(']', out);
            break;
        }
    }
    fputs("}\n", out);
}
