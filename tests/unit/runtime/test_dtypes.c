/* test_dtypes.c: 16-bit tensors (RT_BF16, RT_F16) through the shared runtime on the CPU
 * backend: their sizes, the host's float view of them (rt_tensor_write / rt_tensor_read
 * round to nearest even, as the CUDA conversions do), slices and copies by element size,
 * and that this backend, which stores activations in f32 whatever the compute dtype,
 * rejects them in kernels with a message naming the dtype. Every f16 and bf16 value and
 * every midpoint between neighbours is checked against a decoder written here from the
 * formats' definitions. */
#include "check.h"

/* The value of bit pattern h of a 16-bit IEEE-style format with `eb` exponent and `mb`
 * mantissa bits, from the definition: bias 2^(eb-1) - 1, subnormals m 2^(1-bias-mb),
 * normals (2^mb + m) 2^(e-bias-mb), the top exponent inf or NaN. */
static float ieee16_value(uint16_t h, int eb, int mb)
{
    const int emax = (1 << eb) - 1, bias = (1 << (eb - 1)) - 1;
    const int e = (h >> mb) & emax, m = h & ((1 << mb) - 1);
    const float s = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == emax)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexpf((float)m, 1 - bias - mb);
    return s * ldexpf((float)((1 << mb) + m), e - bias - mb);
}

/* f16: 5 exponent bits, 10 mantissa bits. */
static float f16_value(uint16_t h)
{
    return ieee16_value(h, 5, 10);
}

/* bf16: the top half of an f32, 8 exponent bits and 7 mantissa bits. */
static float bf16_value(uint16_t h)
{
    return ieee16_value(h, 8, 7);
}

/* Writes n floats into a fresh 1-D tensor of dtype dt and reads them back. */
static void round_trip(rt_pool *P, rt_dtype dt, const float *in, float *out, int64_t n)
{
    rt_tensor *t = rt_tensor_new(P, dt, 1, (int64_t[]){n});
    rt_tensor_write(t, in);
    rt_tensor_read(t, out);
}

/* Every finite pattern of a 16-bit format survives the round trip; every midpoint
 * between neighbours goes to the one with an even last bit, and one ulp (of f32) either
 * side of it to the nearer one. */
static void test_format(const char *name, rt_dtype dt, float (*value)(uint16_t), float max)
{
    rt_pool *P = rt_pool_new();
    enum { N = 0x10000 };
    float *in = malloc(sizeof(float) * 4 * N), *out = malloc(sizeof(float) * 4 * N);
    float *want = malloc(sizeof(float) * 4 * N);
    int64_t n = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float v = value((uint16_t)h), next = value((uint16_t)(h + 1));
        if (!isfinite(v) || (h & 0x7fff) == 0x7fff)
            continue;
        in[n] = v, want[n++] = v;
        if (!isfinite(next) || h == 0x7fff || fabsf(next) < fabsf(v))
            continue;
        float mid = v + (next - v) / 2; /* exact: a 16-bit format has few mantissa bits */
        in[n] = mid, want[n++] = (h & 1) ? next : v;
        in[n] = nextafterf(mid, v), want[n++] = v;
        in[n] = nextafterf(mid, next), want[n++] = next;
    }
    round_trip(P, dt, in, out, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&out[i], &want[i], sizeof(float)) != 0 && !(out[i] == 0 && want[i] == 0)) {
            if (bad++ < 5)
                CHECK(0, "%s: %.9g read back as %.9g, expected %.9g", name, (double)in[i],
                      (double)out[i], (double)want[i]);
        }
    CHECK(bad == 0, "%s: %lld of %lld values rounded wrong", name, (long long)bad, (long long)n);
    CHECK(n > 60000, "%s: only %lld cases", name, (long long)n);

    /* Past the largest finite value, halfway to the next power: inf, as CUDA's casts. */
    float edge[6] = {max, -max, INFINITY, -INFINITY, NAN, 1e38f}, back[6];
    round_trip(P, dt, edge, back, 6);
    CHECK(back[0] == max && back[1] == -max, "%s: the largest value changed", name);
    CHECK(isinf(back[2]) && back[2] > 0 && isinf(back[3]) && back[3] < 0, "%s: inf", name);
    CHECK(isnan(back[4]), "%s: NaN read back as %g", name, (double)back[4]);
    if (dt == RT_F16)
        CHECK(isinf(back[5]), "%s: 1e38 read back as %g, expected inf", name, (double)back[5]);
    free(in), free(out), free(want);
    rt_pool_free(P);
}

