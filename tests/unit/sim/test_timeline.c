/*
 * test_timeline.c: the per-rank timeline of a plan (passes/timeline.c)
 * against the planner's evaluator (passes/evaluate.c) and hand-computed
 * cases.
 *
 *   - reshard messages: the per-pair walk gives exactly the per-GPU and
 *     per-node maxima that commcost.c prices (3000 random splits);
 *   - chains (random problems, random and planned counts and ranks) and
 *     every example job: the ideal schedule's time equals plan_evaluate's
 *     to 1e-9 relative with all-reduces blocking (on random chains: at most
 *     it, equal without all-reduces, as the schedule sends a gradient back
 *     before the layer's all-reduce starts); with ar_overlap it lies
 *     between the compute-only and the blocking schedule;
 *   - graphs with branches: the relations docs/sim.md states (at most the
 *     evaluator's time when it runs no branches side by side; on blocks of
 *     chains on disjoint ranks at least the compute along every branch);
 *   - hand-computed: a two-branch block on disjoint ranks in the schedule's
 *     split-phase order (forward side by side, each branch's backward as
 *     soon as its gradient is there), idle windows and their anchors;
 *   - windows: every moment of a rank's iteration is its own compute or in
 *     exactly one window.
 *
 * Usage: sim_test_timeline EXAMPLES_DIR
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/check.h"
#include "../planner/random_problem.h"
#include "frontend.h"
#include "passes.h"
#include "plan.h"

static void test_pairs(void)
{
    for (int it = 0; it < 3000; it++) {
        int gpn = irand(1, 8), G = irand(1, 40);
        int64_t B = irand(1, 90);
        int kmax = (int64_t)G < B ? G : (int)B;
        int k1 = irand(1, kmax), k2 = irand(1, kmax);
        int r1 = irand(0, G - k1), r2 = irand(0, G - k2);
        int n = plan_reshard_pairs(B, r1, k1, r2, k2, NULL);
        CHECK(n < k1 + k2);
        plan_tl_pair *pr = calloc((size_t)n + 1, sizeof *pr);
        CHECK(plan_reshard_pairs(B, r1, k1, r2, k2, pr) == n);
        double *snd = calloc((size_t)G, sizeof(double)), *rcv = calloc((size_t)G, sizeof(double));
        int *ms = calloc((size_t)G, sizeof(int)), *mr = calloc((size_t)G, sizeof(int));
        double *nsnd = calloc((size_t)G, sizeof(double)), *nrcv = calloc((size_t)G, sizeof(double));
        double cross = 0;
        int64_t total = 0;
        for (int i = 0; i < n; i++) {
            CHECK(pr[i].src != pr[i].dst && pr[i].samples > 0);
            CHECK(pr[i].src >= r1 && pr[i].src < r1 + k1 && pr[i].dst >= r2 && pr[i].dst < r2 + k2);
            snd[pr[i].src] += (double)pr[i].samples;
            rcv[pr[i].dst] += (double)pr[i].samples;
            ms[pr[i].src]++;
            mr[pr[i].dst]++;
            if (pr[i].src / gpn != pr[i].dst / gpn) {
                nsnd[pr[i].src / gpn] += (double)pr[i].samples;
                nrcv[pr[i].dst / gpn] += (double)pr[i].samples;
                cross += (double)pr[i].samples;
            }
            total += pr[i].samples;
        }
        double gmax = 0, nmax = 0;
        int mmax = 0;
        for (int g = 0; g < G; g++) {
            gmax = fmax(gmax, fmax(snd[g], rcv[g]));
            nmax = fmax(nmax, fmax(nsnd[g], nrcv[g]));
            mmax = ms[g] > mmax ? ms[g] : mmax;
            mmax = mr[g] > mmax ? mr[g] : mmax;
        }
        plan_reshard rc = plan_reshard_count(B, gpn, r1, k1, r2, k2);
        CHECK(rc.gpu_samples == gmax);
        CHECK(rc.gpu_msgs == mmax);
        CHECK(rc.node_samples == nmax);
        CHECK(rc.cross_samples == cross);
        CHECK(total <= B);
        free(pr);
        free(snd);
        free(rcv);
        free(ms);
        free(mr);
        free(nsnd);
        free(nrcv);
    }
}

/* Sum over the ops of a timeline of their durations: the time of a program
 * that runs nothing side by side. */
