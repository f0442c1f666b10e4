/*
 * write_c.c: a cg_program printed as C.
 *
 * The program is straight-line calls into libburstrt (runtime/burstrt.h):
 * file-scope variables for every tensor and parameter, setup() that creates
 * the communicators, tensors and parameters, forward() and backward() for
 * one step, and main() that runs the steps and then evaluates. Everything it
 * prints comes from the cg_program (lower.c decided it); this file only
 * knows how C spells it.
 */
#include "codegen.h"

#include <string.h>

typedef struct writer {
    FILE *out;
    const cg_program *p;
    int ndecl; /* constant structs and arrays declared so far (their names) */
} writer;

#define W(...) fprintf(w->out, __VA_ARGS__)

static void indent(writer *w, int depth)
{
    for (int k = 0; k < depth; k++)
        fputc('\t', w->out);
}

static const char *var(const writer *w, int v)
{
    return w->p->vars[v].name;
}

static void print_string(writer *w, const char *s)
{
    fputc('"', w->out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\' || *s == '?') /* '?': no trigraph */
            fputc('\\', w->out);
        fputc(*s, w->out);
    }
    fputc('"', w->out);
}

static void print_call_expr(writer *w, const cg_call *c, int first_decl);

static void print_size(writer *w, const cg_size *z)
{
    if (z->call)
        print_call_expr(w, z->call, -1);
    else if (z->set < 0)
        W("%lld", (long long)z->k);
    else if (z->k == 1)
        W("nb[%d]", z->set);
    else
        W("nb[%d] * %lld", z->set, (long long)z->k);
}

static void print_shape(writer *w, const cg_var *v)
{
    W("(int64_t[]){");
    for (int k = 0; k < v->rank; k++) {
        if (k)
            W(", ");
        print_size(w, &v->dim[k]);
    }
    W("}");
}

/* Arguments that need a declaration first (constant structs, arrays) are
 * named attrs<N> and xs<N>, numbered from first_decl in the order of the call. */
static void print_arg(writer *w, const cg_arg *a, int *decl)
{
    switch (a->kind) {
    case CA_NULL: W("NULL"); break;
    case CA_VAR: W("%s", var(w, a->var)); break;
    case CA_PARAM: W("%s->%s", var(w, a->var), a->grad ? "grad" : "value"); break;
    case CA_PARAM_DATA: W("rt_f32(%s->grad)", var(w, a->var)); break;
    case CA_PARAM_NUMEL: W("%s->grad->numel", var(w, a->var)); break;
    case CA_INT: W("%lld", (long long)a->i); break;
    case CA_F32: W("(float)%.9g", a->r); break;
    case CA_BOOL: W("%s", a->i ? "true" : "false"); break;
    case CA_STR: print_string(w, a->s); break;
    case CA_COMM: W("comm[%d]", a->set); break;
    case CA_SHARD_FIRST: W("s0[%d]", a->set); break;
    case CA_SHARD_SIZE: W("nb[%d]", a->set); break;
    case CA_SHARD_END: W("s0[%d] + nb[%d]", a->set, a->set); break;
    case CA_TEST_FIRST: W("step * BATCH + s0[%d]", a->set); break;
    case CA_BATCH:
        if (a->i == 1)
            W("BATCH");
        else
            W("BATCH * %lld", (long long)a->i);
        break;
    case CA_POOL: W("pool"); break;
    case CA_DATA: W("data"); break;
    case CA_SEED: W("seed"); break;
    case CA_STEP: W("step"); break;
    case CA_CONST: W("&attrs%d", (*decl)++); break;
    case CA_ARRAY: W("xs%d", (*decl)++); break;
    }
}

static void print_call_expr(writer *w, const cg_call *c, int first_decl)
{
    int decl = first_decl;
    W("%s(", c->fn);
    for (int k = 0; k < c->nargs; k++) {
        if (k)
            W(", ");
        print_arg(w, &c->args[k], &decl);
    }
    W(")");
}

