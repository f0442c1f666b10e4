/*
 * decl.c: gpus, clusters and jobs, and the driver of the whole front end.
 *
 * fe_lower() walks a loaded program (load.c) in a fixed order, so that any
 * item may use any other wherever it is written: top-level lets and blocks,
 * then gpus, clusters, models (model.c) and jobs. A gpu, cluster or job is a
 * list of `key = value` fields; each is checked for its kind and unit (a
 * memory is a size, a bandwidth is bytes/s, ...), duplicates and unknown keys
 * are errors, and a missing required field is reported at the item's name.
 * Optional fields and their defaults are listed in docs/language.md.
 */
#include "frontend.h"

#include <math.h>
#include <string.h>

/* Field keys of one kind of item; "a|b" lists a key and its aliases. */
typedef struct fe_keys {
    const char *what; /* "gpu", "cluster", "job" */
    const char *const *keys;
    int nkeys;
} fe_keys;

static bool fe_key_is(const char *spec, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = spec;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, key, n) == 0)
            return true;
        if (!bar)
            return false;
        p = bar + 1;
    }
}

static const char *fe_key_name(arena *a, const char *spec)
{
    const char *bar = strchr(spec, '|');
    return bar ? arena_strndup(a, spec, (size_t)(bar - spec)) : spec;
}

/* Sorts an item's fields into out[] by key (flops fields excepted, when
 * flops_ok); reports unknown keys and duplicates. */
static void fe_collect(fe_ctx *c, const fe_item *it, const fe_keys *k, const fe_field **out,
                       bool flops_ok)
{
    for (int i = 0; i < k->nkeys; i++)
        out[i] = NULL;
    for (const fe_field *f = it->fields; f; f = f->next) {
        /* A gpu's qualified fields: flops per dtype, a class's curve
		 * (fe_lower_gpu reads them). */
        if (flops_ok &&
            (strcmp(f->key, "flops") == 0 ||
             (f->sub && (strcmp(f->key, "efficiency") == 0 || strcmp(f->key, "half_work") == 0 ||
                         strcmp(f->key, "bandwidth") == 0))))
            continue;
        int i = 0;
        while (i < k->nkeys && !fe_key_is(k->keys[i], f->key))
            i++;
        if (i == k->nkeys) {
            const char **names = arena_alloc(c->arena, sizeof *names * (size_t)(k->nkeys + 1));
            char *list = "";
            for (int j = 0; j < k->nkeys; j++) {
                names[j] = fe_key_name(c->arena, k->keys[j]);
                list = arena_printf(c->arena, "%s%s%s", list, j ? ", " : "", names[j]);
            }
            if (flops_ok)
                list = arena_printf(c->arena, "flops <dtype>, %s", list);
            const char *near = fe_closest(f->key, names, k->nkeys);
            if (near)
                fe_error(c, f->loc, "unknown field '%s' in %s '%s'; did you mean '%s'?", f->key,
                         k->what, it->name, near);
            else
                fe_error(c, f->loc, "unknown field '%s' in %s '%s' (fields: %s)", f->key, k->what,
                         it->name, list);
            continue;
        }
        if (f->sub) {
            fe_error(c, f->loc, "field '%s' takes no qualifier ('%s')", f->key, f->sub);
            continue;
        }
        if (out[i]) {
            fe_error(c, f->loc, "duplicate field '%s' in %s '%s'", f->key, k->what, it->name);
            fe_note(c, out[i]->loc, "first given here");
            continue;
        }
        out[i] = f;
    }
}

static bool fe_require(fe_ctx *c, const fe_item *it, const fe_keys *k, const fe_field **fields,
                       int i)
{
    if (fields[i])
        return true;
    fe_error(c, it->name_loc, "%s '%s' needs a field '%s'", k->what, it->name,
             fe_key_name(c->arena, k->keys[i]));
    return false;
}

/* A quantity of the given dimension, in SI units. */
static bool fe_qty(fe_ctx *c, const fe_expr *e, const char *key, fe_dim dim, double *out)
{
    fe_val v = fe_eval(c, c->global, e, false, false);
    if (v.kind == V_ERR)
        return false;
    if (v.kind != V_QTY || v.dim != dim) {
        if (v.kind == V_INT || v.kind == V_REAL)
            fe_error(c, e->loc, "'%s' needs a unit: it is %s", key, fe_dim_name(dim));
        else
            fe_error(c, e->loc, "'%s' must be %s, not %s", key, fe_dim_name(dim), fe_val_desc(&v));
        return false;
    }
    if (!(v.r >= 0) || isinf(v.r)) {
        fe_error(c, e->loc, "'%s' must be a finite, non-negative amount", key);
        return false;
    }
    *out = v.r;
    return true;
}