static double serial_time(const plan_timeline *tl)
{
    double s = 0;
    for (int x = 0; x < tl->nops; x++)
        s += tl->op[x].dur;
    return s;
}

/* Every moment of every rank's iteration: its own compute, or one window. */
static void check_windows(const plan_timeline *tl)
{
    for (int g = 0; g < tl->G; g++) {
        double busy = 0, idle = 0, last = 0;
        int64_t len, nw;
        const plan_tl_step *prog = plan_tl_prog(tl, g, &len);
        const plan_tl_window *wins = plan_tl_windows(tl, g, &nw);
        for (int64_t j = 0; j < len; j++) {
            const plan_tl_op *o = &tl->op[prog[j].op];
            if (o->kind == PTL_FWD || o->kind == PTL_BWD)
                busy += prog[j].own;
        }
        for (int64_t w = 0; w < nw; w++) {
            const plan_tl_window *x = &wins[w];
            CHECK(x->rank == tl->rep[tl->cls[g]] && x->end > x->start && x->start >= last - 1e-15);
            CHECK(x->step >= 0 && x->step <= len);
            CHECK(x->op == (x->step < len ? prog[x->step].op : -1));
            idle += x->end - x->start;
            last = x->end;
        }
        CHECK_NEAR(busy + idle, tl->time, 1e-9);
    }
}

static bool timeline_of(const plan_problem *p, const int *k, const int *first, plan_result *r,
                        plan_timeline *tl)
{
    char err[256];
    if (!plan_evaluate(p, k, first, r, err, sizeof err)) {
        fprintf(stderr, "evaluate: %s\n", err);
        check_failures++;
        return false;
    }
    if (!plan_timeline_build(p, r, tl, err, sizeof err)) {
        fprintf(stderr, "timeline: %s\n", err);
        check_failures++;
        plan_result_free(r);
        return false;
    }
    check_windows(tl);
    return true;
}

/* A random placement of every layer. */
static void random_plan(const plan_problem *p, int *k, int *first)
{
    int G = p->cluster.gpus, kmax = (int64_t)G < p->batch ? G : (int)p->batch;
    for (int l = 0; l < p->nlayers; l++) {
        k[l] = irand(1, kmax);
        first[l] = urand() < 0.5 ? 0 : irand(0, G - k[l]);
    }
}

/* tl's program (the same order) played with its all-reduces overlapping
 * the backward (async) and, with zero, taking no time: with zero the time
 * without all-reduces as far as one order can say (each still joins its
 * ranks' streams). The order is the list scheduler's, which depends on the
 * durations, so the orders plan_timeline_build gives the variants are not
 * comparable; one order played three ways is monotone. tl is left as it
 * was. */
static double replay_allreduce(plan_timeline *tl, bool zero)
{
    double *dur = calloc((size_t)tl->nops + 1, sizeof(double));
    bool *as = calloc((size_t)tl->nops + 1, sizeof(bool));
    for (int x = 0; x < tl->nops; x++) {
        dur[x] = tl->op[x].dur;
        as[x] = tl->op[x].async;
        if (tl->op[x].kind == PTL_ALLREDUCE) {
            tl->op[x].async = true;
            if (zero)
                tl->op[x].dur = 0;
        }
    }
    plan_timeline_schedule(tl);
    double t = tl->time;
    for (int x = 0; x < tl->nops; x++) {
        tl->op[x].dur = dur[x];
        tl->op[x].async = as[x];
    }
    plan_timeline_schedule(tl);
    free(dur);
    free(as);
    return t;
}

