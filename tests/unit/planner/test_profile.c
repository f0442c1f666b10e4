/*
 * test_profile.c: the measured-profile reader (profile.c) and its use in the
 * cost model: parsing, error messages with line numbers, matching by op,
 * attributes (any key order) and shape, interpolation between batch sizes.
 * Given the folder of the DeepPool A100 profiles as argv[1] (the copy vendored
 * in data/profiles/deeppool-a100), also reads all five files there without an
 * error; a missing folder or file fails the test.
 */
#include <dirent.h>
#include <string.h>

#include "check.h"
#include "plan.h"

static const char *good =
    "                   #config  avg(ms)    p50     p90     p99\n"
    "  conv2d{\"in_channels\":3,\"kernel_size\":3,\"out_channels\":64,\"padding\":1,\"stride\":1}[4][3,224,224]  2.0  2.0 2.1 2.2\n"
    "linear{\"bias\":true,\"in_features\":4096,\"out_features\":1000}[4]4096   0.050\n"
    "SUM(avg)  2.050\n"
    "\n"
    "  conv2d{\"in_channels\":3,\"kernel_size\":3,\"out_channels\":64,\"padding\":1,\"stride\":1}[8][3,224,224]  3.0\n"
    "ResnetBottleneck{\"downsampleParams\":[[64,256,1],256],\"inplanes\":64}[2][64,56,56] 1.5\n"
    "sum:    3.02\n";

static const char *bad = "conv2d{\"a\":1}[4][3,224,224]  2.0\n"
                         "conv2d{\"a\":1[4][3,224,224]  2.0\n"
                         "conv2d{\"a\":1}[x][3,224,224]  2.0\n"
                         "conv2d{\"a\":1}[4][3,224  2.0\n"
                         "conv2d{\"a\":1}[4][3,224,224]\n"
                         "conv2d{\"a\":1}[4][3,224,224]  fast\n"
                         "{\"a\":1}[4][3]  1\n"
                         "conv2d{\"a\":1}[4][3]  1 2 3 4 5\n";

static void test_parse(void)
{
    plan_profile pr = {0};
    FILE *err = tmpfile();
    CHECK(plan_profile_parse(&pr, "good.txt", good, err));
    CHECK(ftell(err) == 0);
    fclose(err);
    CHECK(pr.n == 3);
    int64_t shape[3] = {3, 224, 224};
    const plan_profile_entry *e = plan_profile_find(
        &pr, "conv2d",
        "{\"stride\":1, \"padding\":1,\"out_channels\":64,\"kernel_size\":3,\"in_channels\":3}",
        shape, 3);
    CHECK(e != NULL);
    if (e) {
        CHECK(e->timing.n == 2);
        CHECK_NEAR(plan_timing_at(&e->timing, 4), 2.0e-3, 1e-12);
        CHECK_NEAR(plan_timing_at(&e->timing, 6), 2.5e-3, 1e-12);  /* interpolated */
        CHECK_NEAR(plan_timing_at(&e->timing, 16), 6.0e-3, 1e-12); /* proportional beyond */
        CHECK_NEAR(plan_timing_at(&e->timing, 1), 2.0e-3, 1e-12);  /* the smallest below */
        int64_t v;
        CHECK(plan_profile_attr(e, "out_channels", &v) && v == 64);
        CHECK(!plan_profile_attr(e, "groups", &v));
    }
    int64_t s1[1] = {4096};
    e = plan_profile_find(&pr, "linear",
                          "{\"in_features\":4096,\"out_features\":1000,\"bias\":true}", s1, 1);
    CHECK(e != NULL);
    if (e) {
        int64_t v = 0;
        CHECK(plan_profile_attr(e, "bias", &v) && v == 1);
    }
    int64_t s2[3] = {3, 224, 225};
    CHECK(plan_profile_find(&pr, "conv2d", "{\"in_channels\":3}", s2, 3) == NULL);
    int64_t s3[3] = {64, 56, 56};
    CHECK(plan_profile_find(&pr, "ResnetBottleneck",
                            "{\"inplanes\":64,\"downsampleParams\":[[64,256,1],256]}", s3, 3));
    plan_profile_free(&pr);

    /* Errors: every malformed line, with its number, exactly. */
    char buf[4096] = {0};
    err = tmpfile();
    CHECK(!plan_profile_parse(&pr, "bad.txt", bad, err));
    rewind(err);
    size_t n = fread(buf, 1, sizeof buf - 1, err);
    buf[n] = 0;
    fclose(err);
    const char *want = "bad.txt:2: error: unterminated attribute object\n"
                       "bad.txt:3: error: batch size must be a positive integer in brackets\n"
                       "bad.txt:4: error: expected ',' or ']' in the input shape\n"
                       "bad.txt:5: error: missing the average time (ms)\n"
                       "bad.txt:6: error: expected a time in milliseconds\n"
                       "bad.txt:7: error: expected an op name\n"
                       "bad.txt:8: error: too many columns (expected avg_ms [p50 p90 p99])\n";
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "got:\n%swant:\n%s", buf, want);
        check_failures++;
    }
    plan_profile_free(&pr);

    /* A measured table replaces the analytic time, split fwd:bwd as the model's. */
    plan_profile_parse(&pr, "good.txt", good, NULL);
    int64_t shape2[3] = {3, 224, 224};
    e = plan_profile_find(
        &pr, "conv2d",
        "{\"in_channels\":3,\"kernel_size\":3,\"out_channels\":64,\"padding\":1,\"stride\":1}",
        shape2, 3);
    plan_problem p = {.cluster = {.gpus = 1,
                                  .gpus_per_node = 1,
                                  .peak_flops = 1e14,
                                  .mem_bw = 1e12,
                                  .launch = 5e-6},
                      .batch = 8,
                      .dtype_bytes = 4};
    plan_layer l = {
        .name = "c", .cls = PC_CONV, .fwd_flops = 1e8, .bwd_flops = 2e8, .measured = &e->timing};
    double f, b;
    plan_layer_time(&p, &l, 8, &f, &b);
    CHECK_NEAR(f + b, 3e-3, 1e-12);
    CHECK(f > 0 && f < b);
    plan_profile_free(&pr);

    CHECK(!plan_profile_read(&pr, "/nonexistent/profile.txt", NULL));
}

