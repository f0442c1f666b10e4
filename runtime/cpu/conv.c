/* cpu/conv.c: conv2d forward, backward data and backward weights on oneDNN's direct
 * convolutions. Each layer shape (sizes, stride, padding, dilation, groups, bias) gets one
 * cache entry holding its three primitives, made with the layouts oneDNN prefers ("any":
 * blocked, e.g. nChw16c, on AVX-512), and the reorders between those and the runtime's
 * NCHW tensors. Reorders happen only at the edges: the forward reorders x once and keeps
 * the blocked copy for the backward's weight gradient; the backward reorders dy once for
 * both of its primitives when they agree on the layout; the weights (small) are reordered
 * on every call, since the optimizer changes them between steps; the weight gradient is
 * reordered back with a sum post-op, which gives the accumulation the API promises. The
 * temporaries and oneDNN's scratchpads come from the pool's scratch memory. Shapes that
 * oneDNN cannot run go to the reference (ref_conv.c). */
#include "onednn.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>

typedef struct conv_entry {
    rt_conv_dims d;
    bool bias, fallback; /* fallback: oneDNN has no implementation; ref_conv.c runs it */
    dnnl_memory_desc_t x_md, w_md, y_md; /* the runtime's plain layouts */
    /* forward: y = conv(x, w) + b */
    rt_dnnl_prim fwd, x_in, w_in, y_out; /* x_in, w_in, y_out: reorders (p NULL: none) */
    /* backward data: dx = conv^T(dy, w) */
    bool have_bwd;
    rt_dnnl_prim bwd_data, dy_in, wd_in, dx_out;
    /* backward weights: dw += conv_w(x, dy), db += sum dy */
    rt_dnnl_prim bwd_w, xw_in, dyw_in, dw_out;
    bool x_shared;  /* the weights' src layout is the forward's: the kept copy serves */
    bool dy_shared; /* the weights' diff_dst layout is the backward data's */
} conv_entry;