static bool needs_decls(const cg_call *c)
{
    for (int k = 0; k < c->nargs; k++)
        if (c->args[k].kind == CA_CONST || c->args[k].kind == CA_ARRAY)
            return true;
    return false;
}

static void print_call(writer *w, const cg_call *c, int depth)
{
    int first = w->ndecl;
    for (int k = 0; k < c->nargs; k++) {
        const cg_arg *a = &c->args[k];
        if (a->kind == CA_CONST) {
            indent(w, depth);
            W("static const %s attrs%d = {", a->s, w->ndecl++);
            for (int q = 0; q < a->n; q++)
                W("%s%lld", q ? ", " : "", (long long)a->vals[q]);
            W("};\n");
        } else if (a->kind == CA_ARRAY) {
            indent(w, depth);
            W("%srt_tensor *xs%d[] = {", a->is_const ? "const " : "", w->ndecl++);
            for (int q = 0; q < a->n; q++)
                W("%s%s", q ? ", " : "", a->vars[q] < 0 ? "NULL" : var(w, a->vars[q]));
            W("};\n");
        }
    }
    indent(w, depth);
    if (c->result == CR_LOSS)
        W("loss += ");
    else if (c->result == CR_CORRECT)
        W("*correct += ");
    print_call_expr(w, c, first);
    W(";\n");
}

static void print_cond(writer *w, const cg_cond *c)
{
    switch (c->kind) {
    case CC_MEMBER: W("rt_comm_member(comm[%d])", c->set); break;
    case CC_TRAIN: W("train"); break;
    case CC_CORRECT: W("correct"); break;
    case CC_EXISTS: W("%s", var(w, c->var)); break;
    case CC_UNIT: W("unit == %d", c->var); break;
    }
}

static void print_block(writer *w, const cg_block *b, int depth);

/* One simple statement (no declarations, no comment) goes without braces. */
static bool single(const cg_block *b)
{
    if (b->n != 1 || b->s[0].comment)
        return false;
    switch (b->s[0].kind) {
    case CS_CALL: return !needs_decls(&b->s[0].call);
    case CS_NEW:
    case CS_VIEW:
    case CS_PARAM: return true;
    default: return false;
    }
}

static void print_body(writer *w, const cg_block *b, int depth, bool braced)
{
    if (!braced) {
        W("\n");
        print_block(w, b, depth + 1);
        return;
    }
    W(" {\n");
    print_block(w, b, depth + 1);
    indent(w, depth);
    W("}\n");
}

static void print_stmt(writer *w, const cg_stmt *s, int depth)
{
    if (s->comment) {
        indent(w, depth);
        W("/* %s */\n", s->comment);
    }
    const cg_var *v = s->var >= 0 ? &w->p->vars[s->var] : NULL;
    switch (s->kind) {
    case CS_CALL: print_call(w, &s->call, depth); break;
    case CS_IF: {
        bool braced = !single(&s->body) || (s->orelse.n && !single(&s->orelse));
        indent(w, depth);
        W("if (");
        print_cond(w, &s->cond);
        W(")");
        print_body(w, &s->body, depth, braced);
        if (s->orelse.n) {
            indent(w, depth);
            W("else");
            print_body(w, &s->orelse, depth, braced);
        }
        break;
    }
    case CS_SCOPE:
        indent(w, depth);
        W("{\n");
        print_block(w, &s->body, depth + 1);
        indent(w, depth);
        W("}\n");
        break;
    case CS_SEGMENT:
        W("\n");
        indent(w, depth);
        W("/* graph segment %d: a CUDA graph after warm-up on GPUs */\n", s->seg);
        indent(w, depth);
        W("if (rt_comm_member(comm[%d]) && (%srt_graph_begin(%d))) {\n", s->set,
          s->forward ? "!train || " : "", s->seg);
        print_block(w, &s->body, depth + 1);
        indent(w, depth);
        W("}\n");
        indent(w, depth);
        W("if (rt_comm_member(comm[%d])%s)\n", s->set, s->forward ? " && train" : "");
        indent(w, depth + 1);
        W("rt_graph_end(%d);\n", s->seg);
        break;
    case CS_NEW:
        indent(w, depth);
        W("%s = rt_tensor_new(pool, %s, %d, ", v->name,
          v->elem == EL_I32 ? "RT_I32"
          : v->own          ? "RT_F32"
                            : "rt_storage_dtype()",
          v->rank);
        print_shape(w, v);
        W(");\n");
        break;
    case CS_VIEW:
        indent(w, depth);
        if (s->src < 0) {
            W("%s = NULL;\n", v->name);
            break;
        }
        W("%s = %s ? rt_tensor_view(pool, %s, %d, ", v->name, var(w, s->src), var(w, s->src),
          v->rank);
        print_shape(w, v);
        W(") : NULL;\n");
        break;
    case CS_PARAM:
        indent(w, depth);
        W("%s = rt_%s_new(ps, ", v->name, v->buffer ? "buffer" : "param");
        print_string(w, v->param_name);
        W(", comm[%d], %d, ", v->set, v->rank);
        print_shape(w, v);
        W(");\n");
        break;
    }
}

