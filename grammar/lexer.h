/*
 * lexer.h: what grammar/burst.l and grammar/burst.y share.
 *
 * The scanner is reentrant: its state lives in a yyscan_t, and everything the
 * actions need (the arena for token text, the file for locations, the diag
 * context for lexical errors) hangs off this struct, the scanner's "extra".
 * The parser also uses it to give syntax errors a hint.
 */
#ifndef BURSTC_GRAMMAR_LEXER_H
#define BURSTC_GRAMMAR_LEXER_H

#include "../frontend/ast.h"

struct fe_lexer {
    arena *arena;
    diag_ctx *diag;
    const src_file *src;
    int line, col;         /* where the next token starts */
    size_t off;            /* ... and its byte offset in src->text */
    src_loc comment_loc;   /* start of the open block comment */
    int nbad;              /* runs of invalid bytes so far */
    int end_line, end_col; /* just after the last token: where EOF is reported */
};

#endif
