/*
 * input.c: reading a command's input file.
 *
 * Every command that takes a job or a model reads it here: a `.ir` file
 * through the IR reader, anything else through the front end. main.c and
 * the cmd_*.c files all call it; it calls nothing of tools/.
 */
#include "frontend.h"
#include "tools.h"

#include <string.h>

bool tool_is_ir_file(const char *path)
{
    size_t n = strlen(path), k = strlen(".ir");
    return n >= k && strcmp(path + n - k, ".ir") == 0;
}

ir_module *load_input(arena *a, const char *path, diag_ctx *d)
{
    if (!tool_is_ir_file(path))
        return fe_compile(a, path, d);
    const char *why;
    src_file *f = src_file_read(a, path, &why);
    if (!f) {
        diag_error(d, (src_loc){0}, "cannot read '%s': %s", path, why);
        return NULL;
    }
    return ir_read(a, f, d);
}
