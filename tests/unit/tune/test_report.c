/* test_report.c: the exec runner's reader of a program's background report
 * (tune/report.c): the lines runtime/background.c prints, one per background
 * model, are summed; lines that begin like one but are garbage, truncated or
 * hold numbers no finite double has are counted as malformed and add
 * nothing; every other line, of any length or bytes, is ignored; a program
 * that printed no report has none. */
#include "../rank/check.h"
#include "tune.h"

#include <stdlib.h>
#include <string.h>

static tune_program_report read_text(const char *text, size_t len)
{
    tune_program_report r;
    memset(&r, 0x55, sizeof r); /* tune_read_report zeroes it */
    /* fmemopen refuses an empty buffer */
    FILE *f = len ? fmemopen((void *)text, len, "r") : fopen("/dev/null", "r");
    if (!f) {
        perror("fmemopen");
        exit(2);
    }
    CHECK(tune_read_report(f, &r));
    fclose(f);
    return r;
}

static tune_program_report read_str(const char *text)
{
    return read_text(text, strlen(text));
}

/* One line: whether it reads, and what it adds. */
static void line(const char *s, bool report, int nbg, int malformed, double rate)
{
    tune_program_report r = {0};
    bool is = tune_report_line(s, strlen(s), &r);
    if (is != report || r.nbg != nbg || r.malformed != malformed || r.bg_samples_per_s != rate)
        fprintf(stderr, "line '%s': report %d nbg %d malformed %d rate %.17g\n", s, is, r.nbg,
                r.malformed, r.bg_samples_per_s);
    CHECK(is == report);
    CHECK(r.nbg == nbg);
    CHECK(r.malformed == malformed);
    CHECK(r.bg_samples_per_s == rate);
}

static void good(const char *s, double rate)
{
    line(s, true, 1, 0, rate);
}

static void bad(const char *s)
{
    line(s, true, 0, 1, 0);
}

static void other(const char *s)
{
    line(s, false, 0, 0, 0);
}

static void test_lines(void)
{
    /* what rt_bg_finish prints */
    good("background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s", 1234.5);
    good("background bg_mlp: 1 copy, 7 steps, 98.0 samples/s", 98.0);
    good("background m: 3 copies, 0 steps, 0.0 samples/s", 0);
    good("background bg.v2-x: 64 copies, 123456789 steps, 31337 samples/s", 31337);
    good("background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s\r", 1234.5);
    good("background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s  ", 1234.5);
    /* background off: a report, but no samples */
    tune_program_report r = {0};
    CHECK(tune_report_line("background off", 14, &r) && r.bg_off && r.nbg == 0 && !r.malformed);
    /* garbage after the prefix */
    bad("background");
    bad("background ");
    bad("background\tbg_mlp: 2 copies, 40 steps, 1234.5 samples/s");
    bad("background offline");
    bad("background bg_mlp 2 copies, 40 steps, 1234.5 samples/s");
    bad("background : 2 copies, 40 steps, 1234.5 samples/s");
    bad("background  bg_mlp: 2 copies, 40 steps, 1234.5 samples/s");
    bad("background bg mlp: 2 copies, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 2 copy, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 1 copies, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 0 copies, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: -2 copies, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 2.5 copies, 40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 2 copies, -40 steps, 1234.5 samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, -1234.5 samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, nan samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, inf samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, 1e5 samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, 0x10 samples/s");
    bad("background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s extra");
    bad("background bg_mlp: 2 copies, 40 steps, 1234.5 samples/ms");
    /* truncated */
    bad("background bg_mlp: 2 copies, 40 steps, 1234.5 samp");
    bad("background bg_mlp: 2 copies, 40 steps, 1234.");
    bad("background bg_mlp: 2 copies, 40 steps, ");
    bad("background bg_mlp: 2 cop");
    bad("background bg_mlp:");
    /* other lines of the program's output */
    other("bg bg_mlp rank 0 step 3 loss 2.302585");
    other("step 11 loss 2.2961");
    other("throughput 2301.5 samples/s (12 steps of 64 samples in 0.334 s)");
    other("foreground slowdown 1.094 (mean step 20.1 ms, ...)");
    other("Background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s");
    other(" background bg_mlp: 2 copies, 40 steps, 1234.5 samples/s");
    other("backgrounds: 2 copies, 40 steps, 1234.5 samples/s");
    other("");
}