/* Random problems, random or planned placements:
 *   chains: the timeline's time is at most the evaluator's, equal without
 *   all-reduces;
 *   nothing side by side in the evaluator's schedule: at most its time;
 *   always at most the sum of all durations;
 *   the same order played with all-reduces overlapping the backward: between
 *   it with all-reduces taking no time and the blocking one;
 *   never slower than the rule's order (schedule.c) played alone. */
static void test_random(void)
{
    int n[4] = {0, 0, 0, 0}; /* equal, below, above; faster than the rule's order */
    for (int it = 0; it < 3000; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int gpn = irand(1, 6);
        random_cluster(&in, irand(1, 3) * gpn, gpn);
        int shape = it % 3;
        make_shape(&in, shape);
        plan_problem *p = &in.p;
        p->amp_limit = 0;
        int k[MAXL], first[MAXL];
        plan_result r, solved;
        char err[256];
        if (urand() < 0.5 && plan_solve(p, PS_BURST, &solved, err, sizeof err)) {
            for (int l = 0; l < p->nlayers; l++) {
                k[l] = solved.layer[l].k;
                first[l] = solved.layer[l].first;
            }
            plan_result_free(&solved);
        } else {
            random_plan(p, k, first);
        }
        plan_timeline tl;
        if (!timeline_of(p, k, first, &r, &tl))
            continue;
        double T = tl.time, E = r.time, S = serial_time(&tl);
        CHECK(T <= S * (1 + 1e-12));
        /* On a chain the program runs the evaluator's sum, except that a
         * reshard's gradient goes back before the layer's all-reduce starts
         * (schedule.c), so the layers before it need not wait for it. */
        bool ar = false;
        for (int l = 0; l < p->nlayers; l++)
            ar |= r.layer[l].k > 1 && p->layers[l].params > 0;
        if (shape == 0 && !ar)
            CHECK_NEAR(T, E, 1e-9);
        if (shape == 0)
            CHECK(T <= E * (1 + 1e-9));
        if (r.nconcurrent == 0) {
            CHECK_NEAR(E, S, 1e-9);
            CHECK(T <= E * (1 + 1e-9));
        }
        n[fabs(T - E) <= 1e-9 * E ? 0 : T < E ? 1 : 2]++;
        double T0 = replay_allreduce(&tl, true), Tov = replay_allreduce(&tl, false);
        CHECK(T0 <= Tov * (1 + 1e-12) && Tov <= T * (1 + 1e-12));
        CHECK_NEAR(tl.time, T, 1e-15);
        /* The list scheduler's order never plays slower than the rule's. */
        plan_schedule rule;
        plan_timeline tr;
        plan_schedule_build(p, &r, &rule);
        CHECK(plan_timeline_of_schedule(p, &r, &rule, &tr, err, sizeof err));
        CHECK(T <= tr.time * (1 + 1e-12));
        n[3] += T < tr.time * (1 - 1e-9);
        plan_timeline_free(&tr);
        plan_schedule_free(&rule);
        plan_timeline_free(&tl);
        plan_result_free(&r);

        p->ar_overlap = true;
        if (!timeline_of(p, k, first, &r, &tl))
            continue;
        plan_timeline_free(&tl);
        plan_result_free(&r);
    }
    printf("random plans, timeline against evaluator: equal %d, below %d, above %d; the list "
           "schedule faster than the rule's order in %d\n",
           n[0], n[1], n[2], n[3]);
}

/* A pre-chain, a fork, 2..4 branches (chains of 1..2 layers), a join and a
 * post-chain, with the branches on pairwise disjoint ranks: the evaluator
 * runs them side by side (its time counts the slowest branch's forward and
 * backward together). The program may beat it (a branch's backward runs
 * beside the join's all-reduce), never the compute along any branch. */
