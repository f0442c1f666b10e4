/*
 * burst.y: the grammar of the Burst language (docs/language.md).
 *
 * A pure, reentrant LALR(1) parser with locations: it reads the tokens of
 * grammar/burst.l and builds the syntax tree of frontend/ast.h for one file;
 * the front end does everything else (imports, names, expansion, lowering).
 * Syntax errors are reported with the expected tokens and, where a common
 * slip is recognisable, a hint; `error` rules at the item, statement and
 * field level resynchronise so that every error of a file is reported.
 * Lists are built backwards (left recursion, prepend) and reversed once.
 */
%define api.pure full
%define api.prefix {burst_}
%define api.location.type {src_loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0

%code requires {
#include "frontend/ast.h"
typedef void *yyscan_t;
typedef struct fe_parser {
	arena *arena;
	diag_ctx *diag;
	const src_file *src;
	fe_item *items;
	bool too_deep; /* a nesting error was reported: one is enough */
} fe_parser;
}

%code provides {
int burst_lex(BURST_STYPE *lval, BURST_LTYPE *lloc, yyscan_t scanner);
}

%code {
#include <string.h>
#include "lexer.h"

/* A rule's location is its first symbol's; an empty rule's is the end of
 * what precedes it. */
#define YYLLOC_DEFAULT(Cur, Rhs, N) \
	do { (Cur) = (N) ? YYRHSLOC(Rhs, 1) : YYRHSLOC(Rhs, 0); } while (0)

#define NEW(T) ((T *)arena_alloc(ps->arena, sizeof(T)))

static fe_expr *fe_mk_expr(fe_parser *ps, fe_expr_kind kind, src_loc loc)
{
	fe_expr *e = NEW(fe_expr);
	e->kind = kind;
	e->loc = loc;
	return e;
}

/* Keeps every walk over the tree bounded (FE_MAX_NEST): a node nested too
 * deeply is reported, once per file, and replaced by an EX_ERROR leaf. */
static fe_expr *fe_nested(fe_parser *ps, fe_expr *e, int nest)
{
	e->nest = nest;
	if (nest <= FE_MAX_NEST)
		return e;
	if (!ps->too_deep)
		diag_error(ps->diag, e->loc,
			   "expression nests more than %d levels deep (calls, lists, '-' and "
			   "parenthesised right operands)", FE_MAX_NEST);
	ps->too_deep = true;
	fe_expr *err = fe_mk_expr(ps, EX_ERROR, e->loc);
	return err;
}

static int fe_max(int a, int b)
{
	return a > b ? a : b;
}

/* A left operand does not nest: walks follow chains like `1 + 2 + 3` along
 * their left spine in a loop. */
static fe_expr *fe_mk_binary(fe_parser *ps, int op, fe_expr *l, fe_expr *r, src_loc loc)
{
	fe_expr *e = fe_mk_expr(ps, EX_BINARY, loc);
	e->op = op;
	e->lhs = l;
	e->rhs = r;
	return fe_nested(ps, e, fe_max(l->nest, r->nest + 1));
}

/* A loop or a block whose body nests too deeply is reported and dropped. */
static bool fe_stmt_nest_ok(fe_parser *ps, const fe_stmt *body, src_loc loc, int *nest)
{
	int n = 0;
	for (const fe_stmt *s = body; s; s = s->next)
		n = fe_max(n, s->nest);
	*nest = n + 1;
	if (*nest <= FE_MAX_STMT_NEST)
		return true;
	if (!ps->too_deep)
		diag_error(ps->diag, loc, "loops and blocks nest more than %d levels deep", FE_MAX_STMT_NEST);
	ps->too_deep = true;
	return false;
}

static fe_stmt *fe_mk_stmt(fe_parser *ps, fe_stmt_kind kind, src_loc loc)
{
	fe_stmt *s = NEW(fe_stmt);
	s->kind = kind;
	s->loc = loc;
	return s;
}

static fe_item *fe_mk_item(fe_parser *ps, fe_item_kind kind, src_loc loc)
{
	fe_item *it = NEW(fe_item);
	it->kind = kind;
	it->loc = loc;
	return it;
}

/* Reversal of the backwards-built lists, one per node type. */
#define FE_REVERSE(T, name)                       \
	static T *name(T *l)                      \
	{                                         \
		T *out = NULL;                    \
		while (l) {                       \
			T *next = l->next;        \
			l->next = out;            \
			out = l;                  \
			l = next;                 \
		}                                 \
		return out;                       \
	}
FE_REVERSE(fe_expr, fe_rev_expr)
FE_REVERSE(fe_arg, fe_rev_arg)
FE_REVERSE(fe_stmt, fe_rev_stmt)
FE_REVERSE(fe_param, fe_rev_param)
FE_REVERSE(fe_field, fe_rev_field)
FE_REVERSE(fe_item, fe_rev_item)
FE_REVERSE(fe_wmap, fe_rev_wmap)

/* Bison's own messages: only "memory exhausted", when nesting passes
 * YYMAXDEPTH. Syntax errors go through yyreport_syntax_error. */
static void burst_error(src_loc *loc, yyscan_t scanner, fe_parser *ps, const char *msg)
{
	(void)scanner;
	if (strcmp(msg, "memory exhausted") == 0)
		msg = "nesting is too deep for the parser";
	diag_error(ps->diag, *loc, "%s", msg);
}
}

%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {fe_parser *ps}

%union {
	const char *s;
	fe_expr *e;
	fe_arg *a;
	fe_stmt *st;
	fe_param *p;
	fe_block *b;
	fe_field *f;
	fe_item *it;
	fe_wmap *w;
}

%token MODEL "'model'" GPU "'gpu'" CLUSTER "'cluster'" JOB "'job'"
%token IMPORT "'import'" INPUT "'input'" LET "'let'" BLOCK "'block'"
%token FOR "'for'" IN "'in'" RETURN "'return'" TRUE "'true'" FALSE "'false'"
%token DOTDOT "'..'"
%token <s> ID "identifier"
%token <s> STRING "string"
%token <e> NUMBER "number"

%type <it> items item
%type <st> stmts stmt
%type <b> block
%type <p> params paramlist param
%type <f> fields field
%type <e> expr exprs exprlist
%type <a> args arglist arg
%type <s> key
%type <w> wmaps wmap

%nonassoc '@'
%left '+' '-'
%left '*' '/' '%'
%precedence UMINUS

%%

file:
	items                  { ps->items = fe_rev_item($1); }
	;

/* items: item* (an error skips to the next item) */
items:
	%empty                 { $$ = NULL; }
	| items item           { $$ = $1; if ($2) { $2->next = $1; $$ = $2; } }
	| items error          { $$ = $1; }
	;

item:
	/* import "path" */
	IMPORT STRING          { $$ = fe_mk_item(ps, IT_IMPORT, @1); $$->path = $2; }
	/* model NAME { stmt* } */
	| MODEL ID '{' stmts '}' {
		$$ = fe_mk_item(ps, IT_MODEL, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->body = fe_rev_stmt($4);
	}
	/* gpu NAME { field* } (and cluster, job) */
	| GPU ID '{' fields '}' {
		$$ = fe_mk_item(ps, IT_GPU, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->fields = fe_rev_field($4);
	}
	| CLUSTER ID '{' fields '}' {
		$$ = fe_mk_item(ps, IT_CLUSTER, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->fields = fe_rev_field($4);
	}
	| JOB ID '{' fields '}' {
		$$ = fe_mk_item(ps, IT_JOB, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->fields = fe_rev_field($4);
	}
	| block                {
		$$ = NULL;
		if ($1->nest <= FE_MAX_STMT_NEST) {
			$$ = fe_mk_item(ps, IT_BLOCK, @1);
			$$->block = $1;
			$$->name = $1->name;
		}
	}
	/* let NAME = expr */
	| LET ID '=' expr {
		$$ = fe_mk_item(ps, IT_LET, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->value = $4;
	}
	| ';'                  { $$ = NULL; }
	;

/* stmts: stmt* (an error skips to the next statement) */
stmts:
	%empty                 { $$ = NULL; }
	| stmts stmt           { $$ = $1; if ($2) { $2->next = $1; $$ = $2; } }
	| stmts error          { $$ = $1; }
	;

stmt:
	/* input NAME : ELEM [ dims ] */
	INPUT ID ':' ID '[' exprs ']' {
		$$ = fe_mk_stmt(ps, ST_INPUT, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->elem = $4;
		$$->elem_loc = @4;
		$$->dims = $6;
	}
	/* let NAME = expr */
	| LET ID '=' expr {
		$$ = fe_mk_stmt(ps, ST_LET, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->value = $4;
	}
	/* NAME = expr */
	| ID '=' expr {
		$$ = fe_mk_stmt(ps, ST_ASSIGN, @1);
		$$->name = $1;
		$$->name_loc = @1;
		$$->value = $3;
	}
	/* NAME = <error>: the name is still bound, so its uses do not cascade */
	| ID '=' error {
		$$ = fe_mk_stmt(ps, ST_ASSIGN, @1);
		$$->name = $1;
		$$->name_loc = @1;
	}
	/* for NAME in expr .. expr { stmt* } */
	| FOR ID IN expr DOTDOT expr '{' stmts '}' {
		$$ = fe_mk_stmt(ps, ST_FOR, @1);
		$$->name = $2;
		$$->name_loc = @2;
		$$->lo = $4;
		$$->hi = $6;
		$$->body = fe_rev_stmt($8);
		if (!fe_stmt_nest_ok(ps, $$->body, @1, &$$->nest))
			$$ = NULL;
	}
	| block                {
		$$ = NULL;
		if ($1->nest <= FE_MAX_STMT_NEST) {
			$$ = fe_mk_stmt(ps, ST_BLOCK, @1);
			$$->block = $1;
			$$->name = $1->name;
			$$->nest = $1->nest;
		}
	}
	/* weights { (STRING = STRING ','?)* }: `weights` is no keyword, so a
	 * layer may still be called that */
	| ID '{' wmaps '}'     {
		$$ = NULL;
		if (strcmp($1, "weights") != 0)
			diag_error(ps->diag, @1, "unknown section '%s' in a model (the one section is 'weights')", $1);
		else {
			$$ = fe_mk_stmt(ps, ST_WEIGHTS, @1);
			$$->wmaps = fe_rev_wmap($3);
		}
	}
	/* return expr */
	| RETURN expr          { $$ = fe_mk_stmt(ps, ST_RETURN, @1); $$->value = $2; }
	| ';'                  { $$ = NULL; }
	;

/* block NAME ( params ) { stmt* }  |  block NAME ( inputs ; params ) { stmt* } */
block:
	BLOCK ID '(' params ')' '{' stmts '}' {
		$$ = NEW(fe_block);
		$$->name = $2;
		$$->loc = @2;
		$$->params = fe_rev_param($4);
		$$->body = fe_rev_stmt($7);
		if (!fe_stmt_nest_ok(ps, $$->body, @1, &$$->nest))
			$$->nest = FE_MAX_STMT_NEST + 1;
	}
	| BLOCK ID '(' params ';' params ')' '{' stmts '}' {
		$$ = NEW(fe_block);
		$$->name = $2;
		$$->loc = @2;
		$$->has_inputs = true;
		fe_param *in = fe_rev_param($4);
		for (fe_param *p = in; p; p = p->next)
			p->is_input = true;
		fe_param *rest = fe_rev_param($6);
		if (in) {
			fe_param *last = in;
			while (last->next)
				last = last->next;
			last->next = rest;
			$$->params = in;
		} else {
			$$->params = rest;
		}
		$$->body = fe_rev_stmt($9);
		if (!fe_stmt_nest_ok(ps, $$->body, @1, &$$->nest))
			$$->nest = FE_MAX_STMT_NEST + 1;
	}
	;

params:
	%empty                 { $$ = NULL; }
	| paramlist            { $$ = $1; }
	;

paramlist:
	param                  { $$ = $1; }
	| paramlist ',' param  { $3->next = $1; $$ = $3; }
	;

/* param: NAME | NAME = expr */
param:
	ID                     { $$ = NEW(fe_param); $$->name = $1; $$->loc = @1; }
	| ID '=' expr          { $$ = NEW(fe_param); $$->name = $1; $$->loc = @1; $$->dflt = $3; }
	;

/* wmaps: (wmap ','?)* */
wmaps:
	%empty                 { $$ = NULL; }
	| wmaps wmap           { $2->next = $1; $$ = $2; }
	| wmaps ','            { $$ = $1; }
	| wmaps error          { $$ = $1; }
	;

/* wmap: STRING = STRING, a tensor's name and the parameter it starts */
wmap:
	STRING '=' STRING      {
		$$ = NEW(fe_wmap);
		$$->source = $1;
		$$->loc = @1;
		$$->target = $3;
		$$->target_loc = @3;
	}
	;

/* fields: (field ','?)* */
fields:
	%empty                 { $$ = NULL; }
	| fields field         { $2->next = $1; $$ = $2; }
	| fields ','           { $$ = $1; }
	| fields error         { $$ = $1; }
	;

/* field: KEY = expr | KEY SUB = expr */
field:
	key '=' expr           { $$ = NEW(fe_field); $$->key = $1; $$->value = $3; $$->loc = @1; }
	| key ID '=' expr      { $$ = NEW(fe_field); $$->key = $1; $$->sub = $2; $$->value = $4; $$->loc = @1; }
	;

/* Keywords that name things are field keys too: `gpu = a100`. */
key:
	ID                     { $$ = $1; }
	| MODEL                { $$ = "model"; }
	| GPU                  { $$ = "gpu"; }
	| CLUSTER              { $$ = "cluster"; }
	| JOB                  { $$ = "job"; }
	| INPUT                { $$ = "input"; }
	;

exprs:
	%empty                 { $$ = NULL; }
	| exprlist             { $$ = fe_rev_expr($1); }
	| exprlist ','         { $$ = fe_rev_expr($1); }
	;

exprlist:
	expr                   { $$ = $1; }
	| exprlist ',' expr    { $3->next = $1; $$ = $3; }
	;

args:
	%empty                 { $$ = NULL; }
	| arglist              { $$ = fe_rev_arg($1); }
	| arglist ','          { $$ = fe_rev_arg($1); }
	;

arglist:
	arg                    { $$ = $1; }
	| arglist ',' arg      { $3->next = $1; $$ = $3; }
	;

/* arg: expr | KEY = expr */
arg:
	expr                   { $$ = NEW(fe_arg); $$->value = $1; $$->loc = @1; }
	| ID '=' expr          { $$ = NEW(fe_arg); $$->key = $1; $$->value = $3; $$->loc = @1; }
	;

expr:
	expr '+' expr          { $$ = fe_mk_binary(ps, '+', $1, $3, @2); }
	| expr '-' expr        { $$ = fe_mk_binary(ps, '-', $1, $3, @2); }
	| expr '*' expr        { $$ = fe_mk_binary(ps, '*', $1, $3, @2); }
	| expr '/' expr        { $$ = fe_mk_binary(ps, '/', $1, $3, @2); }
	| expr '%' expr        { $$ = fe_mk_binary(ps, '%', $1, $3, @2); }
	| expr '@' expr        { $$ = fe_mk_binary(ps, '@', $1, $3, @2); }
	| '-' expr %prec UMINUS {
		$$ = fe_mk_expr(ps, EX_NEG, @1);
		$$->lhs = $2;
		$$ = fe_nested(ps, $$, $2->nest + 1);
	}
	| '(' expr ')'         { $$ = $2; }
	| NUMBER               { $$ = $1; }
	| STRING               { $$ = fe_mk_expr(ps, EX_STR, @1); $$->s = $1; }
	| TRUE                 { $$ = fe_mk_expr(ps, EX_BOOL, @1); $$->i = 1; }
	| FALSE                { $$ = fe_mk_expr(ps, EX_BOOL, @1); $$->i = 0; }
	| ID                   { $$ = fe_mk_expr(ps, EX_NAME, @1); $$->s = $1; }
	| IN                   { $$ = fe_mk_expr(ps, EX_NAME, @1); $$->s = "in"; }
	/* NAME ( args ) */
	| ID '(' args ')'      {
		$$ = fe_mk_expr(ps, EX_CALL, @1);
		$$->s = $1;
		$$->args = $3;
		int n = 0;
		for (const fe_arg *a = $3; a; a = a->next)
			n = fe_max(n, a->value->nest);
		$$ = fe_nested(ps, $$, n + 1);
	}
	/* [ expr, ... ] */
	| '[' exprs ']'        {
		$$ = fe_mk_expr(ps, EX_LIST, @1);
		$$->items = $2;
		int n = 0;
		for (const fe_expr *i = $2; i; i = i->next)
			n = fe_max(n, i->nest);
		$$ = fe_nested(ps, $$, n + 1);
	}
	;

%%

/* The text of the token at loc, for messages: an identifier or a number is
 * quoted from the source. */
static const char *fe_token_text(fe_parser *ps, src_loc loc, size_t *len)
{
	size_t n;
	const char *t = src_line(ps->src, loc.line, &n);
	size_t off = (size_t)(loc.col - 1);
	if (!t || off >= n) {
		*len = 0;
		return "";
	}
	size_t l = 0;
	while (off + l < n && l < 40 && !(t[off + l] == '.' && off + l + 1 < n && t[off + l + 1] == '.') &&
	       (t[off + l] == '_' || t[off + l] == '.' || t[off + l] == '/' ||
		(t[off + l] >= '0' && t[off + l] <= '9') ||
		(t[off + l] >= 'a' && t[off + l] <= 'z') || (t[off + l] >= 'A' && t[off + l] <= 'Z')))
		l++;
	*len = l;
	return t + off;
}

/* The identifier that ends right before loc on the same line, if any. */
static const char *fe_prev_ident(fe_parser *ps, src_loc loc, size_t *len)
{
	size_t n;
	const char *t = src_line(ps->src, loc.line, &n);
	size_t start = 0, end = (size_t)(loc.col - 1);
	if (!t || end > n)
		return NULL;
	while (end > start && (t[end - 1] == ' ' || t[end - 1] == '\t'))
		end--;
	size_t b = end;
	while (b > start && (t[b - 1] == '_' || (t[b - 1] >= '0' && t[b - 1] <= '9') ||
			     (t[b - 1] >= 'a' && t[b - 1] <= 'z') || (t[b - 1] >= 'A' && t[b - 1] <= 'Z')))
		b--;
	if (b == end || (t[b] >= '0' && t[b] <= '9'))
		return NULL;
	*len = end - b;
	return t + b;
}

/* Names tokens the way a message quotes them: 'model', identifier 'x'. */
static const char *fe_symbol_desc(fe_parser *ps, yysymbol_kind_t sym, src_loc loc, bool quote)
{
	const char *name = yysymbol_name(sym);
	size_t len;
	const char *text;
	switch (sym) {
	case YYSYMBOL_YYEOF:
		return "end of file";
	case YYSYMBOL_ID:
	case YYSYMBOL_NUMBER:
		text = fe_token_text(ps, loc, &len);
		if (len && quote)
			return arena_printf(ps->arena, "%s '%.*s'", sym == YYSYMBOL_ID ? "identifier" : "number",
					    (int)len, text);
		break;
	default:
		break;
	}
	size_t n = strlen(name);
	if (n >= 2 && name[0] == '"' && name[n - 1] == '"')
		return arena_strndup(ps->arena, name + 1, n - 2);
	return name;
}

/* "unexpected X; expected A, B or C"; operators are left out of the list
 * (they are expected after almost every expression), and a missing '='
 * after a name gets its own message. */
static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, fe_parser *ps)
{
	(void)scanner;
	src_loc loc = *yypcontext_location(ctx);
	yysymbol_kind_t tok = yypcontext_token(ctx);
	if (ps->diag->max_errors && ps->diag->nerrors >= ps->diag->max_errors) {
		diag_error(ps->diag, loc, "syntax error"); /* counted, not shown */
		return 0;
	}
	yysymbol_kind_t exp[YYNTOKENS];
	int n = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
	const char *what = fe_symbol_desc(ps, tok, loc, true);
	if (tok == YYSYMBOL_YYEMPTY || tok == YYSYMBOL_YYUNDEF)
		what = "token";

	bool want_eq = false;
	const char *list[YYNTOKENS];
	int nlist = 0;
	for (int i = 0; i < n; i++) {
		const char *nm = yysymbol_name(exp[i]);
		if (strlen(nm) == 3 && nm[0] == '\'' && strchr("@+-*/%", nm[1]))
			continue;
		if (strcmp(nm, "'='") == 0)
			want_eq = true;
		list[nlist++] = fe_symbol_desc(ps, exp[i], loc, false);
	}
	/* After a statement's name, '=' is what was meant: a section
	 * (`weights {`) is rare enough to leave out of the hint. */
	for (int i = 0; want_eq && i < nlist; i++)
		if (strcmp(list[i], "'{'") == 0) {
			memmove(list + i, list + i + 1, sizeof *list * (size_t)(nlist - i - 1));
			nlist--;
			break;
		}
	size_t plen;
	const char *prev = fe_prev_ident(ps, loc, &plen);
	if (want_eq && prev &&
	    (tok == YYSYMBOL_NUMBER || tok == YYSYMBOL_STRING || tok == YYSYMBOL_TRUE ||
	     tok == YYSYMBOL_FALSE || strcmp(yysymbol_name(tok), "'['") == 0)) {
		diag_error(ps->diag, loc, "missing '=' after '%.*s'", (int)plen, prev);
		return 0;
	}
	/* A closing bracket forgotten at the end of the file. */
	if (tok == YYSYMBOL_YYEOF)
		for (int i = 0; i < nlist; i++)
			if (strcmp(list[i], "'}'") == 0 || strcmp(list[i], "')'") == 0 || strcmp(list[i], "']'") == 0) {
				diag_error(ps->diag, loc, "unexpected end of file; missing %s", list[i]);
				return 0;
			}
	/* A closing bracket forgotten at the end of a line. */
	for (int i = 0; i < nlist; i++) {
		if (strcmp(list[i], "')'") != 0 && strcmp(list[i], "']'") != 0)
			continue;
		size_t n;
		const char *t = src_line(ps->src, loc.line, &n);
		bool first = t != NULL;
		for (size_t off = 0; t && off + 1 < (size_t)loc.col && off < n; off++)
			first &= t[off] == ' ' || t[off] == '\t';
		if (first && loc.line > 1) {
			diag_error(ps->diag, loc, "unexpected %s; missing %s at the end of the previous line?", what, list[i]);
			return 0;
		}
	}
	if (nlist == 0 || nlist > 6) {
		diag_error(ps->diag, loc, "unexpected %s", what);
		return 0;
	}
	char *msg = arena_printf(ps->arena, "unexpected %s; expected ", what);
	for (int i = 0; i < nlist; i++)
		msg = arena_printf(ps->arena, "%s%s%s", msg, i == 0 ? "" : i == nlist - 1 ? " or " : ", ", list[i]);
	diag_error(ps->diag, loc, "%s", msg);
	return 0;
}

/* Named in burst.l (flex writes these for a reentrant scanner). */
int burst_lex_init_extra(struct fe_lexer *extra, yyscan_t *scanner);
int burst_lex_destroy(yyscan_t scanner);
void *burst__scan_bytes(const char *bytes, int len, yyscan_t scanner);

fe_file *fe_parse(arena *a, const src_file *src, diag_ctx *d)
{
	fe_file *f = arena_alloc(a, sizeof *f);
	f->src = src;
	if (src->len > (size_t)1 << 30) {
		diag_error(d, (src_loc){src, 1, 1}, "file is too large (over 1 GiB)");
		return f;
	}
	struct fe_lexer lx = {.arena = a, .diag = d, .src = src, .line = 1, .col = 1};
	fe_parser ps = {.arena = a, .diag = d, .src = src};
	yyscan_t scanner;
	if (burst_lex_init_extra(&lx, &scanner) != 0)
		ice("cannot start the scanner");
	burst__scan_bytes(src->text, (int)src->len, scanner);
	burst_parse(scanner, &ps);
	burst_lex_destroy(scanner);
	f->items = ps.items;
	return f;
}
