/*
 * codegen.h: the internal header of codegen/, the last stage of burstc.
 *
 * emit_c.c turns a planned module (every op of the job's graph carries the
 * rank set that runs it) into one C program that links libburstrt and trains
 * the job under mpirun, one process per rank.
 */
#ifndef BURSTC_CODEGEN_H
#define BURSTC_CODEGEN_H

#include "ir.h"

/* emit_c.c */

/* Writes the C program for job `job` of m to out. Ops without a rank set run
 * on every rank of the job's cluster. Reports what the CPU runtime cannot do
 * (e.g. ceil-mode pooling) through d and returns false. */
bool cg_emit_c(FILE *out, const ir_module *m, int job, diag_ctx *d);

#endif