static void conv_destroy(void *p)
{
    conv_entry *e = p;
    rt_dnnl_prim *all[] = {&e->fwd,   &e->x_in,   &e->w_in,  &e->y_out, &e->bwd_data, &e->dy_in,
                           &e->wd_in, &e->dx_out, &e->bwd_w, &e->xw_in, &e->dyw_in,   &e->dw_out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        rt_dnnl_free(all[i]);
    free(e);
}

/* A reorder from `from` to `to`, or none (p NULL) when they are the same layout. */
static void reorder_if(rt_dnnl_prim *pr, const dnnl_memory_desc_t *from,
                       const dnnl_memory_desc_t *to, const char *op)
{
    memset(pr, 0, sizeof *pr);
    if (!dnnl_memory_desc_equal(from, to))
        rt_dnnl_make_reorder(pr, from, to, false, op);
}

static size_t md_bytes(const dnnl_memory_desc_t *md)
{
    return dnnl_memory_desc_get_size(md);
}

/* The sizes oneDNN's descriptors take (the shared checks have validated them). */
typedef struct conv_geom {
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    dnnl_memory_desc_t x_any, w_any, b_md, y_any;
} conv_geom;

static conv_geom geometry(const conv_entry *e, const rt_conv2d_attrs *a, const char *op)
{
    const rt_conv_dims *d = &e->d;
    conv_geom g = {.strides = {a->sh, a->sw},
                   .dilates = {a->dh - 1, a->dw - 1},
                   /* Symmetric padding: oneDNN's output size, (H + 2p - span)/s + 1 rounded
                    * down, is the runtime's. */
                   .pad_l = {a->ph, a->pw},
                   .pad_r = {a->ph, a->pw}};
    dnnl_dims_t xd = {d->N, d->C, d->H, d->W}, yd = {d->N, d->K, d->OH, d->OW};
    dnnl_dims_t w4 = {d->K, d->Cg, a->kh, a->kw}, w5 = {d->G, d->Kg, d->Cg, a->kh, a->kw};
    dnnl_dims_t bd = {d->K};
    rt_dnnl_ok(dnnl_memory_desc_init_by_tag(&g.x_any, 4, xd, dnnl_f32, dnnl_format_tag_any), op,
               "describing the input");
    rt_dnnl_ok(dnnl_memory_desc_init_by_tag(&g.y_any, 4, yd, dnnl_f32, dnnl_format_tag_any), op,
               "describing the output");
    rt_dnnl_ok(d->G > 1
                   ? dnnl_memory_desc_init_by_tag(&g.w_any, 5, w5, dnnl_f32, dnnl_format_tag_any)
                   : dnnl_memory_desc_init_by_tag(&g.w_any, 4, w4, dnnl_f32, dnnl_format_tag_any),
               op, "describing the weights");
    rt_dnnl_ok(dnnl_memory_desc_init_by_tag(&g.b_md, 1, bd, dnnl_f32, dnnl_a), op,
               "describing the bias");
    return g;
}

/* The entry of this layer shape, with its forward primitive; made on the first call. */
static conv_entry *conv_entry_for(const rt_conv_dims *d, const rt_conv2d_attrs *a, bool bias)
{
    const char *op = "conv2d";
    rt_dnnl_key k = {{1, d->N, d->C, d->H, d->W, d->K, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw,
                      a->dh, a->dw, a->groups, bias}};
    conv_entry *e = rt_dnnl_find(&k);
    if (e)
        return e;
    e = rt_xcalloc(1, sizeof *e, op);
    e->d = *d;
    e->bias = bias;
    rt_dnnl_insert(&k, e, conv_destroy);
    /* oneDNN indexes with int: larger tensors go to the reference. */
    if (d->N * d->C * d->H * d->W > INT32_MAX || d->N * d->K * d->OH * d->OW > INT32_MAX) {
        e->fallback = true;
        return e;
    }
    conv_geom g = geometry(e, a, op);
    e->x_md = rt_dnnl_plain(4, (int64_t[]){d->N, d->C, d->H, d->W});
    e->y_md = rt_dnnl_plain(4, (int64_t[]){d->N, d->K, d->OH, d->OW});
    e->w_md = d->G > 1 ? rt_dnnl_plain(5, (int64_t[]){d->G, d->Kg, d->Cg, a->kh, a->kw})
                       : rt_dnnl_plain(4, (int64_t[]){d->K, d->Cg, a->kh, a->kw});
    dnnl_convolution_desc_t cd;
    rt_dnnl_ok(dnnl_dilated_convolution_forward_desc_init(
                   &cd, dnnl_forward_training, dnnl_convolution_direct, &g.x_any, &g.w_any,
                   bias ? &g.b_md : NULL, &g.y_any, g.strides, g.dilates, g.pad_l, g.pad_r),
               op, "describing the forward convolution");
    if (!rt_dnnl_make(&e->fwd, &cd, NULL, op)) {
        e->fallback = true;
        return e;
    }
    reorder_if(&e->x_in, &e->x_md, rt_dnnl_md(&e->fwd, dnnl_query_src_md), op);
    reorder_if(&e->w_in, &e->w_md, rt_dnnl_md(&e->fwd, dnnl_query_weights_md), op);
    reorder_if(&e->y_out, rt_dnnl_md(&e->fwd, dnnl_query_dst_md), &e->y_md, op);
    return e;
}

/* The backward primitives of an entry; made on the first backward. */
static void conv_make_bwd(conv_entry *e, const rt_conv2d_attrs *a)
{
    const char *op = "conv2d_bwd";
    if (e->have_bwd || e->fallback)
        return;
    conv_geom g = geometry(e, a, op);
    dnnl_convolution_desc_t dd, wd;
    rt_dnnl_ok(dnnl_dilated_convolution_backward_data_desc_init(
                   &dd, dnnl_convolution_direct, &g.x_any, &g.w_any, &g.y_any, g.strides, g.dilates,
                   g.pad_l, g.pad_r),
               op, "describing the backward data convolution");
    rt_dnnl_ok(dnnl_dilated_convolution_backward_weights_desc_init(
                   &wd, dnnl_convolution_direct, &g.x_any, &g.w_any, e->bias ? &g.b_md : NULL,
                   &g.y_any, g.strides, g.dilates, g.pad_l, g.pad_r),
               op, "describing the backward weights convolution");
    if (!rt_dnnl_make(&e->bwd_data, &dd, e->fwd.pd, op) ||
        !rt_dnnl_make(&e->bwd_w, &wd, e->fwd.pd, op)) {
        rt_dnnl_free(&e->bwd_data);
        e->fallback = true;
        return;
    }
    const dnnl_memory_desc_t *dy_d = rt_dnnl_md(&e->bwd_data, dnnl_query_diff_dst_md);
    const dnnl_memory_desc_t *dy_w = rt_dnnl_md(&e->bwd_w, dnnl_query_diff_dst_md);
    const dnnl_memory_desc_t *x_w = rt_dnnl_md(&e->bwd_w, dnnl_query_src_md);
    reorder_if(&e->dy_in, &e->y_md, dy_d, op);
    reorder_if(&e->wd_in, &e->w_md, rt_dnnl_md(&e->bwd_data, dnnl_query_weights_md), op);
    reorder_if(&e->dx_out, rt_dnnl_md(&e->bwd_data, dnnl_query_diff_src_md), &e->x_md, op);
    reorder_if(&e->dyw_in, &e->y_md, dy_w, op);
    reorder_if(&e->xw_in, &e->x_md, x_w, op);
    e->dy_shared = dnnl_memory_desc_equal(dy_d, dy_w);
    e->x_shared = dnnl_memory_desc_equal(rt_dnnl_md(&e->fwd, dnnl_query_src_md), x_w);
    rt_dnnl_make_reorder(&e->dw_out, rt_dnnl_md(&e->bwd_w, dnnl_query_diff_weights_md), &e->w_md,
                         true, op);
    e->have_bwd = true;
}

/* Carves consecutive 64-byte aligned buffers out of one scratch allocation. */
typedef struct carver {
    char *base;
    size_t used;
} carver;

static void *carve(carver *c, size_t bytes)
{
    void *p = c->base + c->used;
    c->used += rt_dnnl_align(bytes);
    return p;
}

void rt_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_conv2d_attrs *a, rt_tensor *y)
{
    const char *op = "conv2d_fwd";
    rt_conv_dims d = rt_conv2d_check(op, x, w, a, y, "output");
    if (b)
        rt_check_f32(b, d.K, op, "bias");
    if (d.N == 0 || d.K == 0 || d.OH * d.OW == 0)
        return;
    conv_entry *e = conv_entry_for(&d, a, b != NULL);
    if (e->fallback || d.C == 0) {
        rt_ref_conv2d_fwd(pool, x, w, b, a, y);
        return;
    }
    const size_t ws = e->w_in.p ? md_bytes(rt_dnnl_md(&e->fwd, dnnl_query_weights_md)) : 0;
    const size_t ys = e->y_out.p ? md_bytes(rt_dnnl_md(&e->fwd, dnnl_query_dst_md)) : 0;
    carver c = {rt_dnnl_scratch(pool, rt_dnnl_align(e->fwd.scratch) + rt_dnnl_align(ws) +
                                          rt_dnnl_align(ys)),
                0};
    void *pad = carve(&c, e->fwd.scratch), *wb = carve(&c, ws), *yb = carve(&c, ys);
    /* The blocked input is kept for the backward's weight gradient. */
    void *xb = x->data;
    if (e->x_in.p) {
        xb = rt_dnnl_keep(e, x->data, md_bytes(rt_dnnl_md(&e->fwd, dnnl_query_src_md)));
        rt_dnnl_run_reorder(&e->x_in, x->data, xb, op);
    }
    if (e->w_in.p)
        rt_dnnl_run_reorder(&e->w_in, w->data, wb, op);
    rt_dnnl_arg args[4] = {{DNNL_ARG_SRC, xb},
                           {DNNL_ARG_WEIGHTS, e->w_in.p ? wb : w->data},
                           {DNNL_ARG_DST, e->y_out.p ? yb : y->data},
                           {DNNL_ARG_BIAS, b ? b->data : NULL}};
    rt_dnnl_run(&e->fwd, b ? 4 : 3, args, pad, op);
    if (e->y_out.p)
        rt_dnnl_run_reorder(&e->y_out, yb, y->data, op);
}