static bool fe_int_field(fe_ctx *c, const fe_field *f, int64_t min, int64_t max, int64_t *out)
{
    int64_t v;
    if (!fe_eval_int(c, c->global, f->value, arena_printf(c->arena, "'%s'", f->key), &v))
        return false;
    if (v < min || v > max) {
        fe_error(c, f->value->loc, "'%s' is %lld; it must be between %lld and %lld", f->key,
                 (long long)v, (long long)min, (long long)max);
        return false;
    }
    *out = v;
    return true;
}

static bool fe_real_field(fe_ctx *c, const fe_expr *e, const char *key, double *out)
{
    fe_val v = fe_eval(c, c->global, e, false, false);
    if (v.kind == V_INT || v.kind == V_REAL) {
        *out = v.kind == V_INT ? (double)v.i : v.r;
        return true;
    }
    if (v.kind != V_ERR)
        fe_error(c, e->loc, "'%s' must be a number, not %s", key, fe_val_desc(&v));
    return false;
}

/* A name: model = vgg16, gpu = a100, dtype = bf16. */
static const char *fe_name_field(fe_ctx *c, const fe_expr *e, const char *key)
{
    if (e->kind == EX_NAME)
        return e->s;
    if (e->kind == EX_STR)
        return e->s;
    if (e->kind != EX_ERROR)
        fe_error(c, e->loc, "'%s' must be a name", key);
    return NULL;
}

/* bandwidth [@ latency] */
static bool fe_link(fe_ctx *c, const fe_field *f, ir_link *out)
{
    const fe_expr *bw = f->value, *lat = NULL;
    if (bw->kind == EX_BINARY && bw->op == '@') {
        lat = bw->rhs;
        bw = bw->lhs;
    }
    bool ok = fe_qty(c, bw, f->key, DIM_RATE, &out->bandwidth);
    if (lat)
        ok &= fe_qty(c, lat, arena_printf(c->arena, "the latency of '%s'", f->key), DIM_TIME,
                     &out->latency);
    if (ok && out->bandwidth <= 0) {
        fe_error(c, bw->loc, "'%s' needs a positive bandwidth", f->key);
        ok = false;
    }
    return ok;
}

static bool fe_check_redef(fe_ctx *c, const fe_item *it, int old, src_loc old_loc, const char *what)
{
    if (old < 0)
        return true;
    fe_error(c, it->name_loc, "redefinition of %s '%s'", what, it->name);
    fe_note(c, old_loc, "'%s' was defined here", it->name);
    return false;
}

static const char *const fe_gpu_keys[] = {"memory", "bandwidth", "launch", "efficiency",
                                          "half_work"};
static const fe_keys fe_gpu = {"gpu", fe_gpu_keys, 5};

/* A class's own curve: `efficiency conv = 0.4`, `half_work conv = 1e6`,
 * `bandwidth pool = 3 GB/s` (classes conv, gemm, pool, other); a class
 * without them takes the device-wide ones. */
