/*
 * engine.c: the discrete-event engine of the simulator and the cluster's
 * resources (docs/sim.md, "Resources").
 *
 * Events live in a binary heap ordered by time, then by the order they were
 * made (so equal times run first come, first served); each costs O(log n).
 * Nothing recurses: a handler that makes more work schedules events.
 *
 *   - Compute stream, per GPU. Foreground kernels run in the order given,
 *     each when the previous one is done and it has been launched; their
 *     times are fixed when they are queued (a background slice never starts
 *     while foreground work is queued, so nothing can move them later). A
 *     background slice starts only when no foreground kernel is queued; a
 *     foreground kernel that arrives while a slice runs waits for that
 *     slice to end (preemption at slice boundaries).
 *   - Communication stream, per GPU: collectives one at a time, in the
 *     order the rank arrives at them; a collective starts when every rank
 *     taking part has it first in its stream.
 *   - Links: each GPU's port out and in (the intra-node bandwidth), each
 *     node's network interface out and in (the inter-node bandwidth). A
 *     transfer waits its latency, then moves its bytes; all its links
 *     progress together, at a rate set by max-min fairness over the active
 *     transfers (water-filling: raise every unfrozen transfer's rate until
 *     a link is full, freeze the transfers on it, repeat), recomputed
 *     whenever a transfer starts or ends moving data.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { EV_TIMER, EV_XFER, EV_SLICE, EV_IDLE };

typedef struct event {
    double t;
    uint64_t seq;
    int kind, a, b, ver;
} event;

typedef struct slice {
    double dur;
    int64_t tag;
    int next;
} slice;

typedef struct gpu {
    double fg_end;           /* queued foreground work is done */
    double bg_start, bg_end; /* the running slice */
    int64_t bg_tag;
    bool bg_running, idle_armed;
    int q_head, q_tail; /* background slices waiting, into e->slices */
    int c_head, c_tail; /* collectives arrived at, into e->cnode */
} gpu;

typedef struct xfer {
    const sim_load *loads;
    int nloads;
    double latency, volume; /* volume: bytes on the most loaded link */
    double left, rate, last, start, scale;
    int ver, slot; /* slot: index in e->active, -1 when not moving data */
    int64_t tag;
    int coll; /* the collective it carries, or -1 */
    int next_free;
} xfer;

typedef struct coll {
    int nparts;
    const int *parts;
    const sim_load *loads;
    int nloads;
    double latency, start;
    int64_t tag;
    int ready;
} coll;

typedef struct cnode {
    int coll, next;
} cnode;

struct sim_engine {
    sim_config c;
    sim_hooks h;
    int nlinks;
    double *cap;
    double now;
    event *heap;
    int nheap, capheap;
    uint64_t seq;
    uint64_t rng;
    bool have_spare;
    double spare;
    gpu *g;
    slice *slices;
    int nslices, capslices, free_slice;
    xfer *x;
    int nx, capx, free_x;
    int *active, nactive; /* transfers moving data */
    coll *colls;
    int ncolls, capcolls;
    cnode *cnodes;
    int ncnodes, capcnodes, free_cnode;
    /* water-filling scratch, per link */
    double *rem, *sumw;
    int64_t *stamp, *applied, round;
    sim_totals tot;
};

/* A caller broke the engine's contract: an internal error (exit 2). */
static void misuse(const char *what, long long v)
{
    fprintf(stderr, "burstc: internal error: simulator engine: %s (%lld)\n", what, v);
    exit(2);
}

/* ---- events ---- */

