/*
 * cmd_import.c: `burstc import MODEL.onnx`, an ONNX model as Burst source.
 *
 * import/ does the work; this file adds the options and one guarantee: the
 * text is compiled by the front end before anything is written, and its
 * parameter count must equal what the importer took from the initializers.
 * A model that fails either check is a bug in burstc (exit status 2), never a
 * file left for the user to find out about.
 */
#include "frontend.h"
#include "import.h"
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static const char import_usage[] =
    "usage: burstc import [options] MODEL.onnx\n"
    "\n"
    "Reads an ONNX model (a file torch.onnx.export writes) and writes it as Burst\n"
    "source: one `model` whose layers are named after the ONNX nodes, with the batch\n"
    "as `batch` and parameters sized from the initializers (their values go to\n"
    "--weights, if given).\n"
    "A header comment says what became of every initializer. Attention, layer\n"
    "normalization and GELU spelled out op by op are fused into Burst's ops. Any op\n"
    "burstc cannot map is an error naming the node, its op type and its position;\n"
    "then nothing is written.\n"
    "\n"
    "  -o FILE      write to FILE, atomically (default: standard output)\n"
    "  --name N     the model's name (default: from the file name)\n"
    "  --weights F  also write the parameters and BatchNorm statistics to F as\n"
    "               safetensors, under their ONNX names (a PyTorch export's\n"
    "               state_dict keys), for a program's --init\n"
    "  --no-loss    do not add labels and a cross-entropy loss for each output that\n"
    "               is logits [N,C] or [N,T,V] (added by default, so the model trains)\n"
    "  --help       show this help\n"
    "\n"
    "Supported ONNX ops (opsets 7 to 20; tested 13 to 17): Conv, Gemm, MatMul (+ Add),\n"
    "Relu, Gelu, Tanh and Sigmoid (where the op table has them), Clip (to [0, 6]: relu6),\n"
    "HardSwish, HardSigmoid (torch's),\n"
    "MaxPool, AveragePool, GlobalAveragePool, ReduceMean (over H and W),\n"
    "BatchNormalization, LayerNormalization, Dropout, Softmax, Add, Mul (of activations,\n"
    "or by a gate [N,C,1,1]), Slice (of one axis), Concat, Flatten,\n"
    "Reshape, Squeeze, Unsqueeze, Transpose, Identity, Cast, Gather\n"
    "(embeddings, or one constant index: a slice); patterns: attention (GPT-2's and\n"
    "nn.MultiheadAttention's), layer norm, GELU, SiLU (x * Sigmoid(x)), a class token\n"
    "and learned positions (tokens), inside which also Split, Slice, Mul, Div, Sub,\n"
    "Pow, Sqrt, Erf, Where,\n"
    "ReduceMean, Expand; and the shape arithmetic exports compute with (Shape,\n"
    "Constant, Range, Concat, ...). docs/import.md has the details.\n"
    "\n"
    "exit status: 0 success, 1 errors in the input, 2 internal error\n";

int cmd_import(int argc, char **argv)
{
    imp_options o = {.loss = true};
    const char *output = "-";
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(import_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--no-loss") == 0) {
            o.loss = false;
        } else if ((v = tool_opt_value("burstc import", argc, argv, &i, "-o"))) {
            output = v;
        } else if ((v = tool_opt_value("burstc import", argc, argv, &i, "--name"))) {
            o.name = v;
        } else if ((v = tool_opt_value("burstc import", argc, argv, &i, "--weights"))) {
            o.weights = v;
        } else if (!tool_input_arg("burstc import", argv[i], &o.path)) {
            return 1;
        }
    }
    if (!o.path) {
        fputs("burstc import: error: no input file\n", stderr);
        return 1;
    }
    arena *a = arena_new();
    imp_summary sum;
    int status = 1;
    char *text = imp_onnx_to_burst(a, &o, stderr, &sum);
    if (text) {
        /* The guarantee: the text compiles, and counts what the importer took. */
        diag_ctx d;
        diag_init(&d, stderr);
        ir_module *m = fe_compile_string(a, strcmp(output, "-") ? output : "<import>", text, &d);
        if (!m || d.nerrors || m->ngraphs != 1) {
            fputs(text, stderr);
            ice("burstc import wrote a model that does not compile (above)");
        }
        int64_t params = 0;
        const ir_graph *g = m->graphs[0];
        for (int k = 0; k < g->nops; k++)
            params += ir_op_cost(g, &g->ops[k]).params;
        if (params != sum.params + sum.shared)
            ice("burstc import: the model has %lld parameters, the initializers %lld",
                (long long)params, (long long)(sum.params + sum.shared));
        out_file out;
        if (out_open(&out, output)) {
            fputs(text, out.fp);
            status = out_commit(&out) ? 0 : 1;
        }
    }
    arena_free(a);
    return status;
}