static void fe_gpu_classes(fe_ctx *c, const fe_item *it, ir_gpu *g)
{
    const fe_field *seen[3][KC_COUNT] = {{0}};
    static const char *const keys[3] = {"efficiency", "half_work", "bandwidth"};
    for (const fe_field *fl = it->fields; fl; fl = fl->next) {
        int q = 0;
        while (q < 3 && strcmp(fl->key, keys[q]) != 0)
            q++;
        if (q == 3 || !fl->sub)
            continue;
        ir_kclass k;
        if (!ir_kclass_lookup(fl->sub, &k)) {
            fe_error(c, fl->loc, "unknown class '%s' (conv, gemm, pool, other)", fl->sub);
            continue;
        }
        if (seen[q][k]) {
            fe_error(c, fl->loc, "duplicate field '%s %s' in gpu '%s'", fl->key, fl->sub, it->name);
            fe_note(c, seen[q][k]->loc, "first given here");
            continue;
        }
        seen[q][k] = fl;
        ir_curve *cv = &g->cls[k];
        if (q == 0 && fe_real_field(c, fl->value, "efficiency", &cv->efficiency) &&
            !(cv->efficiency > 0 && cv->efficiency <= 1))
            fe_error(c, fl->value->loc, "'efficiency %s' is a fraction of the peak, in (0, 1]",
                     fl->sub);
        if (q == 1 && fe_real_field(c, fl->value, "half_work", &cv->half_work) && cv->half_work < 0)
            fe_error(c, fl->value->loc, "'half_work %s' (FLOPs) must not be negative", fl->sub);
        if (q == 2 && fe_qty(c, fl->value, "bandwidth", DIM_RATE, &cv->bandwidth) &&
            cv->bandwidth <= 0)
            fe_error(c, fl->value->loc, "'bandwidth %s' must be positive", fl->sub);
    }
    for (int k = 0; k < KC_COUNT; k++)
        if (!seen[0][k] != !seen[1][k])
            fe_error(c, it->name_loc,
                     "gpu '%s' needs both 'efficiency %s' and 'half_work %s', or neither", it->name,
                     ir_kclass_name((ir_kclass)k), ir_kclass_name((ir_kclass)k));
}

void fe_lower_gpu(fe_ctx *c, const fe_item *it)
{
    int old = ir_gpu_find(c->module, it->name);
    if (!fe_check_redef(c, it, old, old >= 0 ? c->module->gpus[old].loc : it->loc, "gpu"))
        return;
    const fe_field *f[5];
    fe_collect(c, it, &fe_gpu, f, true);
    ir_gpu g = {.name = it->name, .loc = it->name_loc};
    bool ok = true, any = false;
    const fe_field *seen[DT_COUNT] = {0};
    for (const fe_field *fl = it->fields; fl; fl = fl->next) {
        if (strcmp(fl->key, "flops") != 0)
            continue;
        ir_dtype dt;
        if (!fl->sub) {
            fe_error(c, fl->loc, "'flops' needs a dtype: flops f32 = ..., flops bf16 = ...");
            ok = false;
            continue;
        }
        if (!ir_dtype_lookup(fl->sub, &dt)) {
            fe_error(c, fl->loc, "unknown dtype '%s' (f32, tf32, f16, bf16)", fl->sub);
            ok = false;
            continue;
        }
        if (seen[dt]) {
            fe_error(c, fl->loc, "duplicate field 'flops %s' in gpu '%s'", fl->sub, it->name);
            fe_note(c, seen[dt]->loc, "first given here");
            ok = false;
            continue;
        }
        seen[dt] = fl;
        if (fe_qty(c, fl->value, "flops", DIM_FLOPS, &g.flops[dt]) && g.flops[dt] <= 0) {
            fe_error(c, fl->value->loc,
                     "'flops %s' must be positive (leave out a dtype the gpu does not run)",
                     fl->sub);
            ok = false;
        }
        any = true;
    }
    if (!any && ok) {
        fe_error(c, it->name_loc, "gpu '%s' needs at least one 'flops <dtype>' field", it->name);
        ok = false;
    }
    /* Zero memory or bandwidth would make every layer fit or cost nothing:
     * a gpu has some of both. */
    if (fe_require(c, it, &fe_gpu, f, 0) &&
        fe_qty(c, f[0]->value, "memory", DIM_BYTES, &g.mem_bytes) && g.mem_bytes <= 0)
        fe_error(c, f[0]->value->loc, "'memory' must be positive");
    if (fe_require(c, it, &fe_gpu, f, 1) &&
        fe_qty(c, f[1]->value, "bandwidth", DIM_RATE, &g.mem_bandwidth) && g.mem_bandwidth <= 0)
        fe_error(c, f[1]->value->loc, "'bandwidth' must be positive");
    if (f[2])
        ok &= fe_qty(c, f[2]->value, "launch", DIM_TIME, &g.launch);
    /* A measured utilisation curve: both or neither. */
    if (f[3] && fe_real_field(c, f[3]->value, "efficiency", &g.efficiency) &&
        !(g.efficiency > 0 && g.efficiency <= 1)) {
        fe_error(c, f[3]->value->loc, "'efficiency' is a fraction of the peak, in (0, 1]");
        ok = false;
    }
    if (f[4] && fe_real_field(c, f[4]->value, "half_work", &g.half_work) && g.half_work < 0) {
        fe_error(c, f[4]->value->loc, "'half_work' (FLOPs) must not be negative");
        ok = false;
    }
    if (!f[3] != !f[4]) {
        fe_error(c, it->name_loc, "gpu '%s' needs both 'efficiency' and 'half_work', or neither",
                 it->name);
        ok = false;
    }
    fe_gpu_classes(c, it, &g);
    (void)ok;
    ir_gpu_add(c->module, &g);
}

