/*
 * schedule.c: a job's schedule, every rank's order of work (docs/ir.md,
 * "Schedule"), and the verifier's checks of it.
 *
 * The schedule pass (passes/schedule.c) writes it after the comm pass; the
 * program and the timeline (passes/timeline.c) follow it. The checks here make
 * any schedule, hand-written or made by a pass, one the program can run:
 *
 *  - coverage: every rank runs exactly the work its rank sets give it, each
 *    entry once (the forward and backward of every op it runs, both phases of
 *    every exchange it sends or receives samples in, its all-reduces, one
 *    loss sum);
 *  - order within a program: an entry comes after every entry of the same
 *    program whose data it needs (a forward after its inputs' forwards or the
 *    wait that delivers them, a start after the producer, a wait after its
 *    start, the backward of a value after the backwards of its users, ...),
 *    the forward before the loss sum and the backward after it;
 *  - no deadlock: the programs are played together, each wait completing once
 *    every rank taking part has started its exchange and every exchange each
 *    of those ranks started before it has completed (communication runs in the
 *    order it is started, as on one stream). A schedule in which some rank can
 *    never go on is refused, at the wait where it stops.
 *
 * All of it is linear in the schedule's size (plus the rank sets' sizes).
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[SK_COUNT] = {[SK_FWD] = "fwd",
                                                 [SK_BWD] = "bwd",
                                                 [SK_START] = "start",
                                                 [SK_WAIT] = "wait",
                                                 [SK_START_BWD] = "start.bwd",
                                                 [SK_WAIT_BWD] = "wait.bwd",
                                                 [SK_LOSS] = "loss"};

const char *ir_sched_kind_name(ir_sched_kind k)
{
    return k >= 0 && k < SK_COUNT ? kind_names[k] : "?";
}

bool ir_sched_kind_lookup(const char *name, ir_sched_kind *out)
{
    for (int k = 0; k < SK_COUNT; k++)
        if (strcmp(kind_names[k], name) == 0) {
            *out = (ir_sched_kind)k;
            return true;
        }
    return false;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int ir_reshard_ranks(int64_t B, const ir_plan *from, const ir_plan *to, int *out)
{
    int k1 = from->nranks, k2 = to->nranks, n = 0;
    if (k1 < 1 || k2 < 1 || B < 1)
        return 0;
    int64_t q1 = B / k1, m1 = B % k1, q2 = B / k2, m2 = B % k2;
    int i = 0, j = 0;
    int64_t pos = 0, e1 = q1 + (m1 > 0), e2 = q2 + (m2 > 0);
    while (pos < B && i < k1 && j < k2) {
        int64_t end = e1 < e2 ? e1 : e2;
        if (end > pos && from->ranks[i] != to->ranks[j]) {
            out[n++] = from->ranks[i];
            out[n++] = to->ranks[j];
        }
        pos = end;
        if (end == e1) {
            i++;
            e1 += q1 + (i < m1);
        }
        if (end == e2) {
            j++;
            e2 += q2 + (j < m2);
        }
    }
    /* At most 2 (k1 + k2) endpoints before duplicates go: sorted, then unique. */
    qsort(out, (size_t)n, sizeof(int), cmp_int);
    int u = 0;
    for (int x = 0; x < n; x++)
        if (u == 0 || out[u - 1] != out[x])
            out[u++] = out[x];
    return u;
}

/* A rank set as a plain list; an op without ranks runs on every rank. */
typedef struct rset {
    int n;
    const int *r;
} rset;

