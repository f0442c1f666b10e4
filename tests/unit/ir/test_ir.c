/*
 * test_ir.c: unit tests of ir/: shape inference and parameter counts against
 * hand-computed values, canonical attributes, the printer/reader round trip on
 * a built module, and the errors of the reader on malformed text.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static ir_attr attr_int(const char *k, int64_t v)
{
    return (ir_attr){.key = k, .kind = AK_INT, .u.i = v};
}
static ir_attr attr_real(const char *k, double v)
{
    return (ir_attr){.key = k, .kind = AK_REAL, .u.real = v};
}

static int add(ir_module *m, ir_graph *g, ir_opcode opc, const char *name, const int *in, int nin,
               const ir_attr *attrs, int nattrs, diag_ctx *d)
{
    int id = ir_op_add(m, g, opc, name, in, nin, attrs, nattrs, (src_loc){0});
    return ir_op_check(m, g, id, d) ? id : -1;
}

static int add_input(ir_module *m, ir_graph *g, const char *name, ir_type t)
{
    int id = ir_op_add(m, g, OP_INPUT, name, NULL, 0, NULL, 0, (src_loc){0});
    g->ops[id].type = t;
    return id;
}

static void test_conv_and_linear(void)
{
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    ir_module *m = ir_module_new(a);
    ir_graph *g = ir_graph_add(m, "t", (src_loc){0});
    int x = add_input(m, g, "x", (ir_type){EL_F32, 4, {IR_BATCH, 3, 224, 224}});
    ir_attr conv[] = {attr_int("channels", 64), attr_int("kernel", 7), attr_int("stride", 2),
                      attr_int("pad", 3), attr_int("bias", 0)};
    int c = add(m, g, OP_CONV2D, "c", &x, 1, conv, 5, &d);
    CHECK(c >= 0);
    const ir_op *op = &g->ops[c];
    CHECK(op->type.rank == 4 && op->type.dim[1] == 64 && op->type.dim[2] == 112 &&
          op->type.dim[3] == 112);
    ir_cost k = ir_op_cost(g, op);
    CHECK(k.params == 64 * 3 * 7 * 7); /* ResNet's stem: 9,408 */
    CHECK(k.fwd_flops == 2.0 * 64 * 112 * 112 * 3 * 49);
    /* Defaults are filled in: typed, and in the spec's order for the printer. */
    const ir_op_info *info = ir_op_info_of(OP_CONV2D);
    CHECK(info->nattrs == 7 && strcmp(info->attrs[4].key, "dilation") == 0 &&
          ir_attr_get(op, 4).u.pair[1] == 1 && ir_conv2d_attrs(op)->dilation[1] == 1);
    CHECK(ir_conv2d_attrs(op)->stride[0] == 2 && ir_conv2d_attrs(op)->bias == false);

    ir_attr pool[] = {attr_int("kernel", 3), attr_int("stride", 2), attr_int("pad", 1)};
    int p = add(m, g, OP_MAXPOOL2D, "p", &c, 1, pool, 3, &d);
    CHECK(p >= 0 && g->ops[p].type.dim[2] == 56);
    int gap = add(m, g, OP_GLOBALAVGPOOL, "gap", &p, 1, NULL, 0, &d);
    ir_attr lin[] = {attr_int("out", 1000)};
    int l = add(m, g, OP_LINEAR, "fc", &gap, 1, lin, 1, &d);
    CHECK(l >= 0 && g->ops[l].type.dim[1] == 1000);
    CHECK(ir_op_cost(g, &g->ops[l]).params == 64 * 1000 + 1000);
    CHECK(d.nerrors == 0);

    /* A shape mismatch is a user error, reported once. */
    FILE *sink = fopen("/dev/null", "w");
    diag_ctx quiet;
    diag_init(&quiet, sink);
    int bad = add(m, g, OP_CONV2D, "bad", &l, 1, conv, 5, &quiet);
    CHECK(bad < 0 && quiet.nerrors == 1);
    ir_attr unknown[] = {attr_int("chanels", 3)};
    CHECK(add(m, g, OP_CONV2D, "bad2", &x, 1, unknown, 1, &quiet) < 0 &&
          quiet.nerrors == 4); /* unknown key, two missing */
    fclose(sink);
    arena_free(a);
}