static const char *const fe_cluster_keys[] = {
    "gpu", "nodes", "gpus_per_node", "intra|nvlink|pcie|shm", "network|inter", "cores", "slice"};
static const fe_keys fe_cluster = {"cluster", fe_cluster_keys, 7};

void fe_lower_cluster(fe_ctx *c, const fe_item *it)
{
    int old = ir_cluster_find(c->module, it->name);
    if (!fe_check_redef(c, it, old, old >= 0 ? c->module->clusters[old].loc : it->loc, "cluster"))
        return;
    const fe_field *f[7];
    fe_collect(c, it, &fe_cluster, f, false);
    ir_cluster cl = {.name = it->name, .loc = it->name_loc, .gpu = -1, .nodes = 1};
    if (fe_require(c, it, &fe_cluster, f, 0)) {
        const char *g = fe_name_field(c, f[0]->value, "gpu");
        if (g) {
            cl.gpu = ir_gpu_find(c->module, g);
            if (cl.gpu < 0)
                fe_error(c, f[0]->value->loc, "unknown gpu '%s'", g);
        }
    }
    int64_t v;
    if (f[1] && fe_int_field(c, f[1], 1, IR_MAX_GPUS, &v))
        cl.nodes = (int)v;
    if (fe_require(c, it, &fe_cluster, f, 2) && fe_int_field(c, f[2], 1, IR_MAX_GPUS, &v))
        cl.gpus_per_node = (int)v;
    if (f[3])
        fe_link(c, f[3], &cl.intra);
    else if (cl.gpus_per_node > 1)
        fe_error(c, it->name_loc,
                 "cluster '%s' has %d gpus per node and needs 'intra' (or nvlink, pcie, "
                 "shm) = bandwidth @ latency",
                 it->name, cl.gpus_per_node);
    if (f[4])
        fe_link(c, f[4], &cl.inter);
    else if (cl.nodes > 1)
        fe_error(c, it->name_loc,
                 "cluster '%s' has %d nodes and needs 'network' = bandwidth @ latency", it->name,
                 cl.nodes);
    /* Ranks beyond a node's cores share them (passes/costmodel.c,
	 * plan_core_share); more cores than ranks is what leaving it out says. */
    if (f[5] && fe_int_field(c, f[5], 1, IR_MAX_GPUS, &v))
        cl.cores = (int)v;
    /* What a message step waits for its peer's turn on those cores
	 * (passes/plan.h, plan_step_wait); left out: PLAN_SLICE_DEFAULT. */
    if (f[6] && fe_qty(c, f[6]->value, "slice", DIM_TIME, &cl.slice))
        cl.has_slice = true;
    if ((int64_t)cl.nodes * cl.gpus_per_node > IR_MAX_GPUS)
        fe_error(c, it->name_loc, "cluster '%s' has more than %d gpus", it->name, IR_MAX_GPUS);
    ir_cluster_add(c->module, &cl);
}

/* A job's fields are the job table's (ir/job.c), less the optimizer's
 * settings, which Burst writes as sgd(lr = ...). The table converts and
 * checks every value, with the messages the IR reader gives too. */
static void fe_job_error(fe_ctx *c, src_loc loc, bool ok, const char *msg)
{
    if (!ok)
        fe_error(c, loc, "%s", msg);
}

/* A number for field k: an integer, a real, or what a let names. */
static void fe_job_number(fe_ctx *c, ir_job *j, int k, const fe_expr *e)
{
    char msg[256];
    fe_val v = fe_eval(c, c->global, e, false, false);
    bool ok;
    if (v.kind == V_ERR)
        return;
    if (v.kind == V_INT)
        ok = ir_job_set_int(j, k, v.i, msg, sizeof msg);
    else if (v.kind == V_REAL)
        ok = ir_job_set_real(j, k, v.r, msg, sizeof msg);
    else
        ok = ir_job_kind_error(k, msg, sizeof msg);
    fe_job_error(c, e->loc, ok, msg);
}