/* Whether every rank of a (ascending) is in b (ascending), run by run. */
static bool subset(rset a, rset b)
{
    for (int i = 0; i < a.n;) {
        int j = i;
        while (j + 1 < a.n && a.r[j + 1] == a.r[j] + 1)
            j++;
        int lo = 0, hi = b.n; /* first index with b.r[idx] >= a.r[i] */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (b.r[mid] < a.r[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo >= b.n || b.r[lo] != a.r[i] || lo + (j - i) >= b.n || b.r[lo + (j - i)] != a.r[j])
            return false;
        i = j + 1;
    }
    return true;
}

static const char *rset_text(arena *a, rset s)
{
    char *t = "[";
    int shown = 0;
    for (int i = 0; i < s.n && shown < 8; shown++) {
        int j = i;
        while (j + 1 < s.n && s.r[j + 1] == s.r[j] + 1)
            j++;
        t = j > i ? arena_printf(a, "%s%s%d..%d", t, shown ? ", " : "", s.r[i], s.r[j])
                  : arena_printf(a, "%s%s%d", t, shown ? ", " : "", s.r[i]);
        i = j + 1;
        if (shown == 7 && i < s.n)
            t = arena_printf(a, "%s, ...", t);
    }
    return arena_printf(a, "%s]", t);
}

typedef struct checker {
    const ir_module *m;
    const ir_job *j;
    const ir_graph *g;
    const ir_schedule *sc;
    arena *a;
    diag_ctx *d;
    int n, world;
    int *all;          /* 0 .. world - 1 */
    rset *own, *parts; /* per op: its ranks; a reshard's: the ranks it moves samples between */
    int *use0, *use;   /* users of each op: use[use0[i] .. use0[i + 1]) */
    int *pos;          /* (kind, op) -> index in the program being checked, or -1 */
    int64_t *listed;   /* (kind, op) -> ranks whose program lists it */
    int *stamp;        /* (kind, op) -> the last program that listed it */
} checker;

#define SLOT(c, kind, op) \
    ((size_t)(kind) * (size_t)((c)->n + 1) + (size_t)((op) < 0 ? (c)->n : (op)))

static const ir_op *OPC(const checker *c, int i)
{
    return &c->g->ops[i];
}

static bool is_compute(const ir_op *op)
{
    ir_op_class k = ir_op_class_of(op);
    return k != OC_INPUT && k != OC_COMM;
}

/* The ranks (kind, op) must be listed on; an empty set: none. */
static rset required(const checker *c, ir_sched_kind k, int op)
{
    if (k == SK_LOSS)
        return (rset){c->world, c->all};
    const ir_op *o = OPC(c, op);
    if (k == SK_FWD || k == SK_BWD)
        return is_compute(o) ? c->own[op] : (rset){0, NULL};
    if (o->opcode == OP_ALLREDUCE)
        return k == SK_START || k == SK_WAIT ? c->own[op] : (rset){0, NULL};
    if (o->opcode != OP_RESHARD)
        return (rset){0, NULL};
    if ((k == SK_START_BWD || k == SK_WAIT_BWD) && OPC(c, o->inputs[0])->opcode == OP_INPUT)
        return (rset){0, NULL}; /* data have no gradient */
    return c->parts[op];
}

static const char *entry_text(const checker *c, ir_sched_kind k, int op)
{
    if (k == SK_LOSS)
        return "loss";
    return arena_printf(c->a, "%s %%%s", ir_sched_kind_name(k), OPC(c, op)->name);
}

static const char *why_not(ir_sched_kind k, const ir_op *o)
{
    if (k == SK_FWD || k == SK_BWD)
        return is_compute(o) ? "which do not run it"
                             : "but only ops that compute have a forward and a backward";
    if (o->opcode == OP_ALLREDUCE)
        return k == SK_START || k == SK_WAIT ? "which are not its ranks"
                                             : "but an allreduce has only start and wait";
    if (o->opcode != OP_RESHARD)
        return "but only reshard and allreduce ops are started and waited for";
    return "which send and receive none of its samples";
}

/* Coverage: each entry on ranks that must run it, once per program, and each
 * (kind, op) on all of them. Fills c->listed. */
static bool check_coverage(checker *c)
{
    const ir_schedule *sc = c->sc;
    int before = c->d->nerrors;
    int *prog_of = arena_alloc(c->a, sizeof(int) * (size_t)c->world);
    for (int g = 0; g < c->world; g++)
        prog_of[g] = -1;
    for (int p = 0; p < sc->nprogs; p++) {
        const ir_sched_prog *pr = &sc->progs[p];
        rset s = {pr->ranks.nranks, pr->ranks.ranks};
        if (s.n == 0) {
            diag_error(c->d, pr->loc, "schedule '%s': a program needs the ranks that run it",
                       c->j->name);
            continue;
        }
        if (p > 0 && sc->progs[p - 1].ranks.nranks > 0 && sc->progs[p - 1].ranks.ranks[0] >= s.r[0])
            diag_error(c->d, pr->loc,
                       "schedule '%s': programs must be in order of their first rank", c->j->name);
        for (int i = 0; i < s.n; i++) {
            if (s.r[i] >= c->world) {
                diag_error(c->d, pr->loc, "schedule '%s': rank %d is outside the cluster of %d",
                           c->j->name, s.r[i], c->world);
                return false;
            }
            if (prog_of[s.r[i]] >= 0) {
                diag_error(c->d, pr->loc, "schedule '%s': rank %d has two programs", c->j->name,
                           s.r[i]);
                return false;
            }
            prog_of[s.r[i]] = p;
        }
        for (int i = 0; i < pr->n; i++) {
            const ir_sched_entry *e = &pr->e[i];
            if (e->kind != SK_LOSS && (e->op < 0 || e->op >= c->n))
                ice("schedule entry names op %d of %d", e->op, c->n);
            size_t sl = SLOT(c, e->kind, e->op);
            if (c->stamp[sl] == p) {
                diag_error(c->d, e->loc, "schedule '%s': '%s' is listed twice for ranks %s",
                           c->j->name, entry_text(c, e->kind, e->op), rset_text(c->a, s));
                continue;
            }
            c->stamp[sl] = p;
            rset need = required(c, e->kind, e->op);
            if (!subset(s, need)) {
                diag_error(c->d, e->loc, "schedule '%s': '%s' on ranks %s, %s%s%s", c->j->name,
                           entry_text(c, e->kind, e->op), rset_text(c->a, s),
                           why_not(e->kind, OPC(c, e->op)), need.n ? ": " : "",
                           need.n ? rset_text(c->a, need) : "");
                continue;
            }
            c->listed[sl] += s.n;
        }
    }
    for (int g = 0; g < c->world && c->d->nerrors == before; g++)
        if (prog_of[g] < 0) {
            diag_error(c->d, sc->loc, "schedule '%s': rank %d has no program", c->j->name, g);
            return false;
        }
    if (c->d->nerrors != before)
        return false;
    /* Every (kind, op) on all ranks that must run it; name the first missing one. */
    for (int k = 0; k < SK_COUNT; k++)
        for (int op = k == SK_LOSS ? -1 : 0; op < (k == SK_LOSS ? 0 : c->n); op++) {
            rset need = required(c, (ir_sched_kind)k, op);
            if (c->listed[SLOT(c, k, op)] == need.n)
                continue;
            for (int i = 0; i < need.n; i++) {
                const ir_sched_prog *pr = &sc->progs[prog_of[need.r[i]]];
                bool has = false;
                for (int x = 0; x < pr->n && !has; x++)
                    has = (int)pr->e[x].kind == k && pr->e[x].op == op;
                if (!has) {
                    diag_error(c->d, pr->loc, "schedule '%s': rank %d never runs '%s'", c->j->name,
                               need.r[i], entry_text(c, (ir_sched_kind)k, op));
                    break;
                }
            }
            if (c->d->nerrors - before >= 8)
                return false;
        }
    return c->d->nerrors == before;
}

/* Entry x of program pr needs entry (k, op) first, when the program lists it. */
static bool after(checker *c, const ir_sched_prog *pr, int x, ir_sched_kind k, int op,
                  const char *why)
{
    int at = c->pos[SLOT(c, k, op)];
    if (at < 0 || at < x)
        return true;
    const ir_sched_entry *e = &pr->e[x];
    diag_error(c->d, e->loc, "schedule '%s': '%s' comes before '%s'%s", c->j->name,
               entry_text(c, e->kind, e->op), entry_text(c, k, op), why);
    return false;
}

static bool is_fwd_phase(const checker *c, const ir_sched_entry *e)
{
    return e->kind == SK_FWD ||
           ((e->kind == SK_START || e->kind == SK_WAIT) && OPC(c, e->op)->opcode == OP_RESHARD);
}

/* The order within one program (see the file's comment). */
static bool check_order(checker *c, const ir_sched_prog *pr)
{
    int before = c->d->nerrors;
    for (int x = 0; x < pr->n; x++)
        c->pos[SLOT(c, pr->e[x].kind, pr->e[x].op)] = x;
    int loss = c->pos[SLOT(c, SK_LOSS, -1)];
    for (int x = 0; x < pr->n && c->d->nerrors - before < 8; x++) {
        const ir_sched_entry *e = &pr->e[x];
        if (e->kind == SK_LOSS)
            continue;
        const ir_op *o = OPC(c, e->op);
        if (is_fwd_phase(c, e) != (x < loss)) {
            diag_error(c->d, e->loc, "schedule '%s': '%s' comes %s the loss sum (%s)", c->j->name,
                       entry_text(c, e->kind, e->op), x < loss ? "before" : "after",
                       x < loss ? "the backward follows it" : "the forward precedes it");
            continue;
        }
        switch (e->kind) {
        case SK_FWD:
            for (int q = 0; q < o->ninputs; q++) {
                int u = o->inputs[q];
                const ir_op *uo = OPC(c, u);
                if (uo->opcode == OP_RESHARD) {
                    after(c, pr, x, SK_WAIT, u, ", which delivers its input");
                    after(c, pr, x, SK_FWD, uo->inputs[0], ", which computes its input");
                } else {
                    after(c, pr, x, SK_FWD, u, ", which computes its input");
                }
            }
            break;
        case SK_START:
            if (o->opcode == OP_RESHARD) {
                after(c, pr, x, SK_FWD, o->inputs[0], ", which computes what it sends");
            } else {
                after(c, pr, x, SK_BWD, o->inputs[0], ", which computes the gradients");
                int s = ir_allreduce_attrs(o)->start;
                if (s >= 0)
                    after(c, pr, x, SK_BWD, s, " (its placement's start)");
            }
            break;
        case SK_WAIT:
            after(c, pr, x, SK_START, e->op, "");
            if (o->opcode == OP_ALLREDUCE && ir_allreduce_attrs(o)->complete >= 0) {
                int w = ir_allreduce_attrs(o)->complete;
                int at = c->pos[SLOT(c, SK_BWD, w)];
                if (at >= 0 && at < x)
                    diag_error(c->d, e->loc,
                               "schedule '%s': 'wait %%%s' comes after 'bwd %%%s' (its "
                               "placement's complete)",
                               c->j->name, o->name, OPC(c, w)->name);
            }
            break;
        case SK_START_BWD:
            for (int i = c->use0[e->op]; i < c->use0[e->op + 1]; i++)
                after(c, pr, x, SK_BWD, c->use[i], ", which computes the gradient it sends");
            break;
        case SK_WAIT_BWD: after(c, pr, x, SK_START_BWD, e->op, ""); break;
        case SK_BWD:
            for (int i = c->use0[e->op]; i < c->use0[e->op + 1]; i++) {
                int w = c->use[i];
                const ir_op *wo = OPC(c, w);
                if (wo->opcode == OP_RESHARD) {
                    after(c, pr, x, SK_WAIT_BWD, w, ", which delivers its gradient");
                    for (int k = c->use0[w]; k < c->use0[w + 1]; k++)
                        after(c, pr, x, SK_BWD, c->use[k], ", which computes its gradient");
                } else if (wo->opcode != OP_ALLREDUCE) {
                    after(c, pr, x, SK_BWD, w, ", which computes its gradient");
                }
            }
            break;
        case SK_LOSS:
        case SK_COUNT: break;
        }
    }
    for (int x = 0; x < pr->n; x++)
        c->pos[SLOT(c, pr->e[x].kind, pr->e[x].op)] = -1;
    return c->d->nerrors == before;
}

/* An exchange: (op, direction) of a reshard or an allreduce, or the loss sum. */
static int inst_of(const checker *c, const ir_sched_entry *e)
{
    if (e->kind == SK_LOSS)
        return 2 * c->n;
    return 2 * e->op + (e->kind == SK_START_BWD || e->kind == SK_WAIT_BWD);
}

static bool is_start(ir_sched_kind k)
{
    return k == SK_START || k == SK_START_BWD || k == SK_LOSS;
}

typedef struct player {
    int pc;   /* next entry */
    int head; /* its first started exchange not complete: index into its starts */
    int nstarts;
    int *starts; /* entry indices of its starts, in order */
    bool loss_posted;
} player;

/* Plays the programs together (see the file's comment); reports where the
 * first stuck program stops. */
static bool check_deadlock(checker *c)
{
    const ir_schedule *sc = c->sc;
    int np = sc->nprogs, ni = 2 * c->n + 1;
    player *pl = arena_alloc(c->a, sizeof *pl * (size_t)np);
    int *need = arena_alloc(c->a, sizeof(int) * (size_t)ni);
    int *posted = arena_alloc(c->a, sizeof(int) * (size_t)ni);
    bool *done = arena_alloc(c->a, sizeof(bool) * (size_t)ni);
    int *p0 = arena_alloc(c->a, sizeof(int) * (size_t)(ni + 1));
    int64_t total = 0;
    for (int p = 0; p < np; p++) {
        const ir_sched_prog *pr = &sc->progs[p];
        for (int x = 0; x < pr->n; x++)
            if (is_start(pr->e[x].kind)) {
                need[inst_of(c, &pr->e[x])]++;
                pl[p].nstarts++;
            }
        pl[p].starts = arena_alloc(c->a, sizeof(int) * (size_t)(pl[p].nstarts + 1));
        pl[p].nstarts = 0;
        for (int x = 0; x < pr->n; x++)
            if (is_start(pr->e[x].kind))
                pl[p].starts[pl[p].nstarts++] = x;
        total += pl[p].nstarts;
    }
    /* The programs taking part in each exchange. */
    for (int i = 0; i < ni; i++)
        p0[i + 1] = p0[i] + need[i];
    int *who = arena_alloc(c->a, sizeof(int) * (size_t)(total + 1));
    int *fill = arena_alloc(c->a, sizeof(int) * (size_t)ni);
    for (int p = 0; p < np; p++)
        for (int s = 0; s < pl[p].nstarts; s++) {
            int in = inst_of(c, &sc->progs[p].e[pl[p].starts[s]]);
            who[p0[in] + fill[in]++] = p;
        }
    /* Worklists: programs to advance, exchanges to try to complete. */
    int *wp = arena_alloc(c->a, sizeof(int) * (size_t)(np + total + 1));
    int *wi = arena_alloc(c->a, sizeof(int) * (size_t)(total + 2 * np + 1));
    int64_t nwp = 0, nwi = 0;
    for (int p = 0; p < np; p++)
        wp[nwp++] = p;
    while (nwp > 0 || nwi > 0) {
        if (nwp > 0) {
            int p = wp[--nwp];
            const ir_sched_prog *pr = &sc->progs[p];
            player *P = &pl[p];
            while (P->pc < pr->n) {
                const ir_sched_entry *e = &pr->e[P->pc];
                int in = inst_of(c, e);
                if (is_start(e->kind) && !(e->kind == SK_LOSS && P->loss_posted)) {
                    if (e->kind == SK_LOSS)
                        P->loss_posted = true;
                    if (++posted[in] == need[in])
                        wi[nwi++] = in;
                    if (e->kind != SK_LOSS) {
                        P->pc++;
                        continue;
                    }
                }
                if ((e->kind == SK_WAIT || e->kind == SK_WAIT_BWD || e->kind == SK_LOSS) &&
                    !done[in])
                    break; /* woken when `in` completes */
                P->pc++;
            }
            continue;
        }
        int in = wi[--nwi];
        if (done[in] || posted[in] < need[in])
            continue;
        bool heads = true;
        for (int k = p0[in]; k < p0[in + 1] && heads; k++) {
            const player *Q = &pl[who[k]];
            heads =
                Q->head < Q->nstarts && inst_of(c, &sc->progs[who[k]].e[Q->starts[Q->head]]) == in;
        }
        if (!heads)
            continue; /* tried again when an exchange ahead of it completes */
        done[in] = true;
        for (int k = p0[in]; k < p0[in + 1]; k++) {
            player *Q = &pl[who[k]];
            Q->head++;
            wp[nwp++] = who[k];
            if (Q->head < Q->nstarts)
                wi[nwi++] = inst_of(c, &sc->progs[who[k]].e[Q->starts[Q->head]]);
        }
    }
    for (int p = 0; p < np; p++) {
        const ir_sched_prog *pr = &sc->progs[p];
        if (pl[p].pc == pr->n)
            continue;
        const ir_sched_entry *e = &pr->e[pl[p].pc];
        int in = inst_of(c, e);
        rset s = {pr->ranks.nranks, pr->ranks.ranks};
        const char *what = entry_text(c, e->kind, e->op);
        /* Who holds it: a program that has not started it, or one that started
         * another exchange first that cannot complete. */
        for (int k = p0[in]; k < p0[in + 1]; k++) {
            int q = who[k];
            const ir_sched_prog *qr = &sc->progs[q];
            rset t = {qr->ranks.nranks, qr->ranks.ranks};
            const player *Q = &pl[q];
            int sx = -1;
            for (int x = 0; x < Q->nstarts && sx < 0; x++)
                if (inst_of(c, &qr->e[Q->starts[x]]) == in)
                    sx = Q->starts[x];
            if (sx >= Q->pc && !(e->kind == SK_LOSS && Q->loss_posted)) {
                const ir_sched_entry *qe = &qr->e[Q->pc];
                diag_error(c->d, e->loc,
                           "schedule '%s' deadlocks: ranks %s stop at '%s', which ranks %s start "
                           "only after '%s' (line %d), which never completes",
                           c->j->name, rset_text(c->a, s), what, rset_text(c->a, t),
                           entry_text(c, qe->kind, qe->op), qe->loc.line);
                return false;
            }
            if (Q->head < Q->nstarts && Q->starts[Q->head] != sx) {
                const ir_sched_entry *qe = &qr->e[Q->starts[Q->head]];
                diag_error(c->d, e->loc,
                           "schedule '%s' deadlocks: ranks %s stop at '%s', but ranks %s started "
                           "'%s' (line %d) before it, which never completes (exchanges complete "
                           "in the order each rank starts them)",
                           c->j->name, rset_text(c->a, s), what, rset_text(c->a, t),
                           entry_text(c, qe->kind, qe->op), qe->loc.line);
                return false;
            }
        }
        diag_error(c->d, e->loc, "schedule '%s' deadlocks: ranks %s stop at '%s'", c->j->name,
                   rset_text(c->a, s), what);
        return false;
    }
    return true;
}

/* One user per value, even if it reads it twice. */
static bool first_use(const ir_op *o, int q)
{
    for (int r = 0; r < q; r++)
        if (o->inputs[r] == o->inputs[q])
            return false;
    return true;
}

bool ir_verify_schedule(const ir_module *m, const ir_job *j, diag_ctx *d)
{
    arena *a = arena_new();
    const ir_cluster *cl = &m->clusters[j->cluster];
    checker c = {.m = m, .j = j, .g = m->graphs[j->graph], .sc = j->schedule, .a = a, .d = d};
    c.n = c.g->nops;
    c.world = cl->nodes * cl->gpus_per_node;
    int before = d->nerrors;
    int *all = arena_alloc(a, sizeof(int) * (size_t)c.world);
    for (int g = 0; g < c.world; g++)
        all[g] = g;
    c.all = all;
    size_t n1 = (size_t)c.n + 1;
    c.own = arena_alloc(a, sizeof(rset) * n1);
    c.parts = arena_alloc(a, sizeof(rset) * n1);
    c.use0 = arena_alloc(a, sizeof(int) * (n1 + 1));
    for (int i = 0; i < c.n; i++) {
        const ir_op *o = &c.g->ops[i];
        c.own[i] = o->plan.nranks ? (rset){o->plan.nranks, o->plan.ranks} : (rset){c.world, all};
        for (int q = 0; q < o->ninputs; q++)
            if (first_use(o, q))
                c.use0[o->inputs[q] + 2]++;
        if (o->opcode == OP_RESHARD) {
            const ir_op *x = &c.g->ops[o->inputs[0]];
            ir_plan from = x->plan.nranks ? x->plan : (ir_plan){c.world, all};
            ir_plan to = o->plan.nranks ? o->plan : (ir_plan){c.world, all};
            int *out = arena_alloc(a, sizeof(int) * 2 * ((size_t)from.nranks + to.nranks));
            c.parts[i] = (rset){ir_reshard_ranks(j->batch, &from, &to, out), out};
        }
    }
    for (int i = 0; i < c.n; i++)
        c.use0[i + 2] += c.use0[i + 1];
    c.use = arena_alloc(a, sizeof(int) * ((size_t)c.use0[c.n + 1] + 1));
    for (int i = 0; i < c.n; i++) {
        const ir_op *o = &c.g->ops[i];
        for (int q = 0; q < o->ninputs; q++)
            if (first_use(o, q))
                c.use[c.use0[o->inputs[q] + 1]++] = i;
    }
    c.pos = arena_alloc(a, sizeof(int) * SK_COUNT * n1);
    c.stamp = arena_alloc(a, sizeof(int) * SK_COUNT * n1);
    c.listed = arena_alloc(a, sizeof(int64_t) * SK_COUNT * n1);
    for (size_t s = 0; s < SK_COUNT * n1; s++)
        c.pos[s] = c.stamp[s] = -1;
    if (check_coverage(&c)) {
        for (int p = 0; p < c.sc->nprogs; p++)
            check_order(&c, &c.sc->progs[p]);
        if (d->nerrors == before)
            check_deadlock(&c);
    }
    arena_free(a);
    return d->nerrors == before;
}