static void print_block(writer *w, const cg_block *b, int depth)
{
    for (int k = 0; k < b->n; k++) {
        /* A blank line before each layer's part, as a reader scans for them. */
        if (depth == 1 && b->s[k].comment && b->s[k].kind != CS_NEW)
            W("\n");
        print_stmt(w, &b->s[k], depth);
    }
}

static void write_header(writer *w)
{
    const cg_program *p = w->p;
    const ir_job *j = p->job;
    W("/*\n * Generated by burstc from job '%s': model '%s' on cluster '%s' (%d rank%s),\n"
      " * global batch %lld, %s. Do not edit: change the .burst file and rebuild.\n *\n"
      " * The plan, one line per layer: the ranks that run it.\n",
      j->name, p->g->name, p->m->clusters[j->cluster].name, p->world, p->world == 1 ? "" : "s",
      (long long)j->batch, j->optimizer == OPT_ADAM ? "Adam" : "SGD");
    for (int i = 0; i < p->g->nops; i++) {
        const cg_rankset *s = &p->sets[p->set_of[i]];
        W(" *   %-28s %-14s %2d rank%s [%d..%d]\n", p->g->ops[i].name,
          ir_op_info_of(p->g->ops[i].opcode)->name, s->n, s->n == 1 ? " " : "s", s->ranks[0],
          s->ranks[s->n - 1]);
    }
    W(" */\n#include <stdbool.h>\n#include <stdio.h>\n#include <string.h>\n\n#include \"burstrt.h\"\n\n");
}

static void write_defines(writer *w)
{
    const cg_program *p = w->p;
    const ir_job *j = p->job;
    W("#define WORLD %d\n#define BATCH ((int64_t)%lld)\n#define NSETS %d\n\n", p->world,
      (long long)j->batch, p->nsets);
    for (int s = 0; s < p->nsets; s++) {
        W("static const int set%d_ranks[%d] = {", s, p->sets[s].n);
        for (int k = 0; k < p->sets[s].n; k++)
            W("%s%d", k ? ", " : "", p->sets[s].ranks[k]);
        W("};\n");
    }
    W("static rt_comm *comm[NSETS];\n");
    W("static int64_t s0[NSETS], nb[NSETS];   /* this rank's first sample and shard size per set */\n\n");
}

static void write_globals(writer *w)
{
    const cg_program *p = w->p;
    for (int k = 0; k < p->nvars; k++) {
        const cg_var *v = &p->vars[k];
        if (k == 0 || p->vars[k - 1].op != v->op)
            W("/* %s */\n", p->g->ops[v->op].name);
        W("static %s *%s;", v->kind == CV_PARAM ? "rt_param" : "rt_tensor", v->name);
        if (v->comment)
            W("   /* %s */", v->comment);
        W("\n");
    }
    W("\n");
}

