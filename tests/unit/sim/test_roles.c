/*
 * test_roles.c: a timeline whose ranks share one program per role
 * (passes/timeline.c, make_roles) gives exactly what a timeline with one
 * program per rank gives.
 *
 * On random problems (chains, branches, DAGs; 1 to 4 nodes) with random
 * placements drawn so that many ranks play the same role (counts that
 * divide the batch or not, first ranks at 0, at the end or anywhere), the
 * shared timeline (plan_timeline_build) and the per-rank one
 * (plan_timeline_build_roles, share false) must agree bit for bit on the
 * iteration time, every op's start and end, every rank's steps and idle
 * windows; the interleave pass must place the same background slices on
 * both (and the same predicted time with them), and the simulator, with
 * contention and those slices, must end at the same moment.
 *
 * Usage: sim_test_roles
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/check.h"
#include "../planner/random_problem.h"
#include "plan.h"
#include "sim.h"

/* CHECK with a message. */
#define CHECKM(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

/* Counts that tend to give ranks equal roles: the batch's divisors, all
 * ranks, or any; first ranks at 0, at the end, or anywhere. */
static void role_plan(const plan_problem *p, int *k, int *first)
{
    int G = p->cluster.gpus, kmax = (int64_t)G < p->batch ? G : (int)p->batch;
    for (int l = 0; l < p->nlayers; l++) {
        double u = urand();
        if (u < 0.4)
            k[l] = kmax;
        else if (u < 0.7) {
            k[l] = irand(1, kmax);
            while (p->batch % k[l])
                k[l]--;
        } else
            k[l] = irand(1, kmax);
        double v = urand();
        first[l] = v < 0.5 ? 0 : v < 0.7 ? G - k[l] : irand(0, G - k[l]);
    }
}

static bool same_step(const plan_tl_step *a, const plan_tl_step *b)
{
    return a->op == b->op && a->own == b->own && a->arrive == b->arrive && a->start == b->start &&
           a->end == b->end;
}

static bool same_window(const plan_tl_window *a, const plan_tl_window *b)
{
    return a->step == b->step && a->op == b->op && a->why == b->why && a->start == b->start &&
           a->end == b->end;
}

/* The timelines of one plan, shared and per rank, side by side. */
static void compare_timelines(const plan_timeline *s, const plan_timeline *q)
{
    CHECKM(s->time == q->time, "time %.17g shared, %.17g per rank", s->time, q->time);
    CHECK(s->nops == q->nops && q->ncls == q->G && s->ncls <= s->G);
    for (int x = 0; x < s->nops && x < q->nops; x++)
        CHECKM(s->op[x].start == q->op[x].start && s->op[x].end == q->op[x].end,
               "op %d: %.17g..%.17g shared, %.17g..%.17g per rank", x, s->op[x].start, s->op[x].end,
               q->op[x].start, q->op[x].end);
    for (int g = 0; g < s->G; g++) {
        int64_t ns, nq, ws, wq;
        const plan_tl_step *a = plan_tl_prog(s, g, &ns), *b = plan_tl_prog(q, g, &nq);
        CHECKM(ns == nq, "rank %d: %lld steps shared, %lld per rank", g, (long long)ns,
               (long long)nq);
        for (int64_t j = 0; j < ns && j < nq; j++)
            CHECKM(same_step(&a[j], &b[j]), "rank %d step %lld differs", g, (long long)j);
        const plan_tl_window *u = plan_tl_windows(s, g, &ws), *v = plan_tl_windows(q, g, &wq);
        CHECKM(ws == wq, "rank %d: %lld windows shared, %lld per rank", g, (long long)ws,
               (long long)wq);
        for (int64_t w = 0; w < ws && w < wq; w++) {
            CHECKM(same_window(&u[w], &v[w]), "rank %d window %lld differs", g, (long long)w);
            CHECK(u[w].rank == s->rep[s->cls[g]] && v[w].rank == g);
        }
    }
}

/* A background job of 2 ops: its units' seconds around the plan's. */
static plan_bg_job random_job(double T, double *unit)
{
    for (int u = 0; u < 5; u++)
        unit[u] = T * (0.01 + 0.2 * urand());
    return (plan_bg_job){
        .name = "bg", .nunits = 5, .unit = unit, .mem_bytes = 0, .batch = irand(1, 8)};
}

static bool same_slice(const plan_mux_slice *a, const plan_mux_slice *b)
{
    return a->copy == b->copy && a->slice == b->slice && a->rank == b->rank && a->step == b->step &&
           a->why == b->why && a->start == b->start && a->dur == b->dur && a->last == b->last;
}

