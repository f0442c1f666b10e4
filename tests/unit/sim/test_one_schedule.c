/*
 * test_one_schedule.c: the generated program and the timeline follow one
 * schedule (passes/schedule.c).
 *
 * For random series-parallel models (linear layers in series and in blocks
 * of 2-3 branches joined by add, on one or two nodes) with random contiguous
 * rank ranges, the planned IR goes through the passes (comm, schedule) and
 * codegen's lowering (cg_lower: the program both writers print); every
 * rank's sequence of work in that program (its trace regions, through the
 * rank-set guards it passes: reshard halves on the ranks that move samples
 * in them) must equal the rank's program in the timeline that burstc sim,
 * the interleave pass and the tuner play (plan_timeline_build on the same
 * plan), entry for entry, after the loads of the inputs the rank holds
 * (which have no entries). The sum of the loss, between forward() and
 * backward(), is the driver's; the waits for all-reduces that the
 * optimizer's step completes are in the timeline at the rank's end and
 * emit no code.
 *
 * Usage: sim_test_one_schedule
 */
#include <stdlib.h>
#include <string.h>

#include "../planner/check.h"
#include "codegen.h"
#include "passes.h"
#include "plan.h"

#define MAXE 4096

static unsigned long long rng_state = 88172645463325252ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int irand(int lo, int hi)
{
    return lo + (int)(urand() * (hi - lo + 1));
}

typedef struct seq {
    int n;
    char *e[MAXE];
} seq;

static void push(seq *s, const char *text)
{
    if (s->n < MAXE)
        s->e[s->n++] = strdup(text);
}

static void seq_free(seq *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->e[i]);
    s->n = 0;
}

static bool in_set(const cg_program *p, int set, int g)
{
    for (int i = 0; i < p->sets[set].n; i++)
        if (p->sets[set].ranks[i] == g)
            return true;
    return false;
}

/* Whether rank g sends or receives samples in reshard r. */
static bool in_reshard(const cg_program *p, int r, int g)
{
    const ir_op *op = &p->g->ops[r];
    int *parts = malloc(sizeof(int) * (4 * (size_t)p->world + 4)); /* before duplicates go */
    int n = ir_reshard_ranks(p->job->batch, &p->g->ops[op->inputs[0]].plan, &op->plan, parts);
    bool in = false;
    for (int i = 0; i < n; i++)
        in |= parts[i] == g;
    free(parts);
    return in;
}

/* The entry a trace region of op i names ("fc1", "fc1.bwd", "a.to.b.start",
 * "a.to.b", "a.to.b.bwd.start", "a.to.b.bwd", "fc1.allreduce[.wait]"). */
static void entry_of(const cg_program *p, int i, const char *name, char *out, size_t n)
{
    const ir_op *op = &p->g->ops[i];
    const char *suffix =
        name + strlen(op->opcode == OP_ALLREDUCE ? p->g->ops[op->inputs[0]].name : op->name);
    if (op->opcode == OP_ALLREDUCE)
        snprintf(out, n, "%s %%%s", strcmp(suffix, ".allreduce") == 0 ? "start" : "wait", op->name);
    else if (op->opcode == OP_RESHARD)
        snprintf(out, n, "%s %%%s",
                 strcmp(suffix, ".start") == 0       ? "start"
                 : strcmp(suffix, ".bwd.start") == 0 ? "start.bwd"
                 : strcmp(suffix, ".bwd") == 0       ? "wait.bwd"
                                                     : "wait",
                 op->name);
    else if (op->opcode == OP_INPUT)
        snprintf(out, n, "load %%%s", op->name);
    else
        snprintf(out, n, "%s %%%s", strcmp(suffix, ".bwd") == 0 ? "bwd" : "fwd", op->name);
}

static void walk(const cg_program *p, const cg_block *b, int g, seq *s)
{
    for (int k = 0; k < b->n; k++) {
        const cg_stmt *st = &b->s[k];
        switch (st->kind) {
        case CS_CALL:
            if (strcmp(st->call.fn, "rt_trace_push") == 0) {
                const ir_op *op = &p->g->ops[st->op];
                if (op->opcode == OP_RESHARD && !in_reshard(p, st->op, g))
                    break; /* the runtime skips it */
                char e[512];
                entry_of(p, st->op, st->call.args[0].s, e, sizeof e);
                push(s, e);
            }
            break;
        case CS_IF: {
            bool yes = false;
            switch (st->cond.kind) {
            case CC_MEMBER: yes = in_set(p, st->cond.set, g); break;
            case CC_TRAIN: yes = true; break;
            case CC_CORRECT: yes = false; break;
            case CC_EXISTS: yes = in_set(p, p->vars[st->cond.var].set, g); break;
            case CC_UNIT: yes = false; break;
            }
            walk(p, yes ? &st->body : &st->orelse, g, s);
            break;
        }
        case CS_SCOPE: walk(p, &st->body, g, s); break;
        case CS_SEGMENT: /* runs on the members of its rank set */
            if (in_set(p, st->set, g))
                walk(p, &st->body, g, s);
            break;
        default: break;
        }
    }
}