static void write_setup(writer *w)
{
    const cg_program *p = w->p;
    W("/* Communicators, shards, tensors and parameters: once, before the first step. */\n");
    W("static void setup(rt_pool *pool, rt_params *ps, uint64_t seed)\n{\n\t(void)seed;\n");
    for (int s = 0; s < p->nsets; s++) {
        if (p->bg)
            W("\tcomm[%d] = rt_comm_self();   /* this rank alone */\n", s);
        else
            W("\tcomm[%d] = rt_comm_new(%d, set%d_ranks);\n", s, p->sets[s].n, s);
        W("\t{\n\t\tint64_t end;\n\t\trt_comm_shard(comm[%d], BATCH, &s0[%d], &end);\n\t\tnb[%d] = end - s0[%d];\n\t}\n",
          s, s, s, s);
    }
    print_block(w, &p->setup, 1);
    W("}\n\n");
}

static void write_forward(writer *w)
{
    W("/* One forward pass over global batch `step` (a test batch when !train).\n"
      " * Returns this rank's part of the loss; the job's loss is the sum over ranks. */\n");
    W("static double forward(rt_pool *pool, rt_data *data, uint64_t seed, int64_t step, bool train, int64_t *correct%s)\n{\n",
      w->p->bg ? ", int unit" : "");
    W("\tdouble loss = 0;\n\t(void)pool;\n\t(void)seed;\n");
    print_block(w, &w->p->forward, 1);
    W("\treturn loss;\n}\n\n");
}

static void write_backward(writer *w)
{
    W("/* The backward pass, in reverse order; parameter gradients accumulate\n"
      " * into this rank's rt_params, all-reduced afterwards. */\n");
    W("static void backward(rt_pool *pool, uint64_t seed, int64_t step%s)\n{\n\t(void)pool;\n\t(void)seed;\n\t(void)step;\n",
      w->p->bg ? ", int unit" : "");
    print_block(w, &w->p->backward, 1);
    W("}\n\n");
}

/* ---- background models (GPU multiplexing, issue 12) ----
 *
 * Every background job with a copy in the interleave pass's result
 * (job->interleave) is a one-rank program of its model at its batch
 * (cg_lower_background), printed before the foreground's code: its names start
 * with bgK_, and macros rename the few names both programs print (comm, s0,
 * nb, setup, forward, backward, BATCH, NSETS). bgK_unit(u) runs unit u of a
 * step: u < n the forward of op u, u = n + k the backward of op n-1-k
 * (docs/runtime.md); the runtime's executor runs unit 2n, the optimizer
 * update, and cuts the units into the plan's slices. */

static const char *const renamed[] = {"comm", "s0", "nb", "setup", "forward", "backward"};

