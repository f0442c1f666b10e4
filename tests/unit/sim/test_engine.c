/*
 * test_engine.c: the simulator's event engine (sim/engine.c, sim/net.c) on
 * cases whose answer is known by hand:
 *   - one transfer alone on a link takes bytes / bandwidth + latency; two
 *     sharing it take twice as long; max-min fairness gives a transfer the
 *     capacity another leaves when that one is held back elsewhere;
 *   - a background slice waits for the foreground kernel queued before it;
 *     one that starts just before a foreground kernel delays it by what is
 *     left of the slice, never more;
 *   - a ring all-reduce over k GPUs takes 2(k-1)/k x bytes / bandwidth +
 *     2(k-1) x latency (one node; across nodes at the slower of the two
 *     bandwidths), a tree 2 x bytes / bandwidth + 2 ceil(log2 k) latencies,
 *     as commcost.c prices them;
 *   - a reshard alone on its links takes commcost.c's time;
 *   - collectives wait for their last rank and run one at a time on a
 *     rank's communication stream;
 *   - noise: mean 1, the same for the same seed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/check.h"
#include "plan.h"
#include "sim.h"

#define MAXREC 64

typedef struct rec {
    int n;
    int64_t tag[MAXREC];
    double start[MAXREC], end[MAXREC];
    int ncoll;
    int coll[MAXREC];
    double cstart[MAXREC], cend[MAXREC];
    int nkern;
    bool kbg[MAXREC];
    double kstart[MAXREC], kend[MAXREC];
    /* timer actions */
    sim_engine *e;
} rec;

static void on_xfer(void *ctx, int64_t tag, double start, double end)
{
    rec *r = ctx;
    if (r->n < MAXREC) {
        r->tag[r->n] = tag;
        r->start[r->n] = start;
        r->end[r->n++] = end;
    }
}

static void on_coll(void *ctx, int c, double start, double end)
{
    rec *r = ctx;
    if (r->ncoll < MAXREC) {
        r->coll[r->ncoll] = c;
        r->cstart[r->ncoll] = start;
        r->cend[r->ncoll++] = end;
    }
}

static void on_kernel(void *ctx, int gpu, bool bg, int64_t tag, double start, double end)
{
    rec *r = ctx;
    (void)gpu;
    (void)tag;
    if (r->nkern < MAXREC) {
        r->kbg[r->nkern] = bg;
        r->kstart[r->nkern] = start;
        r->kend[r->nkern++] = end;
    }
}

/* Timer kinds of the tests: 0 enqueue a foreground kernel of b ms on GPU a;
 * 1: rank a arrives at collective b. */
static void on_timer(void *ctx, int kind, int a, int b)
{
    rec *r = ctx;
    if (kind == 0)
        sim_kernel(r->e, a, 0, b * 1e-3, 7);
    else
        sim_coll_arrive(r->e, b, a);
}

static sim_engine *engine(rec *r, int G, int gpn, double intra, double inter)
{
    memset(r, 0, sizeof *r);
    sim_config c = {.gpus = G, .gpus_per_node = gpn, .intra_bw = intra, .inter_bw = inter};
    sim_hooks h = {.ctx = r,
                   .transfer_done = on_xfer,
                   .coll_done = on_coll,
                   .kernel = on_kernel,
                   .timer = on_timer};
    r->e = sim_engine_new(&c, &h);
    return r->e;
}

