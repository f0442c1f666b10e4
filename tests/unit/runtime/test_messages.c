/* test_messages.c: a runtime error is one line written with one write(2), so the errors of
 * ranks that fail at the same moment never interleave within a line (they all go to
 * mpirun through pipes, where one write of up to PIPE_BUF bytes arrives whole). Rounds of
 * 32 processes sharing one stderr pipe are released at once, each with a fatal error of a
 * few hundred bytes; every line read back must be one process's complete message. A long
 * message is cut to one line, never split. */
#include "check.h"
#include "internal.h"

#define PROCS  32
#define ROUNDS 5

static char payload[400];

int main(void)
{
    for (size_t i = 0; i < sizeof payload - 1; i++)
        payload[i] = (char)('a' + i % 26);
    int lines_ok = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int out[2], go[2];
        if (pipe(out) != 0 || pipe(go) != 0)
            return 1;
        fflush(stdout);
        for (int p = 0; p < PROCS; p++) {
            if (fork() == 0) {
                close(out[0]);
                close(go[1]);
                dup2(out[1], 2);
                char c;
                ssize_t r = read(go[0], &c, 1); /* returns when the parent closes go[1] */
                (void)r;
                rt_opts_g.rank = p;
                rt_fatal("data", "%s", payload);
            }
        }
        close(out[1]);
        close(go[0]);
        close(go[1]);
        static char buf[PROCS * 1024];
        size_t len = 0;
        ssize_t n;
        while (len < sizeof buf - 1 && (n = read(out[0], buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)n;
        buf[len] = 0;
        close(out[0]);
        for (int p = 0; p < PROCS; p++)
            wait(NULL);
        bool seen[PROCS] = {false};
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            int rank = -1, at = 0;
            if (sscanf(line, "burstrt: rank %d: data: %n", &rank, &at) == 1 && rank >= 0 &&
                rank < PROCS && !seen[rank] && !strcmp(line + at, payload)) {
                seen[rank] = true;
                lines_ok++;
            } else {
                CHECK(0, "round %d: a line that is not one whole message: '%.120s...'", round,
                      line);
            }
        }
        for (int p = 0; p < PROCS; p++)
            CHECK(seen[p], "round %d: the message of process %d is missing or broken", round, p);
    }
    /* Longer than one write may carry whole: cut, still one line. */
    int out[2];
    if (pipe(out) != 0)
        return 1;
    if (fork() == 0) {
        dup2(out[1], 2);
        static char huge[10000];
        memset(huge, 'x', sizeof huge - 1);
        rt_fatal("data", "%s", huge);
    }
    close(out[1]);
    static char got[20000];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof got - 1 && (n = read(out[0], got + len, sizeof got - 1 - len)) > 0)
        len += (size_t)n;
    got[len] = 0;
    wait(NULL);
    CHECK(len <= 4096 && len > 100 && got[len - 1] == '\n' && strchr(got, '\n') == got + len - 1 &&
              strstr(got, "xxx...\n"),
          "a 10 kB message should be cut to one line of at most 4096 bytes, got %zu bytes", len);
    printf("test_messages: %d of %d messages arrived whole: %s\n", lines_ok, PROCS * ROUNDS,
           check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