static void test_transformer_ops(void)
{
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    ir_module *m = ir_module_new(a);
    ir_graph *g = ir_graph_add(m, "gpt", (src_loc){0});
    int t = add_input(m, g, "tokens", (ir_type){EL_I32, 2, {IR_BATCH, 1024}});
    ir_attr emb[] = {attr_int("vocab", 50257), attr_int("dim", 768), attr_int("positions", 1024)};
    int e = add(m, g, OP_EMBEDDING, "wte", &t, 1, emb, 3, &d);
    CHECK(e >= 0 && ir_op_cost(g, &g->ops[e]).params == 50257LL * 768 + 1024 * 768);
    ir_attr ln[] = {attr_real("eps", 1e-5)};
    int n = add(m, g, OP_LAYERNORM, "ln", &e, 1, ln, 1, &d);
    ir_attr heads[] = {attr_int("heads", 12)};
    int at = add(m, g, OP_ATTENTION, "attn", &n, 1, heads, 1, &d);
    CHECK(at >= 0 && ir_op_cost(g, &g->ops[at]).params == 4LL * 768 * 768 + 4 * 768);
    ir_attr tie[] = {
        attr_int("out", 50257), attr_int("bias", 0), {.key = "tie", .kind = AK_REF, .u.ref = e}};
    int head = add(m, g, OP_LINEAR, "lm_head", &at, 1, tie, 3, &d);
    CHECK(head >= 0 && ir_op_cost(g, &g->ops[head]).params == 0);
    CHECK(g->ops[head].type.rank == 3 && g->ops[head].type.dim[2] == 50257);
    int labels = add_input(m, g, "labels", (ir_type){EL_I32, 2, {IR_BATCH, 1024}});
    int in2[] = {head, labels};
    int loss = add(m, g, OP_CROSSENTROPY, "loss", in2, 2, NULL, 0, &d);
    CHECK(loss >= 0 && g->ops[loss].type.rank == 1);
    CHECK(d.nerrors == 0);

    /* Round trip: print, read, print gives the same text. */
    char *once = ir_print_module_to_string(m, NULL);
    src_file *f = src_file_from_string(a, "roundtrip.ir", once, strlen(once));
    ir_module *back = ir_read(a, f, &d);
    CHECK(d.nerrors == 0);
    char *twice = ir_print_module_to_string(back, NULL);
    CHECK(strcmp(once, twice) == 0);
    free(once);
    free(twice);
    arena_free(a);
}

/* Each malformed text gives exactly the expected first message. */
static void test_reader_errors(void)
{
    static const struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"graph g {\n  %x = input : f32[N,2147483648,2147483648,2147483648]\n}\n",
         "t.ir:2:3: error: input: 'x' is f32[N,2147483648,2147483648,2147483648]: more than 2^40 "
         "elements per sample"},
        {"graph g {\n  %x = input : f32[N,3,8,8]\n  %p = maxpool2d %x {kernel = 2, stride = 0} : "
         "f32[N,3,4,4]\n}\n",
         "t.ir:3:3: error: maxpool2d: attribute 'stride' must be positive, got 0"},
        {"graph g {\n  %x = input : f32[N,3]\n",
         "t.ir:3:1: error: unexpected end of file: graph 'g' is not closed with '}'"},
        {"graph g {\n  %x = input : f32[N,3]\n  %y = relu %z : f32[N,3]\n}\n",
         "t.ir:3:13: error: undefined value '%z'"},
        {"graph g {\n  %x = input : f32[N,3]\n  %y = relux %x : f32[N,3]\n}\n",
         "t.ir:3:8: error: unknown op 'relux'"},
        {"graph g {\n  %x = input : f32[N,3]\n  %y = relu %x : f32[N,4]\n}\n",
         "t.ir:3:3: error: type mismatch: '%y' is declared f32[N,4], but relu gives f32[N,3]"},
        {"graph g {\n  %x = input : f32[3,3]\n}\n",
         "t.ir:2:20: error: expected 'N' (the batch dimension comes first), got '3'"},
        {"graph g {\n  %x = input : f32[N,99999999999999999999]\n}\n",
         "t.ir:2:22: error: number out of range or malformed: '99999999999999999999'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arena *a = arena_new();
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        diag_ctx d;
        diag_init(&d, out);
        src_file *f = src_file_from_string(a, "t.ir", cases[i].text, strlen(cases[i].text));
        ir_read(a, f, &d);
        fclose(out);
        size_t n = strlen(cases[i].message);
        if (d.nerrors < 1 || strncmp(buf, cases[i].message, n) != 0 || buf[n] != '\n') {
            fprintf(stderr, "reader case %zu: expected\n  %s\ngot\n%s", i, cases[i].message, buf);
            failures++;
        }
        free(buf);
        arena_free(a);
    }
}

/* Sizes at and past the limits of ir.h: the checked products say "too
 * large" (-1) instead of wrapping around (2^31 cubed was 0 per sample). */