static bool ev_before(const event *a, const event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(sim_engine *e, double t, int kind, int a, int b, int ver)
{
    if (e->nheap == e->capheap) {
        e->capheap = e->capheap ? 2 * e->capheap : 1024;
        e->heap = plan_xrealloc(e->heap, (size_t)e->capheap, sizeof(event));
    }
    event ev = {t, e->seq++, kind, a, b, ver};
    int i = e->nheap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!ev_before(&ev, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = ev;
}

static event pop(sim_engine *e)
{
    event top = e->heap[0], last = e->heap[--e->nheap];
    int i = 0, n = e->nheap;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const event *best = &last;
        if (l < n && ev_before(&e->heap[l], best)) {
            m = l;
            best = &e->heap[l];
        }
        if (r < n && ev_before(&e->heap[r], best))
            m = r;
        if (m == i)
            break;
        e->heap[i] = e->heap[m];
        i = m;
    }
    if (n > 0)
        e->heap[i] = last;
    return top;
}

/* ---- noise ---- */

static double uniform(sim_engine *e)
{
    /* splitmix64 */
    uint64_t z = (e->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

double sim_noise(sim_engine *e)
{
    double s = e->c.jitter;
    if (!(s > 0))
        return 1;
    double z;
    if (e->have_spare) {
        z = e->spare;
        e->have_spare = false;
    } else {
        double u = uniform(e), v = uniform(e), r = sqrt(-2 * log(u));
        z = r * cos(6.283185307179586 * v);
        e->spare = r * sin(6.283185307179586 * v);
        e->have_spare = true;
    }
    return exp(s * z - s * s / 2); /* mean 1 */
}

/* ---- set-up ---- */

sim_engine *sim_engine_new(const sim_config *c, const sim_hooks *h)
{
    sim_engine *e = plan_xcalloc(1, sizeof *e);
    e->c = *c;
    if (e->c.gpus_per_node < 1)
        e->c.gpus_per_node = 1;
    if (h)
        e->h = *h;
    int G = c->gpus, N = (G + e->c.gpus_per_node - 1) / e->c.gpus_per_node;
    e->nlinks = 2 * G + 2 * N;
    e->cap = plan_xcalloc((size_t)e->nlinks, sizeof(double));
    for (int l = 0; l < e->nlinks; l++)
        e->cap[l] = l < 2 * G ? c->intra_bw : c->inter_bw;
    e->rem = plan_xcalloc((size_t)e->nlinks, sizeof(double));
    e->sumw = plan_xcalloc((size_t)e->nlinks, sizeof(double));
    e->stamp = plan_xcalloc((size_t)e->nlinks, sizeof(int64_t));
    e->applied = plan_xcalloc((size_t)e->nlinks, sizeof(int64_t));
    e->g = plan_xcalloc((size_t)G, sizeof(gpu));
    for (int i = 0; i < G; i++)
        e->g[i].q_head = e->g[i].q_tail = e->g[i].c_head = e->g[i].c_tail = -1;
    e->free_slice = e->free_x = e->free_cnode = -1;
    e->rng = c->seed * 0xD1342543DE82EF95ull + 1;
    e->tot.fg_busy = plan_xcalloc((size_t)G, sizeof(double));
    e->tot.bg_busy = plan_xcalloc((size_t)G, sizeof(double));
    e->tot.link_bytes = plan_xcalloc((size_t)e->nlinks, sizeof(double));
    e->tot.nlinks = e->nlinks;
    return e;
}

void sim_engine_free(sim_engine *e)
{
    if (!e)
        return;
    free(e->cap);
    free(e->rem);
    free(e->sumw);
    free(e->stamp);
    free(e->applied);
    free(e->heap);
    free(e->g);
    free(e->slices);
    free(e->x);
    free(e->active);
    free(e->colls);
    free(e->cnodes);
    free(e->tot.fg_busy);
    free(e->tot.bg_busy);
    free(e->tot.link_bytes);
    free(e);
}

double sim_now(const sim_engine *e)
{
    return e->now;
}

const sim_totals *sim_engine_totals(const sim_engine *e)
{
    return &e->tot;
}

void sim_timer(sim_engine *e, double t, int kind, int a, int b)
{
    /* the event's own kind field is EV_TIMER; the user's kind rides in ver */
    push(e, t > e->now ? t : e->now, EV_TIMER, a, b, kind);
}

/* ---- compute streams ---- */

static void try_background(sim_engine *e, int gi)
{
    gpu *g = &e->g[gi];
    if (g->bg_running || g->q_head < 0)
        return;
    if (g->fg_end > e->now) {
        if (!g->idle_armed) {
            g->idle_armed = true;
            push(e, g->fg_end, EV_IDLE, gi, 0, 0);
        }
        return;
    }
    int s = g->q_head;
    g->q_head = e->slices[s].next;
    if (g->q_head < 0)
        g->q_tail = -1;
    double d = e->slices[s].dur * sim_noise(e);
    g->bg_running = true;
    g->bg_start = e->now;
    g->bg_end = e->now + d;
    g->bg_tag = e->slices[s].tag;
    e->tot.bg_busy[gi] += d;
    e->slices[s].next = e->free_slice;
    e->free_slice = s;
    push(e, g->bg_end, EV_SLICE, gi, 0, 0);
}

double sim_kernel(sim_engine *e, int gi, double not_before, double dur, int64_t tag)
{
    if (gi < 0 || gi >= e->c.gpus || !(dur >= 0))
        misuse("a kernel on no GPU or of negative time", gi);
    gpu *g = &e->g[gi];
    double t = fmax(fmax(not_before, e->now), g->fg_end);
    if (g->bg_running && g->bg_end > t)
        t = g->bg_end;
    double d = dur * sim_noise(e);
    g->fg_end = t + d;
    e->tot.fg_busy[gi] += d;
    if (e->h.kernel)
        e->h.kernel(e->h.ctx, gi, false, tag, t, t + d);
    return g->fg_end;
}

void sim_slice(sim_engine *e, int gi, double dur, int64_t tag)
{
    if (gi < 0 || gi >= e->c.gpus || !(dur >= 0))
        misuse("a slice on no GPU or of negative time", gi);
    int s = e->free_slice;
    if (s >= 0) {
        e->free_slice = e->slices[s].next;
    } else {
        if (e->nslices == e->capslices) {
            e->capslices = e->capslices ? 2 * e->capslices : 256;
            e->slices = plan_xrealloc(e->slices, (size_t)e->capslices, sizeof(slice));
        }
        s = e->nslices++;
    }
    e->slices[s] = (slice){dur, tag, -1};
    gpu *g = &e->g[gi];
    if (g->q_tail >= 0)
        e->slices[g->q_tail].next = s;
    else
        g->q_head = s;
    g->q_tail = s;
    try_background(e, gi);
}

double sim_fg_end(const sim_engine *e, int gi)
{
    return e->g[gi].fg_end;
}

/* ---- links and transfers ---- */

/* Moves every active transfer's data forward to now. */
static void advance_flows(sim_engine *e)
{
    for (int i = 0; i < e->nactive; i++) {
        xfer *x = &e->x[e->active[i]];
        if (isinf(x->rate))
            x->left = 0;
        else
            x->left = fmax(0, x->left - x->rate * (e->now - x->last));
        x->last = e->now;
    }
}

static void swap_active(sim_engine *e, int i, int j)
{
    int t = e->active[i];
    e->active[i] = e->active[j];
    e->active[j] = t;
    e->x[e->active[i]].slot = i;
    e->x[e->active[j]].slot = j;
}

/* Max-min fair rates of the active transfers (water-filling) and their
 * completion events. A transfer's weight on a link is its bytes there over
 * its bytes on its most loaded link; a link of capacity <= 0 limits
 * nothing. */
static void share_links(sim_engine *e)
{
    int n = e->nactive;
    if (n == 0)
        return;
    int64_t init = ++e->round;
    for (int i = 0; i < n; i++) {
        xfer *x = &e->x[e->active[i]];
        x->rate = 0;
        for (int j = 0; j < x->nloads; j++) {
            int l = x->loads[j].link;
            if (e->stamp[l] != init) {
                e->stamp[l] = init;
                e->rem[l] = e->cap[l];
                e->sumw[l] = 0;
            }
            e->sumw[l] += x->loads[j].bytes / x->volume;
        }
    }
    int live = n; /* active[0 .. live) are not frozen */
    while (live > 0) {
        double inc = INFINITY;
        for (int i = 0; i < live; i++) {
            const xfer *x = &e->x[e->active[i]];
            for (int j = 0; j < x->nloads; j++) {
                int l = x->loads[j].link;
                if (e->cap[l] > 0 && e->sumw[l] > 0)
                    inc = fmin(inc, e->rem[l] / e->sumw[l]);
            }
        }
        if (!isfinite(inc)) {
            for (int i = 0; i < live; i++)
                e->x[e->active[i]].rate = INFINITY;
            break;
        }
        int64_t it = ++e->round;
        for (int i = 0; i < live; i++) {
            xfer *x = &e->x[e->active[i]];
            x->rate += inc;
            for (int j = 0; j < x->nloads; j++) {
                int l = x->loads[j].link;
                if (e->applied[l] != it) {
                    e->applied[l] = it;
                    e->rem[l] -= inc * e->sumw[l];
                }
            }
        }
        for (int i = 0; i < live;) {
            xfer *x = &e->x[e->active[i]];
            bool full = false;
            for (int j = 0; j < x->nloads && !full; j++) {
                int l = x->loads[j].link;
                full = e->cap[l] > 0 && e->rem[l] <= 1e-12 * e->cap[l];
            }
            if (!full) {
                i++;
                continue;
            }
            for (int j = 0; j < x->nloads; j++)
                e->sumw[x->loads[j].link] -= x->loads[j].bytes / x->volume;
            swap_active(e, i, --live);
        }
    }
    for (int i = 0; i < n; i++) {
        xfer *x = &e->x[e->active[i]];
        x->ver++;
        double t = isinf(x->rate) || x->left <= 0 ? e->now : e->now + x->left / x->rate;
        push(e, t, EV_XFER, e->active[i], 0, x->ver);
    }
}

static int new_xfer(sim_engine *e)
{
    int i = e->free_x;
    if (i >= 0) {
        e->free_x = e->x[i].next_free;
        return i;
    }
    if (e->nx == e->capx) {
        e->capx = e->capx ? 2 * e->capx : 64;
        e->x = plan_xrealloc(e->x, (size_t)e->capx, sizeof(xfer));
        e->active = plan_xrealloc(e->active, (size_t)e->capx, sizeof(int));
    }
    e->x[e->nx].ver = 0;
    return e->nx++;
}

static void start_xfer(sim_engine *e, const sim_load *loads, int nloads, double latency,
                       int64_t tag, int cl)
{
    int i = new_xfer(e);
    xfer *x = &e->x[i];
    /* A reused slot keeps counting versions: events of its last transfer
     * still queued must not match this one. */
    int ver = x->ver + 1;
    double s = sim_noise(e), vol = 0;
    for (int j = 0; j < nloads; j++) {
        if (loads[j].link < 0 || loads[j].link >= e->nlinks || !(loads[j].bytes >= 0))
            misuse("a transfer's load is on no link or negative", loads[j].link);
        vol = fmax(vol, loads[j].bytes);
    }
    *x = (xfer){.loads = loads,
                .nloads = nloads,
                .latency = latency * s,
                .volume = vol,
                .left = vol * s,
                .scale = s,
                .start = e->now,
                .slot = -1,
                .tag = tag,
                .coll = cl,
                .ver = ver,
                .next_free = -1};
    /* b = 1: the latency phase ends */
    push(e, e->now + x->latency, EV_XFER, i, 1, x->ver);
}

void sim_transfer(sim_engine *e, const sim_load *loads, int nloads, double latency, int64_t tag)
{
    start_xfer(e, loads, nloads, latency, tag, -1);
}

static void coll_finish(sim_engine *e, int ci, double end);

static void xfer_done(sim_engine *e, int i)
{
    xfer *x = &e->x[i];
    double t0 = x->start + x->latency;
    for (int j = 0; j < x->nloads; j++) {
        double b = x->loads[j].bytes * x->scale;
        e->tot.link_bytes[x->loads[j].link] += b;
        if (e->h.link_use && b > 0)
            e->h.link_use(e->h.ctx, x->loads[j].link, x->tag, b, t0, e->now);
    }
    int cl = x->coll;
    int64_t tag = x->tag;
    double start = x->start;
    x->next_free = e->free_x;
    e->free_x = i;
    if (cl >= 0)
        coll_finish(e, cl, e->now);
    else if (e->h.transfer_done)
        e->h.transfer_done(e->h.ctx, tag, start, e->now);
}

static void on_xfer(sim_engine *e, const event *ev)
{
    int i = ev->a;
    xfer *x = &e->x[i];
    if (ev->ver != x->ver)
        return;       /* rates changed since: a newer event stands */
    if (ev->b == 1) { /* latency over */
        if (!(x->volume > 0)) {
            xfer_done(e, i);
            return;
        }
        advance_flows(e);
        x->last = e->now;
        x->slot = e->nactive;
        e->active[e->nactive++] = i;
        share_links(e);
        return;
    }
    advance_flows(e);
    swap_active(e, x->slot, e->nactive - 1);
    e->nactive--;
    x->slot = -1;
    x->ver++;
    share_links(e);
    xfer_done(e, i);
}

/* ---- collectives on the communication streams ---- */

int sim_coll_new(sim_engine *e, int nparts, const int *parts, const sim_load *loads, int nloads,
                 double latency, int64_t tag)
{
    for (int i = 0; i < nparts; i++)
        if (parts[i] < 0 || parts[i] >= e->c.gpus)
            misuse("a collective's rank is out of range", parts[i]);
    if (e->ncolls == e->capcolls) {
        e->capcolls = e->capcolls ? 2 * e->capcolls : 64;
        e->colls = plan_xrealloc(e->colls, (size_t)e->capcolls, sizeof(coll));
    }
    e->colls[e->ncolls] = (coll){nparts, parts, loads, nloads, latency, 0, tag, 0};
    return e->ncolls++;
}

static void coll_ready(sim_engine *e, int ci)
{
    coll *c = &e->colls[ci];
    if (++c->ready < c->nparts)
        return;
    c->ready = 0;
    c->start = e->now;
    start_xfer(e, c->loads, c->nloads, c->latency, c->tag, ci);
}

void sim_coll_arrive(sim_engine *e, int ci, int rank)
{
    int nd = e->free_cnode;
    if (nd >= 0) {
        e->free_cnode = e->cnodes[nd].next;
    } else {
        if (e->ncnodes == e->capcnodes) {
            e->capcnodes = e->capcnodes ? 2 * e->capcnodes : 1024;
            e->cnodes = plan_xrealloc(e->cnodes, (size_t)e->capcnodes, sizeof(cnode));
        }
        nd = e->ncnodes++;
    }
    e->cnodes[nd] = (cnode){ci, -1};
    gpu *g = &e->g[rank];
    bool first = g->c_head < 0;
    if (first)
        g->c_head = nd;
    else
        e->cnodes[g->c_tail].next = nd;
    g->c_tail = nd;
    if (first)
        coll_ready(e, ci);
}

static void coll_finish(sim_engine *e, int ci, double end)
{
    coll *c = &e->colls[ci];
    double start = c->start;
    for (int i = 0; i < c->nparts; i++) {
        gpu *g = &e->g[c->parts[i]];
        int nd = g->c_head;
        g->c_head = e->cnodes[nd].next;
        if (g->c_head < 0)
            g->c_tail = -1;
        e->cnodes[nd].next = e->free_cnode;
        e->free_cnode = nd;
        if (g->c_head >= 0)
            coll_ready(e, e->cnodes[g->c_head].coll);
    }
    if (e->h.coll_done)
        e->h.coll_done(e->h.ctx, ci, start, end);
}

/* ---- the loop ---- */

void sim_run(sim_engine *e)
{
    while (e->nheap > 0) {
        event ev = pop(e);
        e->now = ev.t;
        e->tot.events++;
        switch (ev.kind) {
        case EV_TIMER:
            if (e->h.timer)
                e->h.timer(e->h.ctx, ev.ver, ev.a, ev.b);
            break;
        case EV_XFER: on_xfer(e, &ev); break;
        case EV_SLICE: {
            gpu *g = &e->g[ev.a];
            g->bg_running = false;
            if (e->h.kernel)
                e->h.kernel(e->h.ctx, ev.a, true, g->bg_tag, g->bg_start, g->bg_end);
            if (e->h.slice_done)
                e->h.slice_done(e->h.ctx, ev.a, g->bg_tag, g->bg_start, g->bg_end);
            try_background(e, ev.a);
            break;
        }
        case EV_IDLE:
            e->g[ev.a].idle_armed = false;
            try_background(e, ev.a);
            break;
        }
    }
}