/* sgd | adam | sgd(lr = 0.1, momentum = 0.9, weight_decay = 1e-4) */
static void fe_optimizer(fe_ctx *c, const fe_expr *e, ir_job *j, int k)
{
    char msg[256];
    const char *name = e->kind == EX_NAME || e->kind == EX_CALL ? e->s : NULL;
    if (!name) {
        fe_error(c, e->loc,
                 "'optimizer' must be sgd or adam, optionally with (lr = ..., momentum = ..., "
                 "weight_decay = ...)");
        return;
    }
    if (!ir_job_set_name(c->module, j, k, name, msg, sizeof msg)) {
        fe_error(c, e->loc, "%s", msg);
        return;
    }
    if (e->kind != EX_CALL)
        return;
    for (const fe_arg *a = e->args; a; a = a->next) {
        int s = a->key ? ir_job_field_find(a->key) : -1;
        if (s >= 0 && ir_job_fields[s].setting) {
            fe_job_number(c, j, s, a->value);
            continue;
        }
        const char *list = "";
        for (int q = 0; q < IR_JOB_NFIELDS; q++)
            if (ir_job_fields[q].setting)
                list =
                    arena_printf(c->arena, "%s%s%s", list, *list ? ", " : "", ir_job_fields[q].key);
        if (!a->key)
            fe_error(c, a->loc, "optimizer settings are named: %s", list);
        else
            fe_error(c, a->loc, "unknown optimizer setting '%s' (%s)", a->key, list);
    }
}

/* [model @ batch, ...] */
static void fe_background(fe_ctx *c, const fe_expr *e, ir_job *j, int k)
{
    char msg[256];
    if (e->kind != EX_LIST) {
        ir_job_kind_error(k, msg, sizeof msg);
        fe_error(c, e->loc, "%s", msg);
        return;
    }
    int n = 0;
    for (const fe_expr *i = e->items; i; i = i->next)
        n++;
    j->background = arena_alloc(c->arena, sizeof *j->background * (size_t)(n ? n : 1));
    for (const fe_expr *i = e->items; i; i = i->next) {
        if (i->kind != EX_BINARY || i->op != '@' || i->lhs->kind != EX_NAME) {
            fe_error(c, i->loc, "a background job is written 'model @ batch'");
            continue;
        }
        int g = ir_graph_find(c->module, i->lhs->s);
        if (g < 0) {
            fe_error(c, i->lhs->loc, "unknown model '%s'", i->lhs->s);
            continue;
        }
        int64_t b;
        if (!fe_eval_int(c, c->global, i->rhs, "a background batch", &b))
            continue;
        if (!ir_job_background_batch_ok(b, msg, sizeof msg)) {
            fe_error(c, i->rhs->loc, "%s", msg);
            continue;
        }
        j->background[j->nbackground++] = (ir_background){g, b};
    }
}

static void fe_job_field(fe_ctx *c, ir_job *j, int k, const fe_expr *e)
{
    char msg[256];
    bool name = e->kind == EX_NAME || e->kind == EX_STR;
    switch (ir_job_fields[k].kind) {
    case JK_OPTIMIZER: fe_optimizer(c, e, j, k); return;
    case JK_BACKGROUND: fe_background(c, e, j, k); return;
    case JK_INT:
    case JK_REAL: fe_job_number(c, j, k, e); return;
    case JK_AMPLIFICATION:
        /* auto and none are words; anything else is a number (or a let). */
        if (e->kind == EX_NAME && (strcmp(e->s, "auto") == 0 || strcmp(e->s, "none") == 0))
            fe_job_error(c, e->loc, ir_job_set_name(c->module, j, k, e->s, msg, sizeof msg), msg);
        else
            fe_job_number(c, j, k, e);
        return;
    case JK_DATA:
        /* A bare name is one of the runtime's own sources; a file is quoted. */
        if (e->kind == EX_STR ||
            (e->kind == EX_NAME && (strcmp(e->s, "synthetic") == 0 || strcmp(e->s, "fmnist") == 0)))
            fe_job_error(c, e->loc, ir_job_set_name(c->module, j, k, e->s, msg, sizeof msg), msg);
        else
            fe_error(c, e->loc, "'data' must be synthetic, fmnist or a file path in quotes");
        return;
    case JK_MODEL:
    case JK_CLUSTER:
    case JK_DTYPE:
        if (e->kind == EX_ERROR)
            return;
        fe_job_error(c, e->loc,
                     name ? ir_job_set_name(c->module, j, k, e->s, msg, sizeof msg)
                          : ir_job_kind_error(k, msg, sizeof msg),
                     msg);
        return;
    }
}

