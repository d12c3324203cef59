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
#include "scheduler.h"

static pthread_t watchdog_thread;
static pthread_t watchdog_loop; /* the thread that runs the loop, and Lua */
static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watchdog_wake = PTHREAD_COND_INITIALIZER;
static int watchdog_running, watchdog_stopping;
static double watchdog_grace;
static sched *watchdog_sched; /* the loop's tasks, watched */
static clockid_t watchdog_cpu_clock; /* the loop's thread's CPU time */
static int watchdog_metering;        /* that clock could be had: the meter runs */
static uint64_t (*watchdog_gc_ns)(void); /* the collector's time (gcstep.h) */

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

/* The CPU meter. Every tick, while one resume of a budgeted task runs
 * from the tick before to this one (the same generation, no other resume
 * begun meanwhile), the CPU time the loop's thread spent, less the
 * collector's, is set against the instructions accounted meanwhile (the
 * count hook's, and work done in C as charged). What exceeds
 * WATCHDOG_NS_PER_INSTRUCTION for each of them, plus WATCHDOG_SLACK_NS, is
 * time no count saw: an instruction that costs O(n) (a compare,
 * concatenation or conversion of long strings, a vararg of a million
 * values, a next() over a table emptied of millions), or a C call that
 * charges nothing. The resume owes it (sched_owe: instructions at
 * CHARGE_NS_PER ns each) and is nudged, so that its hook charges it at the
 * next instruction, and a budget breached by it ends that reconcile within
 * a tick or two of the breach. */
struct watchdog_meter {
    uint64_t run, resumes, accounted, cpu, gc;
    int on; /* the previous tick saw a resume running */
};

static uint64_t watchdog_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(watchdog_cpu_clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void watchdog_meter_tick(struct watchdog_meter *m, const sched_busy *b)
{
    struct watchdog_meter now = {.run = b->run, .on = b->since != 0};

    sched_meter_read(watchdog_sched, &now.resumes, &now.accounted);
    now.cpu = watchdog_cpu_ns();
    now.gc = watchdog_gc_ns ? watchdog_gc_ns() : 0;
    if (m->on && now.on && now.run == m->run && now.resumes == m->resumes && now.cpu > m->cpu) {
        uint64_t spent = now.cpu - m->cpu, gc = now.gc - m->gc;
        uint64_t allowed = (now.accounted - m->accounted) * WATCHDOG_NS_PER_INSTRUCTION + WATCHDOG_SLACK_NS;
        spent = spent > gc ? spent - gc : 0;
        if (spent > allowed) {
            sched_owe(watchdog_sched, now.run, spent - allowed);
            pthread_kill(watchdog_loop, WATCHDOG_NUDGE);
        }
    }
    *m = now;
}

static void *watchdog_main(void *arg)
{
    uint64_t interrupted = 0;     /* the outermost resume interrupted (its start) */
    uint64_t interrupted_run = 0; /* the generation of the last resume interrupted */
    sched_busy b;
    struct watchdog_meter meter = {0};

    (void)arg;
    pthread_mutex_lock(&watchdog_lock);
    while (!watchdog_stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        /* a tick every 20 ms while a resume runs (the meter's); idle, four
         * a second: a resume begun meanwhile is metered from the next */
        until.tv_nsec += meter.on ? WATCHDOG_TICK_NS : WATCHDOG_IDLE_TICK_NS;
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
        if (watchdog_metering)
            watchdog_meter_tick(&meter, &b);
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

int watchdog_start(sched *s, double grace, uint64_t (*gc_ns)(void))
{
    sigset_t all, old;

    watchdog_sched = s;
    watchdog_grace = grace;
    watchdog_gc_ns = gc_ns;
    watchdog_metering = pthread_getcpuclockid(pthread_self(), &watchdog_cpu_clock) == 0;
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