static void timeline_seq(const plan_timeline *tl, int g, seq *s)
{
    int64_t n;
    const plan_tl_step *prog = plan_tl_prog(tl, g, &n);
    for (int64_t j = 0; j < n; j++) {
        int x = prog[j].op;
        const plan_tl_op *o = &tl->op[x];
        const plan_tl_op *w = o->kind == PTL_WAIT ? &tl->op[o->of] : o;
        char name[300], e[400];
        plan_tl_op_name(tl, o->kind == PTL_WAIT ? o->of : x, name, sizeof name);
        const char *lname = w->layer >= 0 ? tl->p->layers[w->layer].name : "";
        switch (w->kind) {
        case PTL_FWD: snprintf(e, sizeof e, "fwd %%%s", lname); break;
        case PTL_BWD: snprintf(e, sizeof e, "bwd %%%s", lname); break;
        case PTL_LOSS_SUM: snprintf(e, sizeof e, "loss"); break;
        case PTL_ALLREDUCE:
            snprintf(e, sizeof e, "%s %%%s.grad", o->kind == PTL_WAIT ? "wait" : "start", lname);
            break;
        case PTL_RESHARD_FWD:
            snprintf(e, sizeof e, "%s %%%s", o->kind == PTL_WAIT ? "wait" : "start", name);
            break;
        case PTL_RESHARD_BWD:
            name[strlen(name) - 4] = 0; /* ".bwd" */
            snprintf(e, sizeof e, "%s %%%s", o->kind == PTL_WAIT ? "wait.bwd" : "start.bwd", name);
            break;
        case PTL_WAIT: snprintf(e, sizeof e, "?"); break;
        }
        push(s, e);
    }
}

/* A random series-parallel model as planned IR text: a chain of stages, each
 * one linear layer or a block of 2-3 branches (1-2 linear layers each) joined
 * by an add; the loss last. Every layer on a random contiguous range. */
static char *random_ir(int nodes, int gpn, int64_t B, int *nlayers)
{
    size_t cap = 1 << 16, len = 0;
    char *t = malloc(cap);
    int G = nodes * gpn, kmax = (int64_t)G < B ? G : (int)B;
#define OUT(...) (len += (size_t)snprintf(t + len, cap - len, __VA_ARGS__))
    char ranks[64][32];
    /* Ranks first: the inputs live where their first consumer runs. */
    for (int l = 0; l < 64; l++) {
        int k = irand(1, kmax), f = irand(0, G - k);
        snprintf(ranks[l], sizeof ranks[l], "@[%d..%d]", f, f + k - 1);
    }
    int nst = irand(2, 5), L = 0;
    /* Layer 0 is the first linear, the loss is layer 63. */
    OUT("graph g {\n  %%x = input : f32[N,6] %s\n  %%y = input : i32[N] %s\n", ranks[0], ranks[63]);
    OUT("  %%l0 = linear %%x {out = 6, bias = 1, tie = none} : f32[N,6] %s\n", ranks[L++]);
    char last[32] = "l0";
    for (int s = 0; s < nst; s++) {
        if (urand() < 0.4) {
            OUT("  %%l%d = linear %%%s {out = 6, bias = 1, tie = none} : f32[N,6] %s\n", L, last,
                ranks[L]);
            snprintf(last, sizeof last, "l%d", L);
            L++;
            continue;
        }
        int nb = irand(2, 3);
        char ends[3][32];
        for (int b = 0; b < nb; b++) {
            char in[32];
            snprintf(in, sizeof in, "%s", last);
            int len_b = irand(1, 2);
            for (int i = 0; i < len_b; i++) {
                if (i == 1 && urand() < 0.5)
                    OUT("  %%l%d = relu %%%s : f32[N,6] %s\n", L, in, ranks[L]);
                else
                    OUT("  %%l%d = linear %%%s {out = 6, bias = 1, tie = none} : f32[N,6] %s\n", L,
                        in, ranks[L]);
                snprintf(in, sizeof in, "l%d", L);
                L++;
            }
            snprintf(ends[b], sizeof ends[b], "%s", in);
        }
        OUT("  %%l%d = add %%%s, %%%s : f32[N,6] %s\n", L, ends[0], ends[1], ranks[L]);
        snprintf(last, sizeof last, "l%d", L);
        L++;
        if (nb == 3) {
            OUT("  %%l%d = add %%%s, %%%s : f32[N,6] %s\n", L, last, ends[2], ranks[L]);
            snprintf(last, sizeof last, "l%d", L);
            L++;
        }
    }
    OUT("  %%loss = cross_entropy %%%s, %%y : f32[N] %s\n}\n", last, ranks[63]);
    OUT("gpu gg {flops.f32 = 1e+12, bandwidth = 1e+11, memory = 1e+10}\n");
    OUT("cluster c {gpu = gg, nodes = %d, gpus_per_node = %d, intra.bandwidth = 1e+10, "
        "intra.latency = 1e-06, inter.bandwidth = 1e+09, inter.latency = 5e-06}\n",
        nodes, gpn);
    OUT("job j {model = g, cluster = c, batch = %lld}\n", (long long)B);
#undef OUT
    *nlayers = L + 1;
    return t;
}

