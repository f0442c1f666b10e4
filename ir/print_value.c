/*
 * print_value.c: the IR text's scalar values, printed.
 *
 * Real numbers and strings as docs/ir.md writes them, so read.c reads them
 * back to the same value. The module printer (print.c) and the job table
 * (job.c) both print through these; they call nothing else of ir/.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest %g form of v that strtod reads back exactly. */
void ir_print_real(FILE *out, double v)
{
    char buf[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* Keep a real recognisable as one, so the reader never takes it for an integer. */
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    fputs(buf, out);
}

void ir_print_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}
