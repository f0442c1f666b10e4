/*
 * readfile.h: the one way burstc reads an input file whole.
 *
 * Every file the compiler reads (Burst sources and their imports, IR text,
 * `--profile` tables) goes through ir_file_read(), so all of them get the same
 * guarantees: only regular files are read (a directory, a FIFO, a terminal or
 * /dev/zero is refused up front, without blocking: the file is opened with
 * O_NONBLOCK and checked with fstat), no file larger than a cap is read (the
 * cap is checked before reading and again while reading, in case the file
 * grows), and a read error is reported as one, never taken for the end of
 * the file. This header stands alone (no ir.h), so that passes/'s
 * IR-independent planner library can use it too.
 */
#ifndef BURSTC_IR_READFILE_H
#define BURSTC_IR_READFILE_H

#include <stdbool.h>
#include <stddef.h>

/* The largest input file burstc reads: 256 MiB (docs/burstc.md). */
#define IR_FILE_MAX ((size_t)256 << 20)

/* Reads the regular file at path, at most cap bytes, into a malloc'd buffer
 * with a NUL after the last byte (the file may hold NULs of its own: *len is
 * its length). On failure returns false, sets *data to NULL and writes why
 * into why[nwhy] ("it is a directory", "it is a FIFO, not a regular file", "it is
 * larger than 256 MiB", or the system's message for an open or read error). */
bool ir_file_read(const char *path, size_t cap, char **data, size_t *len, char *why, size_t nwhy);

#endif