static int nplans, nsteps, nnodes2, nbranch_overlap;

static void one_plan(int nodes)
{
    int gpn = irand(1, 4), nl;
    int64_t B = irand(1, 12);
    char *text = random_ir(nodes, gpn, B, &nl);
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    src_file *f = src_file_from_string(a, "random.ir", text, strlen(text));
    ir_module *m = ir_read(a, f, &d);
    CHECK(m != NULL && d.nerrors == 0);
    if (!m || d.nerrors) {
        fprintf(stderr, "%s", text);
        free(text);
        arena_free(a);
        return;
    }
    pass_options opt = {.strategy = "burst"};
    pass_ctx ctx = {.m = m, .opt = &opt, .d = &d, .job = -1};
    bool ok = pass_select_job(&ctx) && pass_run_pipeline(&ctx, NULL, NULL, NULL);
    CHECK(ok);
    cg_program *p = ok ? cg_lower(a, m, ctx.job, NULL, &d) : NULL;
    CHECK(p != NULL);
    pass_plan_input in;
    plan_result r;
    plan_timeline tl;
    char err[256];
    bool placed = ok && pass_plan_placed(m, ctx.job, &opt, &in, &r, &d);
    CHECK(placed);
    if (p && placed && plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
        nplans++;
        nnodes2 += nodes == 2;
        nbranch_overlap += r.nconcurrent > 0;
        for (int g = 0; g < p->world; g++) {
            seq emitted = {0}, played = {0};
            walk(p, &p->forward, g, &emitted);
            /* First the data of the inputs this rank holds, in graph order (no
             * entries of the schedule: no step of the timeline). */
            int nload = 0;
            for (int i = 0; i < p->g->nops; i++) {
                const ir_op *op = &p->g->ops[i];
                bool here = false;
                for (int q = 0; q < op->plan.nranks; q++)
                    here |= op->plan.ranks[q] == g;
                if (op->opcode != OP_INPUT || !here)
                    continue;
                char want[300];
                snprintf(want, sizeof want, "load %%%s", op->name);
                CHECK(nload < emitted.n && strcmp(emitted.e[nload], want) == 0);
                nload++;
            }
            for (int i = 0; i < nload && i < emitted.n; i++)
                free(emitted.e[i]);
            memmove(emitted.e, emitted.e + (nload < emitted.n ? nload : emitted.n),
                    sizeof(char *) * (size_t)(emitted.n - (nload < emitted.n ? nload : emitted.n)));
            emitted.n -= nload < emitted.n ? nload : emitted.n;
            push(&emitted, "loss");
            walk(p, &p->backward, g, &emitted);
            timeline_seq(&tl, g, &played);
            /* The optimizer completes the all-reduces: their waits end the
             * timeline's program and emit nothing. */
            int n = played.n;
            while (n > 0 && strncmp(played.e[n - 1], "wait %", 6) == 0 &&
                   strstr(played.e[n - 1], ".grad") != NULL)
                n--;
            bool same = n == emitted.n;
            for (int i = 0; same && i < n; i++)
                same = strcmp(played.e[i], emitted.e[i]) == 0;
            CHECK(same);
            if (!same) {
                fprintf(stderr, "rank %d of:\n%s\nprogram: ", g, text);
                for (int i = 0; i < emitted.n; i++)
                    fprintf(stderr, "%s, ", emitted.e[i]);
                fprintf(stderr, "\ntimeline:");
                for (int i = 0; i < played.n; i++)
                    fprintf(stderr, "%s, ", played.e[i]);
                fprintf(stderr, "\n");
                exit(1);
            }
            nsteps += n;
            seq_free(&emitted);
            seq_free(&played);
        }
        plan_timeline_free(&tl);
    } else if (p && placed) {
        fprintf(stderr, "timeline: %s\n", err);
        check_failures++;
    }
    if (placed) {
        plan_result_free(&r);
        pass_plan_input_free(&in);
    }
    free(text);
    arena_free(a);
}

int main(void)
{
    for (int it = 0; it < 400; it++)
        one_plan(it % 2 ? 2 : 1);
    printf("%d random plans (%d on 2 nodes, %d with branches side by side): %d (rank, entry) "
           "pairs, program = timeline\n",
           nplans, nnodes2, nbranch_overlap, nsteps);
    CHECK(nplans >= 300 && nnodes2 >= 150 && nbranch_overlap >= 30);
    return check_done("sim/test_one_schedule");
}