static void test_sharing(void)
{
    rec r;
    /* alone: 1 MB over a 1 GB/s port, after 5 us */
    sim_engine *e = engine(&r, 4, 4, 1e9, 1e8);
    sim_load a[2] = {{sim_link_gpu_out(0), 1e6}, {sim_link_gpu_in(1), 1e6}};
    sim_transfer(e, a, 2, 5e-6, 1);
    sim_run(e);
    CHECK(r.n == 1);
    CHECK_NEAR(r.end[0], 1e-3 + 5e-6, 1e-12);
    sim_engine_free(e);

    /* two sharing GPU 0's port out: each at half the bandwidth */
    e = engine(&r, 4, 4, 1e9, 1e8);
    sim_load b[2] = {{sim_link_gpu_out(0), 1e6}, {sim_link_gpu_in(2), 1e6}};
    sim_transfer(e, a, 2, 0, 1);
    sim_transfer(e, b, 2, 0, 2);
    sim_run(e);
    CHECK(r.n == 2);
    CHECK_NEAR(r.end[0], 2e-3, 1e-12);
    CHECK_NEAR(r.end[1], 2e-3, 1e-12);
    sim_engine_free(e);

    /* in opposite directions they do not share (ports are per direction) */
    e = engine(&r, 4, 4, 1e9, 1e8);
    sim_load c[2] = {{sim_link_gpu_out(1), 1e6}, {sim_link_gpu_in(0), 1e6}};
    sim_transfer(e, a, 2, 0, 1);
    sim_transfer(e, c, 2, 0, 2);
    sim_run(e);
    CHECK_NEAR(r.end[0], 1e-3, 1e-12);
    CHECK_NEAR(r.end[1], 1e-3, 1e-12);
    sim_engine_free(e);

    /* the second starts when the first is half done: 0.5 ms alone, then
	 * both at half rate; the first ends at 1.5 ms, the second has 0.5 MB
	 * left and ends alone at 2 ms */
    e = engine(&r, 4, 4, 1e9, 1e8);
    sim_transfer(e, a, 2, 0, 1);
    sim_transfer(e, b, 2, 0.5e-3, 2);
    sim_run(e);
    CHECK(r.n == 2 && r.tag[0] == 1);
    CHECK_NEAR(r.end[0], 1.5e-3, 1e-12);
    CHECK_NEAR(r.end[1], 2e-3, 1e-12);
    sim_engine_free(e);

    /* max-min: Y goes to another node (network 0.25 GB/s) and shares GPU 0's
	 * port with X: Y is held at 0.25 GB/s by the network, X gets the other
	 * 0.75 GB/s of the port, then the whole port */
    e = engine(&r, 4, 2, 1e9, 0.25e9);
    sim_load x[2] = {{sim_link_gpu_out(0), 1e6}, {sim_link_gpu_in(1), 1e6}};
    sim_load y[4] = {{sim_link_gpu_out(0), 1e6},
                     {sim_link_gpu_in(2), 1e6},
                     {sim_link_nic_out(4, 0), 1e6},
                     {sim_link_nic_in(4, 1), 1e6}};
    sim_transfer(e, x, 2, 0, 1);
    sim_transfer(e, y, 4, 0, 2);
    sim_run(e);
    CHECK(r.n == 2 && r.tag[0] == 1);
    CHECK_NEAR(r.end[0], 1e6 / 0.75e9, 1e-12);
    CHECK_NEAR(r.end[1], 1e6 / 0.25e9, 1e-12);
    const sim_totals *t = sim_engine_totals(e);
    CHECK(t->link_bytes[sim_link_gpu_out(0)] == 2e6 && t->link_bytes[sim_link_nic_in(4, 1)] == 1e6);
    sim_engine_free(e);

    /* a transfer with uneven loads runs at its most loaded link's rate:
	 * 1 MB on port 0 out, 0.5 MB on port 1 out (a reshard's senders) */
    e = engine(&r, 4, 4, 1e9, 1e8);
    sim_load u[2] = {{sim_link_gpu_out(0), 1e6}, {sim_link_gpu_out(1), 0.5e6}};
    sim_load v[1] = {{sim_link_gpu_out(1), 1e6}};
    sim_transfer(e, u, 2, 0, 1);
    sim_transfer(e, v, 1, 0, 2);
    sim_run(e);
    /* port 1: u takes 0.5 r_u, v takes r_v; water-filling raises both to
	 * 2/3 GB/s (port 1 full: 1/3 + 2/3); u ends at 1 MB / (2/3 GB/s) =
	 * 1.5 ms, v has moved 1 MB by then too */
    CHECK_NEAR(r.end[0], 1.5e-3, 1e-12);
    CHECK_NEAR(r.end[1], 1.5e-3, 1e-12);
    sim_engine_free(e);
}

