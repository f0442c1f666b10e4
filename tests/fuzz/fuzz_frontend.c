/*
 * fuzz_frontend.c: libFuzzer target for the Burst front end.
 *
 * The input is one .burst file (imports resolve against the working folder
 * and fail cleanly when absent). Whatever the bytes, the lexer, parser,
 * checks, block and loop expansion and lowering (and the --emit=ast dump)
 * must end in a module or in error messages: never a crash, a hang or a
 * sanitizer report. A module that compiles without errors must also pass the
 * verifier.
 */
#include "frontend.h"
#include "ir.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static FILE *sink;
    if (!sink)
        sink = fopen("/dev/null", "w");
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, sink);
    char *text = arena_strndup(a, (const char *)data, size);
    fe_program *p = fe_load(a, "fuzz.burst", text, &d);
    if (p)
        fe_dump_program(sink, p); /* --emit=ast walks every tree too */
    ir_module *m = p ? fe_lower(a, p, &d) : NULL;
    if (m && d.nerrors == 0 && !ir_verify(m, &d))
        abort(); /* the front end produced IR that the verifier rejects */
    arena_free(a);
    return 0;
}
