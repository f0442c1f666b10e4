/* par.c: running a phase on a few threads.
 *
 * The large phases (reading, building the graph, the connectivity checks) split
 * their work into a fixed number of parts chosen by the caller, never by how many
 * threads happen to start, so their results do not depend on the thread count.
 * rank_parallel deals the parts out to at most THREADS threads (thread k runs parts
 * k, k + threads, ...), the calling thread being thread 0; the parts of a thread that
 * cannot start run on the calling thread afterwards. */
#include "rank.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    void (*fn)(void *, int);
    void *arg;
    int first, parts, stride;
} job;

static void run_parts(const job *j)
{
    for (int p = j->first; p < j->parts; p += j->stride)
        j->fn(j->arg, p);
}

static void *run_job(void *p)
{
    run_parts(p);
    return NULL;
}

void rank_parallel(int parts, int threads, void (*fn)(void *arg, int part), void *arg)
{
    if (threads > parts)
        threads = parts;
    if (threads < 1)
        threads = 1;
    job *jobs = malloc((size_t)threads * sizeof *jobs);
    pthread_t *tids = malloc((size_t)threads * sizeof *tids);
    char *started = calloc((size_t)threads, 1);
    if (!jobs || !tids || !started) {
        for (int p = 0; p < parts; p++)
            fn(arg, p);
        free(jobs);
        free(tids);
        free(started);
        return;
    }
    for (int t = 0; t < threads; t++)
        jobs[t] = (job){fn, arg, t, parts, threads};
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, run_job, &jobs[t]) == 0;
    run_parts(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            run_parts(&jobs[t]);
    }
    free(jobs);
    free(tids);
    free(started);
}