void rt_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                   const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    const char *op = "conv2d_bwd";
    rt_conv_dims d = rt_conv2d_check(op, x, w, a, dy, "output gradient");
    rt_conv2d_bwd_check(op, x, w, &d, dx, dw, db);
    if (!dx && !dw && !db)
        return;
    conv_entry *e = NULL;
    if (d.N > 0 && d.K > 0 && d.C > 0 && d.OH * d.OW > 0) {
        e = conv_entry_for(&d, a, db != NULL);
        conv_make_bwd(e, a);
    }
    if (!e || e->fallback) {
        rt_ref_conv2d_bwd(pool, x, w, dy, a, dx, dw, db);
        return;
    }
    const bool weights = dw || db;
    const size_t pad_b =
        e->bwd_data.scratch > e->bwd_w.scratch ? e->bwd_data.scratch : e->bwd_w.scratch;
    const size_t dys = e->dy_in.p && (dx || e->dy_shared)
                           ? md_bytes(rt_dnnl_md(&e->bwd_data, dnnl_query_diff_dst_md))
                           : 0;
    const size_t dyws = weights && e->dyw_in.p && !(e->dy_shared && dys)
                            ? md_bytes(rt_dnnl_md(&e->bwd_w, dnnl_query_diff_dst_md))
                            : 0;
    const size_t wds =
        dx && e->wd_in.p ? md_bytes(rt_dnnl_md(&e->bwd_data, dnnl_query_weights_md)) : 0;
    const size_t dxs =
        dx && e->dx_out.p ? md_bytes(rt_dnnl_md(&e->bwd_data, dnnl_query_diff_src_md)) : 0;
    /* The input in the weights primitive's layout: the forward's kept copy when the layouts
     * agree and a forward kept one, x itself when that layout is plain, else a reorder. */
    const size_t xbytes = e->xw_in.p ? md_bytes(rt_dnnl_md(&e->bwd_w, dnnl_query_src_md)) : 0;
    void *xw = !e->xw_in.p ? x->data : e->x_shared ? rt_dnnl_kept(e, x->data, xbytes) : NULL;
    const size_t xs = weights && !xw ? xbytes : 0;
    const size_t dws = weights ? md_bytes(rt_dnnl_md(&e->bwd_w, dnnl_query_diff_weights_md)) : 0;
    const size_t dbs = db ? (size_t)d.K * sizeof(float) : 0;
    carver c = {rt_dnnl_scratch(pool, rt_dnnl_align(pad_b) + rt_dnnl_align(dys) +
                                          rt_dnnl_align(dyws) + rt_dnnl_align(wds) +
                                          rt_dnnl_align(dxs) + rt_dnnl_align(xs) +
                                          rt_dnnl_align(dws) + rt_dnnl_align(dbs)),
                0};
    void *pad = carve(&c, pad_b), *dyb = carve(&c, dys), *dywb = carve(&c, dyws);
    void *wdb = carve(&c, wds), *dxb = carve(&c, dxs), *xb = carve(&c, xs);
    void *dwb = carve(&c, dws), *dbb = carve(&c, dbs);
    if (dys)
        rt_dnnl_run_reorder(&e->dy_in, dy->data, dyb, op);
    if (dx) {
        if (wds)
            rt_dnnl_run_reorder(&e->wd_in, w->data, wdb, op);
        rt_dnnl_arg args[3] = {{DNNL_ARG_DIFF_DST, e->dy_in.p ? dyb : dy->data},
                               {DNNL_ARG_WEIGHTS, wds ? wdb : w->data},
                               {DNNL_ARG_DIFF_SRC, dxs ? dxb : dx->data}};
        rt_dnnl_run(&e->bwd_data, 3, args, pad, op);
        if (dxs)
            rt_dnnl_run_reorder(&e->dx_out, dxb, dx->data, op);
    }
    if (!weights)
        return;
    if (!xw) {
        rt_dnnl_run_reorder(&e->xw_in, x->data, xb, op);
        xw = xb;
    }
    void *dyw = dy->data;
    if (e->dyw_in.p) {
        if (!dyws)
            dyw = dyb; /* the backward data's copy: same layout */
        else {
            rt_dnnl_run_reorder(&e->dyw_in, dy->data, dywb, op);
            dyw = dywb;
        }
    }
    rt_dnnl_arg args[4] = {{DNNL_ARG_SRC, xw},
                           {DNNL_ARG_DIFF_DST, dyw},
                           {DNNL_ARG_DIFF_WEIGHTS, dwb},
                           {DNNL_ARG_DIFF_BIAS, dbb}};
    rt_dnnl_run(&e->bwd_w, e->bias ? 4 : 3, args, pad, op);
    if (dw)
        rt_dnnl_run_reorder(&e->dw_out, dwb, dw->data, op);
    if (db) {
        float *acc = rt_f32(db);
        const float *part = dbb;
        for (int64_t k = 0; k < d.K; k++)
            acc[k] += part[k];
    }
}