/* The interleave pass on both, then the simulator with contention and the
 * slices it placed. */
static void compare_mux_sim(plan_timeline *s, plan_timeline *q, const plan_result *r)
{
    double unit[5];
    plan_bg_job job = random_job(s->time, unit);
    plan_mux_options o = {.slowdown = 1 + 0.3 * urand(), .cpu = urand() < 0.3};
    plan_mux_result a, b;
    char err[256];
    bool oka = plan_interleave(s, r, &job, 1, &o, &a, err, sizeof err);
    bool okb = plan_interleave(q, r, &job, 1, &o, &b, err, sizeof err);
    CHECK(oka && okb);
    if (!oka || !okb)
        return;
    CHECKM(a.fg_time_bg == b.fg_time_bg, "with background %.17g shared, %.17g per rank",
           a.fg_time_bg, b.fg_time_bg);
    CHECK(a.ncopies == b.ncopies && a.nslices == b.nslices && a.nrefusals == b.nrefusals);
    for (int64_t i = 0; i < a.nslices && i < b.nslices; i++)
        CHECKM(same_slice(&a.slices[i], &b.slices[i]), "slice %lld differs", (long long)i);
    CHECK(a.bg_samples_per_s == b.bg_samples_per_s);
    /* The idle sums add a role's windows once, times its ranks. */
    CHECK_NEAR(a.idle, b.idle, 1e-12);
    CHECK_NEAR(a.idle_bg, b.idle_bg, 1e-12);
    /* The schedule is left as it was without background. */
    CHECK(s->time == a.fg_time && q->time == b.fg_time);

    sim_bg_slice *bg = calloc((size_t)a.nslices + 1, sizeof *bg);
    for (int64_t i = 0; i < a.nslices; i++)
        bg[i] = (sim_bg_slice){.rank = a.slices[i].rank,
                               .step = a.slices[i].step,
                               .dur = a.slices[i].dur,
                               .samples = a.slices[i].last ? (double)job.batch : 0};
    sim_options so = {.iterations = 2, .bg = bg, .nbg = (int)a.nslices};
    sim_result x, y;
    bool okx = sim_play(s, &so, &x, err, sizeof err);
    bool oky = sim_play(q, &so, &y, err, sizeof err);
    CHECKM(okx && oky, "sim: %s", err);
    if (okx && oky) {
        CHECKM(x.total == y.total, "simulated %.17g shared, %.17g per rank", x.total, y.total);
        CHECK(x.events == y.events);
        for (int g = 0; g < x.G; g++)
            CHECK(x.fg_busy[g] == y.fg_busy[g] && x.bg_busy[g] == y.bg_busy[g]);
    }
    if (okx)
        sim_result_free(&x);
    if (oky)
        sim_result_free(&y);
    free(bg);
    plan_mux_result_free(&a);
    plan_mux_result_free(&b);
}

int main(void)
{
    int plans = 0, shared = 0;
    int64_t ranks = 0, roles = 0;
    for (int it = 0; it < 600; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int gpn = irand(1, 8);
        random_cluster(&in, irand(1, 4) * gpn, gpn);
        in.p.batch = irand(1, 64);
        in.p.ar_overlap = urand() < 0.5;
        make_shape(&in, it % 3);
        plan_problem *p = &in.p;
        p->amp_limit = 0;
        int k[MAXL], first[MAXL];
        role_plan(p, k, first);
        plan_result r;
        char err[256];
        if (!plan_evaluate(p, k, first, &r, err, sizeof err)) {
            fprintf(stderr, "evaluate: %s\n", err);
            check_failures++;
            continue;
        }
        plan_timeline s, q;
        bool oks = plan_timeline_build(p, &r, &s, err, sizeof err);
        bool okq = plan_timeline_build_roles(p, &r, false, &q, err, sizeof err);
        CHECKM(oks && okq, "timeline: %s", err);
        if (oks && okq) {
            plans++;
            shared += s.ncls < s.G;
            ranks += s.G;
            roles += s.ncls;
            compare_timelines(&s, &q);
            compare_mux_sim(&s, &q, &r);
        }
        if (oks)
            plan_timeline_free(&s);
        if (okq)
            plan_timeline_free(&q);
        plan_result_free(&r);
    }
    printf("%d plans, %d with ranks sharing a role; %lld ranks in %lld roles\n", plans, shared,
           (long long)ranks, (long long)roles);
    /* Not vacuous: most plans share. */
    CHECK(plans >= 590 && shared >= plans / 2);
    return check_done("sim/test_roles");
}