static void test_numbers(void)
{
    /* the largest doubles print with 309 digits: 1e308 reads; beyond: malformed */
    char big[600], huge[600];
    char digits[400];
    memset(digits, '0', 308);
    digits[308] = 0;
    snprintf(big, sizeof big, "background m: 2 copies, 1 steps, 1%s.0 samples/s", digits);
    tune_program_report r = {0};
    CHECK(tune_report_line(big, strlen(big), &r) && r.nbg == 1 && r.bg_samples_per_s == 1e308);
    /* a second one would overflow the sum: it is not added */
    CHECK(tune_report_line(big, strlen(big), &r) && r.nbg == 1 && r.malformed == 1 &&
          r.bg_samples_per_s < INFINITY);
    memset(digits, '9', 399);
    digits[399] = 0;
    snprintf(huge, sizeof huge, "background m: 2 copies, 1 steps, %s samples/s", digits);
    bad(huge);
    snprintf(huge, sizeof huge, "background m: 2 copies, %s steps, 1.0 samples/s", digits);
    bad(huge);
    snprintf(huge, sizeof huge, "background m: %s copies, 1 steps, 1.0 samples/s", digits);
    bad(huge);
    /* large but finite counts are numbers all the same: they read */
    good("background m: 4294967296 copies, 18446744073709551616 steps, 0.5 samples/s", 0.5);
}

static void test_outputs(void)
{
    /* a run's output: losses, a report of two models, the slowdown line */
    tune_program_report r = read_str("step 0 loss 2.30\n"
                                     "bg bg_mlp rank 0 step 0 loss 2.31\n"
                                     "step 1 loss 2.29\n"
                                     "background bg_mlp: 2 copies, 40 steps, 1000.5 samples/s\n"
                                     "background other: 1 copy, 3 steps, 24.0 samples/s\n"
                                     "foreground slowdown 1.05 (...)\n"
                                     "throughput 2000.0 samples/s (2 steps of 64 samples)\n");
    CHECK(r.nbg == 2 && r.malformed == 0 && !r.bg_off);
    CHECK_NEAR(r.bg_samples_per_s, 1024.5, 1e-9);
    /* no report at all: nothing, and nothing malformed */
    r = read_str("step 0 loss 2.30\nstep 1 loss 2.29\nthroughput 2000.0 samples/s (...)\n");
    CHECK(r.nbg == 0 && r.malformed == 0 && r.bg_samples_per_s == 0);
    r = read_str("");
    CHECK(r.nbg == 0 && r.malformed == 0 && r.bg_samples_per_s == 0);
    /* the last line without its newline still reads; cut short it does not */
    r = read_str("step 0 loss 1\nbackground m: 1 copy, 2 steps, 5.5 samples/s");
    CHECK(r.nbg == 1 && r.bg_samples_per_s == 5.5);
    r = read_str("step 0 loss 1\nbackground m: 1 copy, 2 steps, 5.5 sam");
    CHECK(r.nbg == 0 && r.malformed == 1 && r.bg_samples_per_s == 0);
    /* garbage and a good line: the good one counts */
    r = read_str("background m: 1 copy, 2 steps, garbage\n"
                 "background m: 1 copy, 2 steps, 5.5 samples/s\n");
    CHECK(r.nbg == 1 && r.malformed == 1 && r.bg_samples_per_s == 5.5);
    /* a very long line (1 MiB, no newline inside) between two reports: skipped;
     * one that begins like a report is malformed */
    size_t n = (size_t)1 << 20;
    char *text = malloc(3 * n);
    if (!text)
        exit(2);
    size_t k = 0;
    k += (size_t)sprintf(text + k, "background a: 1 copy, 1 steps, 1.5 samples/s\n");
    memset(text + k, 'x', n);
    k += n;
    text[k++] = '\n';
    k += (size_t)sprintf(text + k, "background ");
    memset(text + k, '7', n);
    k += n;
    text[k++] = '\n';
    k += (size_t)sprintf(text + k, "background b: 1 copy, 1 steps, 2.5 samples/s\n");
    r = read_text(text, k);
    CHECK(r.nbg == 2 && r.malformed == 1 && r.bg_samples_per_s == 4.0);
    /* NUL bytes: a line holding one is not the runtime's */
    static const char nul[] = "background m: 1 copy, 2 steps, 5.5 samples/s\0 tail\n"
                              "background m: 1 copy, 2\0 steps, 5.5 samples/s\n"
                              "background m\0x: 1 copy, 2 steps, 5.5 samples/s\n"
                              "background m: 1 copy, 2 steps, 1.5 samples/s\n";
    r = read_text(nul, sizeof nul - 1);
    CHECK(r.nbg == 1 && r.malformed == 3 && r.bg_samples_per_s == 1.5);
    /* bytes of every value, no newline anywhere */
    for (size_t i = 0; i < n; i++)
        text[i] = (char)(i * 131 + 7);
    r = read_text(text, n);
    CHECK(r.nbg == 0 && r.bg_samples_per_s == 0);
    free(text);
}

int main(void)
{
    test_lines();
    test_numbers();
    test_outputs();
    return check_done("tune/test_report");
}
