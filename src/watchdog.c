/* watchdog.c - a thread that notices a stuck loop (see watchdog.h). */
#include "watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sched.h"

static pthread_t watchdog_thread;
static pthread_t watchdog_loop; /* the thread that runs the loop, and Lua */
static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watchdog_wake = PTHREAD_COND_INITIALIZER;
static int watchdog_running, watchdog_stopping;
static double watchdog_grace;
static sched *watchdog_sched; /* the loop's tasks, watched */

/* Signals, as they arrive (set from the handler: only atomics there). */
static _Atomic uint64_t watchdog_signal_ns; /* the first, monotonic */
static _Atomic uint64_t watchdog_second_ns; /* the second */
static atomic_int watchdog_signals;
static atomic_int watchdog_last_signal;
static struct sigaction watchdog_prev_term, watchdog_prev_int;

static uint64_t watchdog_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* WATCHDOG_NUDGE, sent to the loop's thread with an interrupt: from the
 * handler, on that thread, the count hook of the threads running Lua is
 * made to fire at their next instruction (sched_nudge), so the interrupt
 * lands as soon as the C work of one instruction or call is done, not
 * 10,000 instructions later (each of which may cost O(n): a compare or a
 * concatenation of long strings). */
#define WATCHDOG_NUDGE SIGURG

static void watchdog_on_nudge(int signum)
{
    (void)signum;
    /* only on the loop's thread (a SIGURG from outside may land on any):
     * lua_sethook from another would race the loop */
    if (watchdog_sched && pthread_equal(pthread_self(), watchdog_loop))
        sched_nudge(watchdog_sched);
}

/* Chained in front of the loop's handler: note the signal, then let the
 * loop's handler queue it as before. */
static void watchdog_on_signal(int signum, siginfo_t *info, void *ctx)
{
    struct sigaction *prev = signum == SIGTERM ? &watchdog_prev_term : &watchdog_prev_int;
    uint64_t zero = 0;

    atomic_compare_exchange_strong(&watchdog_signal_ns, &zero, watchdog_now_ns());
    if (atomic_fetch_add(&watchdog_signals, 1) == 1)
        atomic_store(&watchdog_second_ns, watchdog_now_ns());
    atomic_store(&watchdog_last_signal, signum);
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction)
            prev->sa_sigaction(signum, info, ctx);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(signum);
    }
}

static void watchdog_chain(int signum, struct sigaction *prev)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sigaction(signum, NULL, prev);
    sa.sa_sigaction = watchdog_on_signal;
    sa.sa_flags = SA_SIGINFO | (prev->sa_flags & SA_RESTART);
    sa.sa_mask = prev->sa_mask;
    sigaction(signum, &sa, NULL);
}

/* Logged unless stderr is held by the stuck thread (a write blocked on a
 * full pipe): the watchdog must still get to its _exit. No fflush before
 * _exit either, for the same reason: log lines are flushed as written. */
static void watchdog_log(int level, const char *msg, const char *task, double seconds)
{
    if (ftrylockfile(stderr) != 0)
        return;
    funlockfile(stderr);
    log_field f[] = {
        {"task", LOG_STR, .v.str = {task, strlen(task)}},
        {"seconds", LOG_NUM, .v.d = seconds},
    };
    log_write(level, "watchdog", msg, f, 2);
}

static void *watchdog_main(void *arg)
{
    uint64_t interrupted = 0;     /* the outermost resume interrupted (its start) */
    uint64_t interrupted_run = 0; /* the generation of the last resume interrupted */
    sched_busy b;

    (void)arg;
    pthread_mutex_lock(&watchdog_lock);
    while (!watchdog_stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&watchdog_wake, &watchdog_lock, &until);
        if (watchdog_stopping)
            break;

        /* one consistent view: when the loop's resume began, which task's
         * resume runs innermost now (by a generation never reused) and its
         * name; the interrupt names that generation, so it never lands on a
         * task that runs later */
        sched_busy_read(watchdog_sched, &b);
        uint64_t since = b.since;
        uint64_t now = watchdog_now_ns(); /* after since: never before it */
        double busy = since && now > since ? (double)(now - since) / 1e9 : 0;
        const char *task = b.name;
        if (since && interrupted == since && busy > WATCHDOG_INTERRUPT + WATCHDOG_EXIT) {
            watchdog_log(LOG_ERROR, "the loop did not come back after the interrupt: exiting", task, busy);
            _exit(WATCHDOG_EXIT_STATUS);
        } else if (since && busy > WATCHDOG_INTERRUPT && b.run != interrupted_run) {
            /* the first interrupt of this resume starts the exit's clock;
             * a task that runs innermost after the one interrupted (the one
             * that started it, say) is interrupted too */
            interrupted = since;
            interrupted_run = b.run;
            watchdog_log(LOG_ERROR, "a task has run without waiting for too long: interrupting it", task, busy);
            sched_interrupt(watchdog_sched, b.run);
            pthread_kill(watchdog_loop, WATCHDOG_NUDGE);
        }

        uint64_t sig = atomic_load(&watchdog_signal_ns), second = atomic_load(&watchdog_second_ns);
        if (sig) {
            double waited = (double)(now - sig) / 1e9;
            if (second && since && (double)(now - second) / 1e9 > 1) {
                /* the loop is stuck and cannot see the second signal */
                watchdog_log(LOG_ERROR, "a second signal while the loop is stuck: exiting", task, busy);
                    _exit(128 + atomic_load(&watchdog_last_signal));
            }
            if (waited > watchdog_grace + 1) {
                watchdog_log(LOG_ERROR, "still running after the grace period: exiting", since ? task : "", waited);
                    _exit(1);
            }
        }
    }
    pthread_mutex_unlock(&watchdog_lock);
    return NULL;
}

int watchdog_start(sched *s, double grace)
{
    sigset_t all, old;

    watchdog_sched = s;
    watchdog_grace = grace;
    watchdog_chain(SIGTERM, &watchdog_prev_term);
    watchdog_chain(SIGINT, &watchdog_prev_int);
    struct sigaction nudge;
    memset(&nudge, 0, sizeof nudge);
    sigemptyset(&nudge.sa_mask);
    nudge.sa_handler = watchdog_on_nudge;
    nudge.sa_flags = SA_RESTART;
    sigaction(WATCHDOG_NUDGE, &nudge, NULL);
    watchdog_loop = pthread_self();
    /* signals are for the loop's thread, not this one */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&watchdog_thread, NULL, watchdog_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0)
        return -1;
    watchdog_running = 1;
    return 0;
}

void watchdog_stop(void)
{
    if (!watchdog_running)
        return;
    pthread_mutex_lock(&watchdog_lock);
    watchdog_stopping = 1;
    pthread_cond_signal(&watchdog_wake);
    pthread_mutex_unlock(&watchdog_lock);
    pthread_join(watchdog_thread, NULL);
    watchdog_running = 0;
    /* no nudge after this: the scheduler it reaches is freed next (a
     * SIGURG from outside is then ignored, its default) */
    signal(WATCHDOG_NUDGE, SIG_DFL);
}
