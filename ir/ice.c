/*
 * ice.c: internal compiler errors, the floor of ir/.
 *
 * ice() (ir.h) reports a bug in burstc, not in the user's input: the file
 * and line of the check that failed, the message, and a request to report
 * it; then exit status 2. It calls nothing of burstc's, so every file,
 * the arena included, may use it.
 */
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

_Noreturn void ice_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: internal compiler error: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nplease report this as a burstc bug, with the input that caused it\n", stderr);
    exit(2);
}
