/* rng.c: the counter-based random numbers of the runtime. Every random value is a pure
 * function of its keys (seed, and e.g. layer id, parameter index, step, global sample
 * index, element index) through the splitmix64 finaliser, so nothing depends on how
 * many values were drawn before or on which rank draws them: weights are identical on
 * every rank that holds a layer, dropout masks and synthetic samples are identical
 * whichever rank computes them, and checkpoints need no RNG stream state. */
#include "internal.h"

#include <math.h>

uint64_t rt_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t key4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    return rt_hash64(rt_hash64(rt_hash64(rt_hash64(seed) ^ a) ^ b) ^ c);
}

static inline float to_unit(uint64_t h)
{
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

float rt_rand_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return to_unit(rt_hash64(key4(seed, a, b, c) ^ d));
}

int rt_layer_key(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return (int)(h & 0x7fffffffu);
}

void rt_init_uniform(rt_tensor *t, float bound, uint64_t seed, int layer_id, int param_index)
{
    rt_check(t, RT_F32, -1, "init_uniform", "tensor");
    rt_progress_tick();
    uint64_t k = key4(seed, 0x1417, (uint64_t)layer_id, (uint64_t)param_index);
    float *x = rt_host_view(t, false, "init_uniform");
    for (int64_t i = 0; i < t->numel; i++)
        x[i] = (2.0f * to_unit(rt_hash64(k ^ (uint64_t)i)) - 1.0f) * bound;
    rt_host_done(t, x, true, "init_uniform");
}

void rt_init_normal(rt_tensor *t, float mean, float std, uint64_t seed, int layer_id,
                    int param_index)
{
    rt_check(t, RT_F32, -1, "init_normal", "tensor");
    rt_progress_tick();
    uint64_t k = key4(seed, 0x2a2b, (uint64_t)layer_id, (uint64_t)param_index);
    float *x = rt_host_view(t, false, "init_normal");
    for (int64_t i = 0; i < t->numel; i++) {
        /* Box-Muller on two independent counter draws. */
        uint64_t h = rt_hash64(k ^ (uint64_t)i);
        double u1 = ((double)(h >> 11) + 1.0) * (1.0 / 9007199254740993.0);
        double u2 = (double)(rt_hash64(h) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = mean + std * (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    rt_host_done(t, x, true, "init_normal");
}

void rt_init_const(rt_tensor *t, float value)
{
    rt_check(t, RT_F32, -1, "init_const", "tensor");
    rt_progress_tick();
    float *x = rt_host_view(t, false, "init_const");
    for (int64_t i = 0; i < t->numel; i++)
        x[i] = value;
    rt_host_done(t, x, true, "init_const");
}

void rt_init_kaiming_uniform(rt_tensor *t, int64_t fan_in, uint64_t seed, int layer_id,
                             int param_index)
{
    if (fan_in <= 0)
        rt_fatal("init_kaiming_uniform", "fan_in must be positive, got %lld", (long long)fan_in);
    rt_init_uniform(t, 1.0f / sqrtf((float)fan_in), seed, layer_id, param_index);
}