static void test_priorities(void)
{
    rec r;
    sim_engine *e = engine(&r, 1, 1, 1e9, 1e9);
    /* foreground 1 ms queued first: the slice runs after it */
    CHECK_NEAR(sim_kernel(e, 0, 0, 1e-3, 1), 1e-3, 1e-15);
    sim_slice(e, 0, 0.5e-3, 2);
    sim_run(e);
    CHECK(r.nkern == 2 && !r.kbg[0] && r.kbg[1]);
    CHECK_NEAR(r.kstart[1], 1e-3, 1e-15);
    CHECK_NEAR(r.kend[1], 1.5e-3, 1e-15);
    CHECK_NEAR(sim_engine_totals(e)->bg_busy[0], 0.5e-3, 1e-15);
    sim_engine_free(e);

    /* a slice of 0.3 ms starts on an idle GPU at 0; a 1 ms foreground
	 * kernel arrives at 0.1 ms: it waits 0.2 ms (what is left of the
	 * slice), the next slice waits for it */
    e = engine(&r, 1, 1, 1e9, 1e9);
    sim_slice(e, 0, 0.3e-3, 1);
    sim_slice(e, 0, 0.3e-3, 2);
    sim_timer(e, 0.1e-3, 0, 0, 1);
    sim_run(e);
    /* reported as they are known: the foreground kernel when queued (at
	 * 0.1 ms), a slice when it ends */
    CHECK(r.nkern == 3);
    CHECK(!r.kbg[0] && r.kbg[1] && r.kbg[2]);
    CHECK_NEAR(r.kstart[1], 0, 1e-15);
    CHECK_NEAR(r.kend[1], 0.3e-3, 1e-15);
    CHECK_NEAR(r.kstart[0], 0.3e-3, 1e-15);
    CHECK(r.kstart[0] - 0.1e-3 <= 0.3e-3);
    CHECK_NEAR(r.kend[0], 1.3e-3, 1e-15);
    CHECK_NEAR(r.kstart[2], 1.3e-3, 1e-15);
    sim_engine_free(e);

    /* foreground kernels keep their order and their launches: launched
	 * at 2 ms, the second starts then, not when the first ends */
    e = engine(&r, 1, 1, 1e9, 1e9);
    CHECK_NEAR(sim_kernel(e, 0, 0, 1e-3, 1), 1e-3, 1e-15);
    CHECK_NEAR(sim_kernel(e, 0, 2e-3, 1e-3, 2), 3e-3, 1e-15);
    CHECK_NEAR(sim_kernel(e, 0, 0, 1e-3, 3), 4e-3, 1e-15);
    sim_engine_free(e);
}

/* An all-reduce among k ranks from first as a collective, alone. */
static double allreduce_alone(const plan_cluster *c, int first, int k, double bytes)
{
    rec r;
    sim_engine *e = engine(&r, c->gpus, c->gpus_per_node, c->intra_bw, c->inter_bw);
    sim_load *l;
    double lat;
    int n = sim_allreduce_loads(c, first, k, bytes, &l, &lat);
    int *parts = malloc(sizeof(int) * (size_t)k);
    for (int i = 0; i < k; i++)
        parts[i] = first + i;
    int cl = sim_coll_new(e, k, parts, l, n, lat, 0);
    for (int i = 0; i < k; i++)
        sim_coll_arrive(e, cl, first + i);
    sim_run(e);
    double t = r.ncoll == 1 ? r.cend[0] - r.cstart[0] : -1;
    free(parts);
    free(l);
    sim_engine_free(e);
    return t;
}