static void write_background(writer *fg, const cg_program *b)
{
    writer bw = {.out = fg->out, .p = b, .ndecl = fg->ndecl};
    writer *w = &bw;
    const ir_job *j = b->job;
    const char *pre = b->pre;
    int n = b->g->nops;
    W("/* ---- background job %d: model '%s' at batch %lld, a one-rank training step in %d\n"
      " * units (forward of each op, backward of each op in reverse, the update) ---- */\n",
      b->bg_job, b->g->name, (long long)j->batch, 2 * n + 1);
    for (size_t r = 0; r < sizeof renamed / sizeof *renamed; r++)
        W("#define %s %s%s\n", renamed[r], pre, renamed[r]);
    W("#define BATCH ((int64_t)%lld)\n#define NSETS %d\n\n", (long long)j->batch, b->nsets);
    W("static rt_comm *comm[NSETS];\nstatic int64_t s0[NSETS], nb[NSETS];\n\n");
    write_globals(w);
    write_setup(w);
    write_forward(w);
    write_backward(w);
    W("static double %sunit(int u, rt_pool *pool, rt_data *data, uint64_t seed, int64_t step)\n{\n",
      pre);
    W("\tif (u < %d)\n\t\treturn forward(pool, data, seed, step, true, NULL, u);\n", n);
    W("\tbackward(pool, seed, step, %d - u);\n\treturn 0;\n}\n", 2 * n - 1);
    for (size_t r = 0; r < sizeof renamed / sizeof *renamed; r++)
        W("#undef %s\n", renamed[r]);
    W("#undef BATCH\n#undef NSETS\n\n");
    const ir_type *xt = &b->g->ops[b->sample_input].type;
    W("static const int64_t %ssample_shape[] = {", pre);
    for (int q = 1; q < xt->rank; q++)
        W("%s%lld", q > 1 ? ", " : "", (long long)xt->dim[q]);
    W("};\n");
    W("static const rt_bg_model %smodel = {\n", pre);
    W("\t.name = ");
    print_string(w, b->g->name);
    W(",\n\t.batch = %lld,\n\t.nunits = %d,\n", (long long)j->batch, 2 * n + 1);
    W("\t.data = %s,\n", b->bg_fmnist ? "RT_DATA_FMNIST" : "RT_DATA_SYNTHETIC");
    W("\t.ndim = %d,\n\t.sample_shape = %ssample_shape,\n\t.in_dtype = %s,\n", xt->rank - 1, pre,
      xt->elem == EL_I32 ? "RT_I32" : "RT_F32");
    W("\t.vocab = %lld,\n\t.classes = %lld,\n\t.labels_per_sample = %lld,\n", (long long)b->vocab,
      (long long)b->classes, (long long)b->labels_per_sample);
    /* The foreground job's optimizer and hyper-parameters. */
    if (j->optimizer == OPT_ADAM)
        W("\t.adam = true,\n\t.adam_cfg = {(float)%.9g, 0.9f, 0.999f, 1e-8f, (float)%.9g},\n",
          j->lr, j->weight_decay);
    else
        W("\t.sgd = {(float)%.9g, (float)%.9g, (float)%.9g, false},\n", j->lr, j->momentum,
          j->weight_decay);
    W("\t.setup = %ssetup,\n\t.unit = %sunit,\n};\n\n", pre, pre);
    fg->ndecl = bw.ndecl;
}

/* main()'s placing of every copy: each rank sets up the copies it hosts. */
static void write_background_copies(writer *w)
{
    const ir_job *j = w->p->job;
    const ir_interleave *il = j->interleave;
    if (!il || il->ncopies == 0)
        return;
    double slowdown = j->slowdown > 0 ? j->slowdown : IR_SLOWDOWN_DEFAULT;
    W("\t/* Background copies (the interleave pass): model, rank, seed, slices. */\n");
    for (int c = 0; c < il->ncopies; c++) {
        const ir_bg_copy *cp = &il->copies[c];
        W("\trt_bg_add(&bg%d_model, %d, %lluu, %d, (const int[]){", cp->job, cp->rank,
          (unsigned long long)cp->seed, cp->nslices);
        for (int s = 0; s <= cp->nslices; s++)
            W("%s%d", s ? ", " : "", cp->cut[s]);
        W("}, %.9g);\n", slowdown);
    }
}