static void test_shared(const char *dir)
{
    DIR *d = dir ? opendir(dir) : NULL;
    CHECK(d != NULL); /* the vendored profiles are part of the repository */
    if (!d) {
        fprintf(stderr, "test_profile: cannot open the DeepPool profiles at %s\n",
                dir ? dir : "(no folder given)");
        return;
    }
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 4, ".txt") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        plan_profile pr = {0};
        CHECK(plan_profile_read(&pr, path, stderr));
        CHECK(pr.n > 0);
        plan_profile_free(&pr);
        files++;
    }
    closedir(d);
    CHECK(files == 5);
    printf("test_profile: read %d DeepPool profiles\n", files);
}

/* `layer` lines (burstc profile): keyed by name, forward and backward apart,
 * each interpolated on its own; the spread columns are optional. */
static void test_layer_lines(void)
{
    static const char *text =
        "layer{\"name\":\"conv1\",\"op\":\"conv2d\"}[16][1,28,28]  3.0 5.0 0.1 0.2\n"
        "layer{\"op\":\"conv2d\", \"name\":\"conv1\"}[8][1,28,28]  1.0 3.0\n"
        "layer{\"name\":\"loss\",\"op\":\"cross_entropy\"}[8][]  0.5 0.25\n";
    plan_profile pr = {0};
    FILE *err = tmpfile();
    CHECK(plan_profile_parse(&pr, "l.txt", text, err));
    CHECK(ftell(err) == 0);
    fclose(err);
    CHECK(pr.n == 2);
    const plan_profile_entry *e = plan_profile_find_layer(&pr, "conv1");
    CHECK(e && strcmp(e->layer_op, "conv2d") == 0 && e->nshape == 3 && e->line == 1);
    CHECK(plan_profile_find_layer(&pr, "conv") == NULL);
    const plan_profile_entry *loss = plan_profile_find_layer(&pr, "loss");
    CHECK(loss && loss->nshape == 0);
    if (e) {
        plan_problem p = {.cluster = {.gpus = 1, .gpus_per_node = 1, .peak_flops = 1e14},
                          .batch = 8,
                          .dtype_bytes = 4};
        plan_layer l = {.name = "conv1", .cls = PC_CONV, .fwd_flops = 1e8, .measured = &e->timing};
        double f, b;
        plan_layer_time(&p, &l, 8, &f, &b);
        CHECK_NEAR(f, 1e-3, 1e-12);
        CHECK_NEAR(b, 3e-3, 1e-12);
        plan_layer_time(&p, &l, 12, &f, &b); /* halfway: 2 and 4 ms */
        CHECK_NEAR(f, 2e-3, 1e-12);
        CHECK_NEAR(b, 4e-3, 1e-12);
        plan_layer_time(&p, &l, 32, &f, &b); /* beyond: in proportion */
        CHECK_NEAR(f, 6e-3, 1e-12);
        CHECK_NEAR(b, 10e-3, 1e-12);
    }
    plan_profile_free(&pr);
}