static void test_allreduce(void)
{
    plan_cluster c = {.gpus = 64,
                      .gpus_per_node = 8,
                      .intra_alpha = 2e-6,
                      .intra_bw = 300e9,
                      .inter_alpha = 10e-6,
                      .inter_bw = 25e9};
    /* ring over k GPUs of one node: 100 MB makes the ring cheaper */
    for (int k = 2; k <= 8; k++) {
        double bytes = 1e8, want = 2.0 * (k - 1) / k * bytes / c.intra_bw + 2.0 * (k - 1) * 2e-6;
        CHECK(!plan_allreduce_choice(&c, 0, k, bytes).tree);
        CHECK_NEAR(allreduce_alone(&c, 0, k, bytes), want, 1e-12);
    }
    /* across nodes: the network's latency and the slower bandwidth */
    for (int k = 9; k <= 64; k += 11) {
        double bytes = 1e8, want = 2.0 * (k - 1) / k * bytes / c.inter_bw + 2.0 * (k - 1) * 10e-6;
        if (plan_allreduce_choice(&c, 0, k, bytes).tree) /* k >= 31 here */
            want = 2 * ceil(log2(k)) * 10e-6 + 2 * bytes / c.inter_bw;
        CHECK(plan_allreduce_choice(&c, 0, k, bytes).tree == (k >= 31));
        CHECK_NEAR(allreduce_alone(&c, 0, k, bytes), want, 1e-12);
        CHECK_NEAR(allreduce_alone(&c, 3, k < 61 ? k : 61, bytes),
                   plan_allreduce_time(&c, 3, k < 61 ? k : 61, bytes), 1e-12);
    }
    /* small messages: the tree, 2 ceil(log2 k) latencies */
    double want = 2 * 6 * 10e-6 + 2 * 1e3 / c.inter_bw;
    CHECK(plan_allreduce_choice(&c, 0, 64, 1e3).tree);
    CHECK_NEAR(allreduce_alone(&c, 0, 64, 1e3), want, 1e-12);
    /* two all-reduces over ranks 4..11 (nodes 0 and 1) at once, one as a
	 * collective and one as a plain transfer of the same loads: they share
	 * every link, each takes its bandwidth term twice */
    rec r;
    plan_cluster c16 = c;
    c16.gpus = 16;
    sim_engine *e = engine(&r, 16, 8, c.intra_bw, c.inter_bw);
    sim_load *l1;
    double lat1;
    int n1 = sim_allreduce_loads(&c16, 4, 8, 1e8, &l1, &lat1);
    int p1[8] = {4, 5, 6, 7, 8, 9, 10, 11};
    int cl = sim_coll_new(e, 8, p1, l1, n1, lat1, 0);
    sim_transfer(e, l1, n1, lat1, 9); /* the same loads again, as a plain transfer */
    for (int i = 0; i < 8; i++)
        sim_coll_arrive(e, cl, p1[i]);
    sim_run(e);
    double bw_term = 2.0 * 7 / 8 * 1e8 / c.inter_bw;
    CHECK(r.n == 1 && r.ncoll == 1);
    CHECK_NEAR(r.end[0], lat1 + 2 * bw_term, 1e-12);
    CHECK_NEAR(r.cend[0], lat1 + 2 * bw_term, 1e-12);
    free(l1);
    sim_engine_free(e);
}