static void test_disjoint_branches(void)
{
    int above = 0, total = 0;
    for (int it = 0; it < 1500; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int gpn = irand(1, 4), nb = irand(2, 4);
        random_cluster(&in, irand(nb, 3 * nb), gpn);
        in.p.amp_limit = 0;
        in.p.batch = irand(nb, 24);
        int pre = irand(0, 1), post = irand(0, 1), len[4], nl = 0;
        int fork = -1, ends[4], firsts[4];
        if (pre) {
            nl++;
        }
        fork = nl++;
        if (pre)
            add_edge(&in, 0, fork);
        for (int b = 0; b < nb; b++) {
            len[b] = irand(1, 2);
            firsts[b] = nl;
            for (int i = 0; i < len[b]; i++, nl++)
                add_edge(&in, i ? nl - 1 : fork, nl);
            ends[b] = nl - 1;
        }
        int join = nl++;
        for (int b = 0; b < nb; b++)
            add_edge(&in, ends[b], join);
        if (post) {
            add_edge(&in, join, nl);
            nl++;
        }
        finish(&in, nl);
        plan_problem *p = &in.p;
        int G = p->cluster.gpus, k[MAXL], first[MAXL];
        random_plan(p, k, first);
        /* branches: consecutive disjoint ranges */
        int next = 0;
        for (int b = 0; b < nb; b++) {
            int room = G - next - (nb - 1 - b);
            int kb = irand(1, room < 1 ? 1 : room > (int)p->batch ? (int)p->batch : room);
            for (int l = firsts[b]; l <= ends[b]; l++) {
                k[l] = kb;
                first[l] = next;
            }
            next += kb;
        }
        plan_result r;
        plan_timeline tl;
        if (!timeline_of(p, k, first, &r, &tl))
            continue;
        CHECK(r.nconcurrent == 1);
        /* No program beats the data's path through any branch: the layers
         * before the fork, the branch and the layers after it, forward and
         * backward. */
        double lb = 0;
        for (int b = 0; b < nb; b++) {
            double path = 0;
            for (int l = 0; l < nl; l++)
                if (l < firsts[0] || l > ends[nb - 1] || (l >= firsts[b] && l <= ends[b]))
                    path += r.layer[l].fwd + r.layer[l].bwd;
            lb = fmax(lb, path);
        }
        CHECK(tl.time >= lb * (1 - 1e-9));
        above += tl.time > r.time * (1 + 1e-9);
        total++;
        plan_timeline_free(&tl);
        plan_result_free(&r);
    }
    printf("branches on disjoint ranks: timeline above the evaluator in %d of %d plans\n", above,
           total);
}

/* A hand-computed block: fork F on ranks 4..7, branch A on 0..1, branch B on
 * 2..3, join J on 4..7, batch 8 on 8 GPUs in one node. In the schedule's
 * order (passes/schedule.c) F's ranks start the exchange to A, then to B,
 * right after F; A and B run side by side in forward; in backward J's ranks
 * start A's gradient first, then B's, then J's all-reduce (blocking here:
 * the start holds J's ranks), each branch's backward runs as soon as its
 * gradient is there, and F's ranks wait for B's, then A's. Every end below
 * is written out from the ops' durations. */