static void write_main(writer *w)
{
    const cg_program *p = w->p;
    const ir_job *j = p->job;
    const ir_type *xt = &p->g->ops[p->sample_input].type;
    W("int main(int argc, char **argv)\n{\n");
    W("\trt_set_defaults(%lld, ", (long long)j->iterations);
    print_string(w, p->data);
    W(");   /* the job's iterations and data */\n");
    W("\tconst rt_options *o = rt_init(&argc, &argv, ");
    print_string(w, j->name);
    W(");\n");
    W("\trt_check_world_size(WORLD);\n");
    W("\trt_check_launch(%d);   /* the plan's ranks per node */\n",
      p->m->clusters[j->cluster].gpus_per_node);
    if (p->g->nweights)
        W("\t/* the model's weights section: its tensors' names in a weights file */\n");
    for (int i = 0; i < p->g->nweights; i++) {
        W("\trt_weight_name(");
        print_string(w, p->g->weights[i].source);
        W(", ");
        print_string(w, p->g->weights[i].target);
        W(");\n");
    }
    if (j->dtype == DT_BF16 || j->dtype == DT_F16)
        W("\trt_set_compute_dtype(%s);   /* the job's dtype: GEMM inputs in 16 bits on GPUs */\n",
          j->dtype == DT_BF16 ? "RT_COMPUTE_BF16" : "RT_COMPUTE_F16");
    W("\trt_pool *pool = rt_pool_new();\n\trt_params *ps = rt_params_new(pool);\n");
    W("\tsetup(pool, ps, o->seed);\n");
    W("\trt_data *data = rt_data_open(o, %d, (int64_t[]){", xt->rank - 1);
    for (int k = 1; k < xt->rank; k++)
        W("%s%lld", k > 1 ? ", " : "", (long long)xt->dim[k]);
    W("}, %s, %lld, %lld, %lld);\n", xt->elem == EL_I32 ? "RT_I32" : "RT_F32", (long long)p->vocab,
      (long long)p->classes, (long long)p->labels_per_sample);
    if (j->optimizer == OPT_ADAM)
        W("\tconst rt_adam opt = {(float)%.9g, 0.9f, 0.999f, 1e-8f, (float)%.9g};\n", j->lr,
          j->weight_decay);
    else
        W("\tconst rt_sgd opt = {(float)%.9g, (float)%.9g, (float)%.9g, false};\n", j->lr,
          j->momentum, j->weight_decay);
    write_background_copies(w);
    W("\tint64_t first = rt_checkpoint_attach(ps);\n");
    W("\tdouble t0 = rt_now();\n");
    W("\tfor (int64_t step = first; step < o->iterations; step++) {\n");
    W("\t\trt_step_begin(step);\n");
    W("\t\tdouble loss = rt_world_sum(forward(pool, data, o->seed, step, true, NULL));\n");
    W("\t\trt_params_zero_grad(ps);\n");
    W("\t\tbackward(pool, o->seed, step);\n");
    W("\t\tif (rt_loss_scale_unscale(ps))   /* false: inf/nan in a gradient, skip */\n");
    W("\t\t\trt_%s_step(ps, &opt);\n", j->optimizer == OPT_ADAM ? "adam" : "sgd");
    W("\t\trt_step_end(step);\n");
    W("\t\trt_report_loss(step, loss);\n");
    W("\t}\n");
    W("\tdouble elapsed = rt_now() - t0;\n");
    if (j->interleave && j->interleave->ncopies > 0)
        W("\trt_bg_finish(elapsed);   /* background samples/s, measured slowdown */\n");
    W("\tint64_t steps = o->iterations > first ? o->iterations - first : 0;\n");
    W("\tif (o->rank == 0 && steps > 0)\n\t\tprintf(\"throughput %%.1f samples/s (%%lld steps of %%lld samples in %%.3f s)\\n\",\n"
      "\t\t       (double)(steps * BATCH) / elapsed, (long long)steps, (long long)BATCH, elapsed);\n");
    W("\tint64_t tests = rt_data_test_count(data) / BATCH, correct = 0;\n");
    W("\tfor (int64_t t = 0; t < tests; t++) {\n\t\trt_progress();\n\t\tforward(pool, data, o->seed, t, false, &correct);\n\t}\n");
    W("\tdouble total = rt_world_sum((double)correct);\n");
    /* The fraction of correct labels: per token for a language model. */
    W("\tif (o->rank == 0 && tests > 0)\n\t\tprintf(\"test accuracy %%.4f (%%lld samples)\\n\", total / (double)(tests * BATCH * %lld),\n"
      "\t\t       (long long)(tests * BATCH));\n",
      (long long)p->labels_per_sample);
    W("\trt_data_close(data);\n\trt_pool_free(pool);\n\trt_finalize();\n\treturn 0;\n}\n");
}

void cg_write_c(FILE *out, const cg_program *p, cg_program *const *bgs, int nbgs)
{
    writer w = {.out = out, .p = p};
    write_header(&w);
    for (int k = 0; k < nbgs; k++)
        write_background(&w, bgs[k]);
    write_defines(&w);
    write_globals(&w);
    write_setup(&w);
    write_forward(&w);
    write_backward(&w);
    write_main(&w);
}
