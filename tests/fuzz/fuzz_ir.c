/*
 * fuzz_ir.c: libFuzzer target for the IR reader and verifier.
 *
 * Any byte string must give either a module or error messages, never a crash,
 * a hang or a sanitizer report. A module that reads back without errors must
 * also print and re-read to the same text: the round-trip property.
 */
#include "ir.h"

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
    src_file *f = src_file_from_string(a, "fuzz.ir", (const char *)data, size);
    ir_module *m = ir_read(a, f, &d);
    if (d.nerrors == 0 && memchr(data, 0, size) == NULL) {
        char *once = ir_print_module_to_string(m, NULL);
        src_file *f2 = src_file_from_string(a, "again.ir", once, strlen(once));
        ir_module *m2 = ir_read(a, f2, &d);
        if (d.nerrors)
            abort(); /* printed IR must read back */
        char *twice = ir_print_module_to_string(m2, NULL);
        if (strcmp(once, twice) != 0)
            abort();
        free(once);
        free(twice);
    }
    arena_free(a);
    return 0;
}