static void test_hand(void)
{
    inst in;
    memset(&in, 0, sizeof in);
    random_cluster(&in, 8, 8);
    in.p.batch = 8;
    in.p.amp_limit = 0;
    add_edge(&in, 0, 1); /* F -> A */
    add_edge(&in, 0, 2); /* F -> B */
    add_edge(&in, 1, 3); /* A -> J */
    add_edge(&in, 2, 3); /* B -> J */
    finish(&in, 4);
    for (int l = 0; l < 4; l++)
        in.layers[l].params = 1e5;
    int k[4] = {4, 2, 2, 4}, first[4] = {4, 0, 2, 4};
    plan_result r;
    plan_timeline tl;
    if (!timeline_of(&in.p, k, first, &r, &tl))
        return;
    /* The rule's order, played alone (the list scheduler's is below). */
    double listed = tl.time;
    plan_timeline_free(&tl);
    plan_schedule rule;
    char err[256];
    plan_schedule_build(&in.p, &r, &rule);
    CHECK(plan_timeline_of_schedule(&in.p, &r, &rule, &tl, err, sizeof err));
    plan_schedule_free(&rule);
    check_windows(&tl);
    CHECK(listed <= tl.time * (1 + 1e-12));
    enum { NO = 33 };
    /* F, start F->A, start F->B, wait F->A, A, start A->J, wait F->B, B,
     * start B->J, wait A->J, wait B->J, J, loss; J', start A->J', start
     * B->J', J.ar, wait B->J', B', start F->B', B.ar, wait A->J', A', start
     * F->A', A.ar, wait F->B', wait F->A', F', F.ar, and the waits of the
     * all-reduces of J, B, A, F. */
    static const plan_tl_kind want[NO] = {
        PTL_FWD,         PTL_RESHARD_FWD, PTL_RESHARD_FWD, PTL_WAIT,        PTL_FWD,
        PTL_RESHARD_FWD, PTL_WAIT,        PTL_FWD,         PTL_RESHARD_FWD, PTL_WAIT,
        PTL_WAIT,        PTL_FWD,         PTL_LOSS_SUM,    PTL_BWD,         PTL_RESHARD_BWD,
        PTL_RESHARD_BWD, PTL_ALLREDUCE,   PTL_WAIT,        PTL_BWD,         PTL_RESHARD_BWD,
        PTL_ALLREDUCE,   PTL_WAIT,        PTL_BWD,         PTL_RESHARD_BWD, PTL_ALLREDUCE,
        PTL_WAIT,        PTL_WAIT,        PTL_BWD,         PTL_ALLREDUCE,   PTL_WAIT,
        PTL_WAIT,        PTL_WAIT,        PTL_WAIT};
    static const int of[NO] = {[3] = 1,   [6] = 2,   [9] = 5,   [10] = 8,  [17] = 15, [21] = 14,
                               [25] = 19, [26] = 23, [29] = 16, [30] = 20, [31] = 24, [32] = 28};
    CHECK(tl.nops == NO);
    for (int x = 0; x < tl.nops && x < NO; x++)
        CHECK(tl.op[x].kind == want[x] && (want[x] != PTL_WAIT || tl.op[x].of == of[x]));
    if (tl.nops != NO)
        return;
    double d[NO];
    for (int x = 0; x < NO; x++)
        d[x] = tl.op[x].dur;
    double F = d[0], FA = F + d[1], FB = FA + d[2], A = FA + d[4];
    double AJ = fmax(A, FB) + d[5], B = FB + d[7], BJ = fmax(B, AJ) + d[8];
    double J = BJ + d[11], L = J + d[12], Jb = L + d[13], AJb = Jb + d[14], BJb = AJb + d[15];
    double Jar = BJb + d[16], Bb = BJb + d[18], FBb = fmax(Bb, Jar) + d[19], Bar = FBb + d[20];
    double Ab = AJb + d[22], FAb = fmax(fmax(Ab, Jar), FBb) + d[23], Aar = FAb + d[24];
    double Fb = FAb + d[27], Far = Fb + d[28];
    double end[NO] = {F,  FA,  FB,  FA,  A,   AJ,  FB,  B,   BJ,  AJ,  BJ,
                      J,  L,   Jb,  AJb, BJb, Jar, BJb, Bb,  FBb, Bar, AJb,
                      Ab, FAb, Aar, FBb, FAb, Fb,  Far, Jar, Bar, Aar, Far};
    for (int x = 0; x < NO; x++)
        CHECK_NEAR(tl.op[x].end, end[x], 1e-12);
    CHECK_NEAR(tl.time, fmax(Far, fmax(Bar, Aar)), 1e-12);
    /* The evaluator: the branches side by side, each with its forward and
	 * backward together. */
    double va = d[1] + d[4] + d[22] + d[24] + d[23] + d[5] + d[14];
    double vb = d[2] + d[7] + d[18] + d[20] + d[19] + d[8] + d[15];
    CHECK(r.nconcurrent == 1);
    CHECK_NEAR(r.time, F + d[27] + d[28] + fmax(va, vb) + d[11] + d[12] + d[13] + d[16], 1e-9);
    /* Rank 0 (branch A): posts F->A at once (step 0), then waits at its wait
     * (step 1) for F's ranks to post it: its first window. */
    int64_t nw0, n7;
    const plan_tl_window *w = plan_tl_windows(&tl, 0, &nw0);
    CHECK(w->op == 3 && w->step == 1 && w->why == PTW_PEER && w->start == 0 && w->end == F);
    /* Rank 7 (in F and J): 10 forward entries, the loss, 14 backward ones. */
    plan_tl_prog(&tl, 7, &n7);
    CHECK(n7 == 25);
    plan_timeline_free(&tl);
    plan_result_free(&r);
}