static void test_f16_edges(void)
{
    rt_pool *P = rt_pool_new();
    /* 65520 is halfway between 65504 (odd last bit) and 65536 (inf): even is inf. */
    float in[6] = {65519.996f, 65520.0f,   0x1p-25f, nextafterf(0x1p-25f, 1.0f),
                   0x1p-26f,   -0x1.8p-24f};
    float out[6];
    round_trip(P, RT_F16, in, out, 6);
    CHECK(out[0] == 65504.0f, "f16: 65519.996 read back as %g", (double)out[0]);
    CHECK(isinf(out[1]), "f16: 65520 read back as %g, expected inf", (double)out[1]);
    CHECK(out[2] == 0.0f, "f16: 2^-25 (a tie) read back as %g, expected 0", (double)out[2]);
    CHECK(out[3] == 0x1p-24f, "f16: just above 2^-25 read back as %g", (double)out[3]);
    CHECK(out[4] == 0.0f, "f16: 2^-26 read back as %g", (double)out[4]);
    CHECK(out[5] == -0x1p-23f, "f16: -1.5 * 2^-24 (a tie) read back as %g", (double)out[5]);
    rt_pool_free(P);
}

static void test_layout(void)
{
    CHECK(rt_dtype_size(RT_F32) == 4 && rt_dtype_size(RT_I32) == 4, "4-byte sizes");
    CHECK(rt_dtype_size(RT_BF16) == 2 && rt_dtype_size(RT_F16) == 2, "2-byte sizes");
    rt_pool *P = rt_pool_new();
    rt_tensor *t = rt_tensor_new(P, RT_BF16, 2, (int64_t[]){4, 3});
    float v[12];
    for (int i = 0; i < 12; i++)
        v[i] = (float)(i + 1);
    rt_tensor_write(t, v);
    CHECK(((uint16_t *)t->data)[2] == 0x4040, "bf16 3.0 is stored as 0x%04x, expected 0x4040",
          ((uint16_t *)t->data)[2]);
    rt_tensor *s = rt_tensor_slice(P, t, 1, 3);
    CHECK((char *)s->data - (char *)t->data == 6, "a bf16 slice starts %td bytes in, expected 6",
          (char *)s->data - (char *)t->data);
    float got[6];
    rt_tensor_read(s, got);
    CHECK(got[0] == 4.0f && got[5] == 9.0f, "slice reads %g..%g, expected 4..9", (double)got[0],
          (double)got[5]);
    rt_tensor *c = rt_tensor_new(P, RT_BF16, 2, (int64_t[]){4, 3});
    rt_tensor_copy(c, t);
    float all[12];
    rt_tensor_read(c, all);
    CHECK(all[11] == 12.0f, "a copy of 24 bytes ends with %g, expected 12", (double)all[11]);
    rt_tensor_zero(c);
    rt_tensor_read(c, all);
    CHECK(all[11] == 0.0f && all[0] == 0.0f, "zeroing a bf16 tensor");
    rt_pool_free(P);
}

static void relu_on_bf16(void *ctx)
{
    (void)ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_BF16, 1, (int64_t[]){8});
    rt_tensor *y = rt_tensor_new(P, RT_BF16, 1, (int64_t[]){8});
    rt_relu_fwd(x, y);
}

static void linear_on_f16(void *ctx)
{
    (void)ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F16, 2, (int64_t[]){2, 3});
    rt_tensor *w = rt_tensor_new(P, RT_F32, 2, (int64_t[]){4, 3});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 2, (int64_t[]){2, 4});
    rt_linear_fwd(x, w, NULL, y);
}

/* The CPU backend stores activations in f32 at every compute dtype. */
static void test_cpu_storage(void)
{
    rt_set_compute_dtype(RT_COMPUTE_BF16);
    CHECK(rt_storage_dtype() == RT_F32, "CPU storage with compute bf16 is %d",
          (int)rt_storage_dtype());
    rt_set_compute_dtype(RT_COMPUTE_F32);
    expect_fatal("relu on bf16", relu_on_bf16, NULL, "input has dtype bf16, expected f32");
    expect_fatal("linear on f16", linear_on_f16, NULL, "input has dtype f16, expected f32");
}

int main(void)
{
    test_format("f16", RT_F16, f16_value, 65504.0f);
    test_format("bf16", RT_BF16, bf16_value, 0x1.fep127f);
    test_f16_edges();
    test_layout();
    test_cpu_storage();
    if (check_failures)
        fprintf(stderr, "%d check(s) failed\n", check_failures);
    return check_failures != 0;
}
