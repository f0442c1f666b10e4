/* test_candidates.c: the tuner's candidate list with background jobs
 * (tune/candidates.c), over random planning problems and background jobs
 * (the planner tests' generator):
 *
 * - with room for every candidate, every plan whose placement holds copies
 *   is there twice, packed ("+bg", the placement's predictions) and unpacked
 *   (the plan's own, no background), every other plan once; no (plan,
 *   packing) twice; the plans are exactly those of the list without
 *   background jobs; the list is sorted by the predicted metric, best first;
 * - with a cap, as many as fit, every one of them from the full list, the
 *   pairs kept together but for at most one plan that the cap cut (the
 *   better predicted variant of it kept);
 * - without background jobs nothing is packed.
 */
#include "../planner/random_problem.h"
#include "../rank/check.h"
#include "tune.h"

#include <stdlib.h>

static bool same_plan(const plan_result *a, const plan_result *b)
{
    if (a->nlayers != b->nlayers)
        return false;
    for (int l = 0; l < a->nlayers; l++)
        if (a->layer[l].k != b->layer[l].k || a->layer[l].first != b->layer[l].first)
            return false;
    return true;
}

static int find(const tune_candidate *c, int n, const plan_result *plan, bool packed)
{
    for (int i = 0; i < n; i++)
        if (c[i].packed == packed && same_plan(&c[i].plan, plan))
            return i;
    return -1;
}

static int runs, with_copies, cut_pairs;

static void check_lists(const plan_problem *p, const tune_background *bg, tune_metric metric)
{
    tune_candidate *all, *plain, *cap;
    int distinct, dplain, dcap;
    char err[1024];
    int n = tune_candidates(p, bg, metric, TUNE_MAX_CANDIDATES, &all, &distinct, err, sizeof err);
    if (n == 0)
        return; /* no plan fits: the no-background list has none either */
    int np =
        tune_candidates(p, NULL, metric, TUNE_MAX_CANDIDATES, &plain, &dplain, err, sizeof err);
    CHECK(np > 0);
    runs++;
    bool whole = distinct <= TUNE_MAX_CANDIDATES;
    if (whole)
        CHECK(n == distinct);
    int unpacked = 0;
    for (int i = 0; i < n; i++) {
        const tune_candidate *c = &all[i];
        CHECK(find(all, n, &c->plan, c->packed) == i); /* no (plan, packing) twice */
        if (i > 0)
            CHECK(tune_candidate_metric(&all[i - 1], metric) >= tune_candidate_metric(c, metric));
        if (c->packed) {
            size_t len = strlen(c->name);
            CHECK(len > 4 && strcmp(c->name + len - 4, " +bg") == 0);
            CHECK(c->copies > 0 && c->mux.ncopies == c->copies);
            CHECK(c->pred.bg > 0 && c->pred.bg == c->mux.bg_samples_per_s);
            CHECK(c->pred.fg == c->mux.fg_samples_per_s && c->pred_time == c->mux.fg_time_bg);
            int twin = find(all, n, &c->plan, false);
            if (whole)
                CHECK(twin >= 0);
            if (twin >= 0)
                CHECK(strncmp(all[twin].name, c->name, strlen(c->name) - 4) == 0 &&
                      all[twin].copies == c->copies);
            with_copies++;
        } else {
            unpacked++;
            CHECK(c->pred.bg == 0 && c->pred.fg == c->plan.samples_per_s &&
                  c->pred_time == c->plan.time);
            if (whole && c->copies > 0)
                CHECK(find(all, n, &c->plan, true) >= 0);
            if (whole)
                CHECK(find(plain, np, &c->plan, false) >= 0);
        }
    }
    /* the same plans as without background jobs */
    if (whole && dplain <= TUNE_MAX_CANDIDATES)
        CHECK(unpacked == np);
    for (int i = 0; i < np; i++) {
        CHECK(!plain[i].packed && plain[i].pred.bg == 0);
        if (whole && dplain <= TUNE_MAX_CANDIDATES)
            CHECK(find(all, n, &plain[i].plan, false) >= 0);
    }
    /* a cap */
    int max = irand(1, 6);
    int k = tune_candidates(p, bg, metric, max, &cap, &dcap, err, sizeof err);
    CHECK(dcap == distinct);
    CHECK(k == (max < distinct ? max : distinct));
    int single = 0;
    for (int i = 0; i < k; i++) {
        if (whole)
            CHECK(find(all, n, &cap[i].plan, cap[i].packed) >= 0);
        if (cap[i].copies > 0 && find(cap, k, &cap[i].plan, !cap[i].packed) < 0) {
            single++;
            /* the better predicted variant of the plan cut */
            int other = find(all, n, &cap[i].plan, !cap[i].packed);
            if (other >= 0)
                CHECK(tune_candidate_metric(&cap[i], metric) >=
                      tune_candidate_metric(&all[other], metric));
        }
    }
    CHECK(single <= 1);
    cut_pairs += single;
    tune_candidates_free(cap, k);
    tune_candidates_free(plain, np);
    tune_candidates_free(all, n);
}

int main(void)
{
    for (int it = 0; it < 150; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int G = irand(1, 6);
        random_cluster(&in, G, irand(1, 2) == 1 ? G : (G + 1) / 2);
        int n = irand(2, 6);
        if (urand() < 0.5 || n < 4)
            make_chain(&in, n);
        else
            make_concurrent(&in, n);
        plan_result r;
        char err[512];
        if (!plan_solve(&in.p, PS_BURST, &r, err, sizeof err))
            continue;
        double T0 = r.time;
        plan_result_free(&r);
        random_bg bgr;
        random_bg_jobs(&bgr, T0);
        int nj = bgr.n;
        plan_bg_job *jobs = bgr.jobs;
        tune_background bg = {
            .jobs = jobs, .njobs = nj, .mux = {.slowdown = 1 + urand(), .cpu = urand() < 0.3}};
        /* Sometimes the job's one limit (plan_mux_init's), sometimes none. */
        if (urand() < 0.3) {
            bg.mux.time_ref = T0;
            bg.mux.time_limit = bg.mux.slowdown * T0;
        }
        check_lists(&in.p, &bg, urand() < 0.5 ? TUNE_METRIC_CLUSTER : TUNE_METRIC_FG);
    }
    printf("tune/test_candidates: %d problems, %d packed candidates, %d pairs cut by a cap\n", runs,
           with_copies, cut_pairs);
    CHECK(runs >= 100 && with_copies >= 50);
    return check_done("tune/test_candidates");
}
