/*
 * fuzz_pipeline.c: libFuzzer target for the whole compiler, source to C.
 *
 * The input is a .burst file, or IR text when it starts with ';' or "graph"
 * (so that hand-edited plans, with their reshard and allreduce ops, reach the
 * verifier and codegen as they are). It goes the way `burstc --emit=c` takes
 * it: parse, lower, verify, select the job, plan, insert communication, and
 * write the C program into a memory buffer. Whatever the bytes, each stage
 * must end in a module or in error messages: never a crash, a hang, a
 * sanitizer report or an internal compiler error (ice() exits, which
 * libFuzzer reports). A module that compiles must pass the verifier after
 * every pass, and codegen must accept what the passes produced or say why.
 */
#include "codegen.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static FILE *sink;
    if (!sink)
        sink = fopen("/dev/null", "w");
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, sink);
    bool ir = size > 0 && (data[0] == ';' || (size >= 5 && memcmp(data, "graph", 5) == 0));
    ir_module *m;
    if (ir) {
        src_file *f = src_file_from_string(a, "fuzz.ir", (const char *)data, size);
        m = ir_read(a, f, &d);
    } else {
        char *text = arena_strndup(a, (const char *)data, size);
        m = fe_compile_string(a, "fuzz.burst", text, &d);
    }
    if (m && d.nerrors == 0) {
        pass_options opt = {.strategy = "burst"};
        pass_ctx ctx = {.m = m, .opt = &opt, .d = &d, .job = -1};
        if (pass_select_job(&ctx) && pass_run_pipeline(&ctx, NULL, NULL, NULL) && ctx.job >= 0) {
            if (!ir_verify(m, &d))
                abort(); /* a pass left invalid IR behind */
            char *buf = NULL;
            size_t len = 0;
            FILE *out = open_memstream(&buf, &len);
            if (!out)
                abort();
            cg_emit_c(out, m, ctx.job, NULL, &d);
            fclose(out);
            free(buf);
        }
    }
    arena_free(a);
    return 0;
}