/* Every example job, every strategy, at the job's size and at 16 and 64
 * GPUs: with blocking all-reduces (the runtime's) the timeline's time is
 * the evaluator's at the job's size; where the evaluator runs nothing side
 * by side it is at most the evaluator's; with ar_overlap it lies between
 * the schedule without all-reduces and the blocking one. */
static void test_examples(const char *dir)
{
    DIR *dd = opendir(dir);
    CHECK(dd != NULL);
    if (!dd)
        return;
    struct dirent *de;
    int njobs = 0, nplans = 0, nequal = 0, nconc = 0;
    while ((de = readdir(dd))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".burst") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        njobs++;
        for (int size = 0; size < 3; size++) {
            arena *a = arena_new();
            diag_ctx d;
            diag_init(&d, stderr);
            ir_module *m = fe_compile(a, path, &d);
            CHECK(m && d.nerrors == 0);
            pass_options opt = {.strategy = "burst", .gpus = size == 0 ? 0 : size == 1 ? 16 : 64};
            pass_ctx ctx = {.m = m, .opt = &opt, .d = &d, .job = -1};
            pass_plan_input in;
            diag_ctx quiet;
            diag_init(&quiet, NULL);
            if (!m || !pass_select_job(&ctx) || !pass_plan_build(m, ctx.job, &opt, &in, &quiet)) {
                /* a one-node cluster has no network for 16 or 64 GPUs */
                CHECK(size > 0);
                pass_plan_input_free(&in);
                arena_free(a);
                continue;
            }
            for (int s = 0; s < PS_COUNT; s++) {
                plan_result r;
                plan_timeline tl;
                char err[512];
                in.p.ar_overlap = false;
                if (!plan_solve(&in.p, (plan_strategy)s, &r, err, sizeof err))
                    continue; /* deeppool refuses some graphs; memory */
                if (!plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
                    check_failures++;
                    plan_result_free(&r);
                    continue;
                }
                check_windows(&tl);
                nplans++;
                double T = tl.time, T0 = replay_allreduce(&tl, true),
                       Tov = replay_allreduce(&tl, false);
                if (r.nconcurrent == 0)
                    CHECK(T <= r.time * (1 + 1e-9));
                nequal += fabs(T - r.time) <= 1e-9 * r.time;
                nconc += r.nconcurrent > 0;
                CHECK(T0 <= Tov * (1 + 1e-12) && Tov <= T * (1 + 1e-12));
                plan_timeline_free(&tl);
                in.p.ar_overlap = true;
                CHECK(plan_timeline_build(&in.p, &r, &tl, err, sizeof err));
                plan_timeline_free(&tl);
                plan_result_free(&r);
            }
            pass_plan_input_free(&in);
            arena_free(a);
        }
    }
    closedir(dd);
    CHECK(njobs >= 6);
    printf(
        "example jobs: %d, plans %d, timeline = evaluator in %d, with branches side by side %d\n",
        njobs, nplans, nequal, nconc);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sim_test_timeline EXAMPLES_JOBS_DIR\n");
        return 2;
    }
    test_pairs();
    test_random();
    test_disjoint_branches();
    test_hand();
    test_examples(argv[1]);
    return check_done("sim/test_timeline");
}
