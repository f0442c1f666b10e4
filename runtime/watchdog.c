/* watchdog.c: a thread per rank that aborts the whole MPI job when this rank makes no
 * progress for too long, so a dead or hung peer makes every rank exit non-zero with a
 * message instead of waiting forever. core.c arms it (a deadline) and disarms it. */
#include "internal.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stop;
    double deadline; /* 0: disarmed */
    double timeout;  /* the limit armed last, for the message */
    int64_t step;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&wd.cv, &wd.mu, &ts);
        if (!wd.stop && wd.deadline > 0 && rt_now() > wd.deadline) {
            fprintf(stderr,
                    "burstrt: rank %d: watchdog: step %lld made no progress for %.1f s "
                    "(in op '%s'); a peer rank has probably died or hung; aborting the job "
                    "(if steps are legitimately this slow, raise --step-timeout)\n",
                    rt_opts_g.rank, (long long)wd.step, wd.timeout, rt_current_op());
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

void rt_watchdog_arm(int64_t step, double seconds)
{
    pthread_mutex_lock(&wd.mu);
    wd.step = step;
    wd.timeout = seconds;
    wd.deadline = seconds > 0 ? rt_now() + seconds : 0;
    pthread_mutex_unlock(&wd.mu);
}

int64_t rt_watchdog_step(void)
{
    pthread_mutex_lock(&wd.mu);
    int64_t s = wd.step;
    pthread_mutex_unlock(&wd.mu);
    return s;
}

void rt_watchdog_start(void)
{
    wd.stop = false;
    if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) != 0)
        rt_fatal("init", "cannot start the watchdog thread");
    wd.running = true;
}

void rt_watchdog_stop(void)
{
    if (!wd.running)
        return;
    pthread_mutex_lock(&wd.mu);
    wd.stop = true;
    pthread_cond_signal(&wd.cv);
    pthread_mutex_unlock(&wd.mu);
    pthread_join(wd.thread, NULL);
    wd.running = false;
}