/* Optimizer lines: the update's table, and hostile ones refused without a
 * crash (huge or overflowing counts, nested attributes, a key inside a string). */
static void test_optimizer_lines(void)
{
    static const char *text = "optimizer{\"op\":\"sgd\",\"params\":1000}[8][]  0.5 0.01\n"
                              "optimizer{\"params\":1000,\"op\":\"sgd\"}[16][]  0.7\n";
    plan_profile pr = {0};
    FILE *err = tmpfile();
    CHECK(plan_profile_parse(&pr, "o.txt", text, err));
    CHECK(ftell(err) == 0);
    fclose(err);
    CHECK(pr.n == 1 && strcmp(pr.e[0].op, "optimizer") == 0 && pr.e[0].timing.n == 2);
    if (pr.n == 1)
        CHECK_NEAR(plan_timing_at(&pr.e[0].timing, 12), 0.6e-3, 1e-12);
    plan_profile_free(&pr);

    static const char *hostile[] = {
        "optimizer{\"op\":\"sgd\",\"params\":99999999999999999999999}[8][]  0.5\n",
        "optimizer{\"op\":\"sgd\",\"params\":-5}[8][]  0.5\n",
        "optimizer{\"op\":\"sgd\",\"x\":\"\\\"params\\\":\"}[8][]  0.5\n",
        "optimizer{\"op\":{\"op\":\"sgd\"},\"params\":4}[8][]  0.5\n",
        "optimizer{\"op\":\"sgd\",\"params\":4}[8][]\n",
        "optimizer{\"op\":\"sgd\",\"params\":4}[8][]  nan\n",
        "optimizer{}[8][]  1\n",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        plan_profile q = {0};
        err = tmpfile();
        CHECK(!plan_profile_parse(&q, "h.txt", hostile[i], err));
        CHECK(ftell(err) > 0);
        fclose(err);
        plan_profile_free(&q);
    }
}

/* What a profile adds to a layer besides its own times: the inputs it
 * consumes first on its forward, its parameters' share of the update on its
 * backward. */
static void test_data_and_update(void)
{
    int64_t b4[] = {4, 8};
    double data_s[] = {1e-3, 2e-3}, data_f[] = {1e-3, 2e-3};
    double upd_s[] = {4e-3, 4e-3};
    plan_timing data = {.n = 2, .batch = b4, .seconds = data_s, .fwd = data_f};
    plan_timing upd = {.n = 2, .batch = b4, .seconds = upd_s};
    const plan_timing *datas[] = {&data};
    plan_problem p = {.cluster = {.gpus = 1, .gpus_per_node = 1, .peak_flops = 1e14},
                      .batch = 8,
                      .dtype_bytes = 4,
                      .data = datas,
                      .update = &upd,
                      .update_params = 1000};
    plan_layer with = {
        .name = "c", .cls = PC_CONV, .fwd_flops = 1e8, .params = 250, .data_first = 0, .ndata = 1};
    plan_layer without = with;
    without.ndata = 0;
    plan_problem bare = p;
    bare.update = NULL;
    double f0, b0, f1, b1;
    plan_layer_time(&bare, &without, 6, &f0, &b0);
    plan_layer_time(&p, &with, 6, &f1, &b1);
    CHECK_NEAR(f1 - f0, 1.5e-3, 1e-12); /* the data, interpolated at 6 */
    CHECK_NEAR(b1 - b0, 1e-3, 1e-12);   /* 250 of 1000 parameters of 4 ms */
}

/* --concurrent: three copies' samples of one round fold into the slowest copy's
 * at each step, after an earlier round's samples, and leave zeros behind. */
static void test_slowest(void)
{
    double v[2 + 3 * 2 + 1] = {7, 8, /* an earlier round */
                               1, 5, /* copy 0 */
                               3, 2, /* copy 1 */
                               2, 4, /* copy 2 */
                               9};   /* past the round */
    plan_profile_slowest(v, 2, 2, 3);
    const double want[] = {7, 8, 3, 5, 0, 0, 0, 0, 9};
    for (int i = 0; i < 9; i++)
        CHECK(v[i] == want[i]);
    double one[] = {4, 6};
    plan_profile_slowest(one, 0, 2, 1);
    CHECK(one[0] == 4 && one[1] == 6);
}

int main(int argc, char **argv)
{
    test_slowest();
    test_parse();
    test_layer_lines();
    test_optimizer_lines();
    test_data_and_update();
    test_shared(argc > 1 ? argv[1] : NULL);
    return check_done("test_profile");
}