static void test_size_limits(void)
{
    ir_type t = {EL_F32, 4, {IR_BATCH, (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31}};
    CHECK(ir_type_elems_per_sample(&t) == -1);
    t = (ir_type){EL_F32, 3, {IR_BATCH, (int64_t)1 << 20, (int64_t)1 << 20}};
    CHECK(ir_type_elems_per_sample(&t) == IR_MAX_ELEMS);
    t.dim[2]++;
    CHECK(ir_type_elems_per_sample(&t) == -1);

    arena *a = arena_new();
    FILE *sink = fopen("/dev/null", "w");
    diag_ctx quiet;
    diag_init(&quiet, sink);
    ir_module *m = ir_module_new(a);
    ir_graph *g = ir_graph_add(m, "t", (src_loc){0});
    int x = add_input(m, g, "x", (ir_type){EL_F32, 2, {IR_BATCH, (int64_t)1 << 20}});
    /* 2^20 x 2^20 weights: exactly the limit, plus a bias of 2^20 past it. */
    ir_attr lin[] = {attr_int("out", (int64_t)1 << 20), attr_int("bias", 0)};
    int l = add(m, g, OP_LINEAR, "l", &x, 1, lin, 2, &quiet);
    CHECK(l >= 0 && ir_op_params(g, &g->ops[l]) == IR_MAX_PARAMS &&
          ir_op_cost(g, &g->ops[l]).params == IR_MAX_PARAMS);
    ir_attr lin_bias[] = {attr_int("out", (int64_t)1 << 20)};
    CHECK(add(m, g, OP_LINEAR, "lb", &x, 1, lin_bias, 1, &quiet) < 0 && quiet.nerrors == 1);
    /* A window of kernel 2^40 dilated 2^40 does not wrap into a small one. */
    int y = add_input(m, g, "y", (ir_type){EL_F32, 4, {IR_BATCH, 1, 8, 8}});
    ir_attr conv[] = {attr_int("channels", 1), attr_int("kernel", (int64_t)1 << 40),
                      attr_int("dilation", (int64_t)1 << 40)};
    CHECK(add(m, g, OP_CONV2D, "c", &y, 1, conv, 3, &quiet) < 0 && quiet.nerrors == 2);
    /* A pool left without a stride strides by its kernel. */
    ir_attr pool[] = {attr_int("kernel", 2)};
    int p = add(m, g, OP_MAXPOOL2D, "p", &y, 1, pool, 1, &quiet);
    CHECK(p >= 0 && ir_maxpool2d_attrs(&g->ops[p])->stride[0] == 2 && g->ops[p].type.dim[2] == 4);
    fclose(sink);
    arena_free(a);
}

/* Name tables and the line index stay right at sizes where a walk over a
 * list would be slow. */
static void test_tables(void)
{
    arena *a = arena_new();
    ir_names t = {0};
    char **keys = malloc(sizeof *keys * 100000);
    for (int i = 0; i < 100000; i++) {
        keys[i] = arena_printf(a, "name%d", i);
        ir_names_set(a, &t, keys[i], i);
    }
    ir_names_set(a, &t, "name7", -7); /* replaces */
    CHECK(t.n == 100000 && ir_names_get(&t, "name99999") == 99999 &&
          ir_names_get(&t, "name7") == -7 && ir_names_get(&t, "name100000") == -1);
    free(keys);

    ir_module *m = ir_module_new(a);
    for (int i = 0; i < 1000; i++)
        ir_graph_add(m, arena_printf(a, "g%d", i % 500), (src_loc){0});
    CHECK(ir_graph_find(m, "g499") == 499 && ir_graph_find(m, "g0") == 0 &&
          ir_graph_find(m, "g500") == -1); /* the first of a name */

    char *text = malloc(3 * 200000 + 1);
    size_t n = 0;
    for (int i = 0; i < 200000; i++)
        n += (size_t)sprintf(text + n, "%c\n", 'a' + i % 26);
    src_file *f = src_file_from_string(a, "t", text, n - 1); /* no newline at the end */
    size_t len;
    const char *l = src_line(f, 130001, &len);
    CHECK(l && len == 1 && l[0] == 'a' + 130000 % 26);
    l = src_line(f, 200000, &len);
    CHECK(l && len == 1 && l[0] == 'a' + 199999 % 26);
    CHECK(src_line(f, 200001, &len) == NULL && src_line(f, 0, &len) == NULL);
    free(text);
    arena_free(a);
}

int main(void)
{
    test_conv_and_linear();
    test_transformer_ops();
    test_reader_errors();
    test_size_limits();
    test_tables();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("ir unit tests passed\n");
    return failures != 0;
}