void fe_lower_job(fe_ctx *c, const fe_item *it)
{
    int old = ir_job_find(c->module, it->name);
    if (old >= 0) {
        fe_check_redef(c, it, old, c->module->jobs[old].loc, "job");
        return;
    }
    static const char *keys[IR_JOB_NFIELDS];
    static int field_of[IR_JOB_NFIELDS], nkeys;
    if (!nkeys)
        for (int k = 0; k < IR_JOB_NFIELDS; k++)
            if (!ir_job_fields[k].setting) {
                keys[nkeys] = ir_job_fields[k].key;
                field_of[nkeys++] = k;
            }
    const fe_keys fe_job = {"job", keys, nkeys};
    const fe_field *f[IR_JOB_NFIELDS];
    fe_collect(c, it, &fe_job, f, false);
    ir_job j = {.name = it->name, .loc = it->name_loc};
    ir_job_defaults(&j);
    /* In the order they are written, so that errors come in that order. */
    bool given[IR_JOB_NFIELDS] = {false};
    int order[IR_JOB_NFIELDS], n = 0;
    for (int i = 0; i < nkeys; i++) {
        if (!f[i])
            continue;
        int at = n++;
        for (; at > 0 && (f[order[at - 1]]->loc.line > f[i]->loc.line ||
                          (f[order[at - 1]]->loc.line == f[i]->loc.line &&
                           f[order[at - 1]]->loc.col > f[i]->loc.col));
             at--)
            order[at] = order[at - 1];
        order[at] = i;
    }
    for (int q = 0; q < n; q++) {
        given[field_of[order[q]]] = true;
        fe_job_field(c, &j, field_of[order[q]], f[order[q]]->value);
    }
    ir_job_check_required(&j, given, it->name_loc, c->diag);
    ir_job_add(c->module, &j);
}

ir_module *fe_lower(arena *a, const fe_program *p, diag_ctx *d)
{
    fe_ctx c = {.arena = a, .diag = d};
    c.module = ir_module_new(a);
    c.global = arena_alloc(a, sizeof *c.global);
    c.global->prefix = c.global->suffix = "";
    for (int i = 0; i < p->nfiles; i++)
        for (const fe_item *it = p->files[i]->items; it; it = it->next) {
            if (it->kind == IT_BLOCK) {
                fe_define_block(&c, c.global, it->block);
            } else if (it->kind == IT_LET) {
                fe_binding *old = fe_lookup_local(c.global, it->name);
                if (old) {
                    fe_error(&c, it->name_loc, "redefinition of '%s'", it->name);
                    fe_note(&c, old->loc, "'%s' was defined here", it->name);
                    continue;
                }
                fe_val v = fe_eval(&c, c.global, it->value, false, false);
                fe_binding *b = fe_bind(&c, c.global, it->name, it->name_loc);
                b->kind = B_VALUE;
                b->val = v;
            }
        }
    static const fe_item_kind order[] = {IT_GPU, IT_CLUSTER, IT_MODEL, IT_JOB};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (int i = 0; i < p->nfiles; i++)
            for (const fe_item *it = p->files[i]->items; it; it = it->next) {
                if (it->kind != order[k])
                    continue;
                switch (it->kind) {
                case IT_GPU: fe_lower_gpu(&c, it); break;
                case IT_CLUSTER: fe_lower_cluster(&c, it); break;
                case IT_MODEL: {
                    int old = ir_graph_find(c.module, it->name);
                    if (fe_check_redef(&c, it, old, old >= 0 ? c.module->graphs[old]->loc : it->loc,
                                       "model"))
                        fe_lower_model(&c, it);
                    break;
                }
                case IT_JOB: fe_lower_job(&c, it); break;
                default: break;
                }
            }
    return c.module;
}