/* A reshard alone on its links takes commcost.c's time. */
static void test_reshard(void)
{
    unsigned long long s = 12345;
    for (int it = 0; it < 500; it++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int gpn = 1 + (int)(s >> 60) % 8, G = gpn * (1 + (int)(s >> 40) % 4);
        int64_t B = 1 + (int64_t)((s >> 20) % 200);
        int kmax = (int64_t)G < B ? G : (int)B;
        int k1 = 1 + (int)((s >> 8) % (unsigned)kmax), k2 = 1 + (int)((s >> 30) % (unsigned)kmax);
        int r1 = (int)((s >> 12) % (unsigned)(G - k1 + 1)),
            r2 = (int)((s >> 50) % (unsigned)(G - k2 + 1));
        if (k1 == k2 && r1 == r2)
            continue;
        plan_cluster c = {.gpus = G,
                          .gpus_per_node = gpn,
                          .intra_alpha = 3e-6,
                          .intra_bw = 1e11,
                          .inter_alpha = 2e-5,
                          .inter_bw = 1e10};
        double bps = 1e5;
        plan_reshard rc = plan_reshard_count(B, gpn, r1, k1, r2, k2);
        double want = plan_reshard_time(&c, &rc, bps);
        int np = plan_reshard_pairs(B, r1, k1, r2, k2, NULL);
        plan_tl_pair *pr = calloc((size_t)np + 1, sizeof *pr);
        plan_reshard_pairs(B, r1, k1, r2, k2, pr);
        sim_load *l;
        int n = sim_reshard_loads(&c, pr, np, bps, &l);
        rec r;
        sim_engine *e = engine(&r, G, gpn, c.intra_bw, c.inter_bw);
        sim_transfer(e, l, n, sim_latency_for(&c, l, n, want), 0);
        sim_run(e);
        CHECK(r.n == 1);
        CHECK_NEAR(r.end[0], want, 1e-12);
        sim_engine_free(e);
        free(l);
        free(pr);
    }
}

static void test_collectives(void)
{
    rec r;
    sim_engine *e = engine(&r, 4, 4, 1e9, 1e9);
    int ab[2] = {0, 1}, bc[2] = {1, 2};
    /* A on ranks 0, 1 (1 ms), B on ranks 1, 2 (1 ms): rank 2 arrives at B
	 * at 0, rank 1 at A and then B at 0, rank 0 at A only at 0.5 ms. A
	 * starts at 0.5 ms; B waits for it on rank 1's stream. */
    int A = sim_coll_new(e, 2, ab, NULL, 0, 1e-3, 0);
    int Bc = sim_coll_new(e, 2, bc, NULL, 0, 1e-3, 1);
    sim_coll_arrive(e, Bc, 2);
    sim_coll_arrive(e, A, 1);
    sim_coll_arrive(e, Bc, 1);
    sim_timer(e, 0.5e-3, 1, 0, A);
    sim_run(e);
    CHECK(r.ncoll == 2 && r.coll[0] == A && r.coll[1] == Bc);
    CHECK_NEAR(r.cstart[0], 0.5e-3, 1e-15);
    CHECK_NEAR(r.cend[0], 1.5e-3, 1e-15);
    CHECK_NEAR(r.cstart[1], 1.5e-3, 1e-15);
    CHECK_NEAR(r.cend[1], 2.5e-3, 1e-15);
    /* played again: A now needs both arrivals again */
    sim_coll_arrive(e, A, 0);
    sim_timer(e, 3e-3, 1, 1, A);
    sim_run(e);
    CHECK(r.ncoll == 3);
    CHECK_NEAR(r.cstart[2], 3e-3, 1e-15);
    CHECK(sim_engine_totals(e)->events > 0);
    sim_engine_free(e);
}

static void test_noise(void)
{
    double m[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        sim_config c = {.gpus = 1, .gpus_per_node = 1, .jitter = 0.2, .seed = 7};
        sim_engine *e = sim_engine_new(&c, NULL);
        double sum = 0, sq = 0;
        int n = 200000;
        for (int i = 0; i < n; i++) {
            double f = sim_noise(e);
            CHECK(f > 0);
            sum += f;
            sq += log(f) * log(f);
        }
        m[k] = sum / n;
        CHECK_NEAR(m[k], 1.0, 0.005);
        CHECK_NEAR(sqrt(sq / n), 0.2, 0.01);
        sim_engine_free(e);
    }
    CHECK(m[0] == m[1]); /* the same seed, the same draws */
    sim_config c = {.gpus = 1, .gpus_per_node = 1};
    sim_engine *e = sim_engine_new(&c, NULL);
    CHECK(sim_noise(e) == 1.0);
    sim_engine_free(e);
}

int main(void)
{
    test_sharing();
    test_priorities();
    test_allreduce();
    test_reshard();
    test_collectives();
    test_noise();
    return check_done("sim/test_engine");
}
