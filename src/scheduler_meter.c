/* scheduler_meter.c - the watchdog's view of the scheduler (what runs,
 * since when, under which name: a seqlock another thread reads), the CPU
 * meter's counts and debts, the threads inside a resume now, and the slot
 * that finds a thread's scheduler and task (see scheduler.h). */
#include "scheduler_private.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t sched_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* On the loop's thread: the watchdog's view says the resume of t (NULL:
 * none) runs, inside an outermost one begun at `since` (0: none). */
void sched_publish(sched *s, uint64_t since, const sched_task *t)
{
    uint64_t words[SCHED_NAME_LEN / 8] = {0};
    unsigned seq = atomic_load_explicit(&s->busy_seq, memory_order_relaxed);

    s->shown = t;
    if (t)
        memcpy(words, t->name, sizeof words);
    atomic_store_explicit(&s->busy_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->busy_ns, since, memory_order_relaxed);
    atomic_store_explicit(&s->busy_run, t ? t->run : 0, memory_order_relaxed);
    for (size_t i = 0; i < SCHED_NAME_LEN / 8; i++)
        atomic_store_explicit(&s->busy_name[i], words[i], memory_order_relaxed);
    atomic_store_explicit(&s->busy_seq, seq + 2, memory_order_release);
}

void sched_busy_read(sched *s, sched_busy *b)
{
    uint64_t words[SCHED_NAME_LEN / 8];
    struct timespec pause = {0, 100000};

    memset(b, 0, sizeof *b);
    /* the loop holds it odd for a few stores: retried, and after a
     * thousand tries (the loop's thread preempted meanwhile) with a pause
     * in between; given up after a second, as "not busy" */
    for (int tries = 0; tries < 11000; tries++) {
        unsigned seq = atomic_load_explicit(&s->busy_seq, memory_order_acquire);
        if ((seq & 1) == 0) {
            uint64_t since = atomic_load_explicit(&s->busy_ns, memory_order_relaxed);
            uint64_t run = atomic_load_explicit(&s->busy_run, memory_order_relaxed);
            for (size_t i = 0; i < SCHED_NAME_LEN / 8; i++)
                words[i] = atomic_load_explicit(&s->busy_name[i], memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->busy_seq, memory_order_relaxed) == seq) {
                if (since == 0)
                    return;
                b->since = since;
                b->run = run;
                memcpy(b->name, words, sizeof b->name);
                b->name[sizeof b->name - 1] = '\0';
                if (b->name[0] == '\0')
                    snprintf(b->name, sizeof b->name, "task");
                return;
            }
        }
        if (tries >= 1000)
            nanosleep(&pause, NULL);
    }
}

uint64_t sched_busy_since(sched *s)
{
    sched_busy b;

    sched_busy_read(s, &b);
    return b.since;
}

/* Record co as inside lua_resume (the innermost), and forget it again.
 * Deeper than SCHED_RESUMED_MAX only the depth is counted. */
static void sched_resumed_push(sched *s, lua_State *co)
{
    int n = atomic_load_explicit(&s->nresumed, memory_order_relaxed);

    if (n < SCHED_RESUMED_MAX)
        atomic_store_explicit(&s->resumed[n], co, memory_order_relaxed);
    atomic_store_explicit(&s->nresumed, n + 1, memory_order_relaxed);
}

static void sched_resumed_pop(sched *s)
{
    int n = atomic_load_explicit(&s->nresumed, memory_order_relaxed) - 1;

    atomic_store_explicit(&s->nresumed, n, memory_order_relaxed);
    if (n < SCHED_RESUMED_MAX)
        atomic_store_explicit(&s->resumed[n], NULL, memory_order_relaxed);
}

/* lua_resume of co, recorded in s (when there is one) meanwhile */
int sched_resume_in(sched *s, lua_State *co, lua_State *from, int narg, int *nres)
{
    int status;

    if (s == NULL)
        return lua_resume(co, from, narg, nres);
    sched_resumed_push(s, co);
    status = lua_resume(co, from, narg, nres);
    sched_resumed_pop(s);
    return status;
}

int sched_resume_tracked(lua_State *co, lua_State *from, int narg, int *nres)
{
    return sched_resume_in(sched_of(co), co, from, narg, nres);
}

void sched_meter_read(sched *s, uint64_t *resumes, uint64_t *accounted)
{
    *resumes = atomic_load_explicit(&s->resumes, memory_order_relaxed);
    *accounted = atomic_load_explicit(&s->accounted, memory_order_relaxed);
}

void sched_owe(sched *s, uint64_t run, uint64_t ns)
{
    atomic_store_explicit(&s->debt_run, run, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->debt_ns, ns, memory_order_release);
}

void sched_interrupt(sched *s, uint64_t run)
{
    atomic_store(&s->interrupt_run, run);
}

/* Whether the watchdog interrupted t's resume running now. */
int sched_interrupted(sched *s, const sched_task *t)
{
    return atomic_load_explicit(&s->interrupt_run, memory_order_relaxed) == t->run;
}

/* The scheduler of L's state (any of its threads); NULL when none. */
sched *sched_of(lua_State *L)
{
    int *slot = *(int **)lua_getextraspace(L);

    if (slot == NULL)
        return NULL;
    return *slot == SCHED_SLOT_TASK ? ((sched_task *)slot)->s : (sched *)slot;
}

sched_task *sched_current(lua_State *co)
{
    int *slot = *(int **)lua_getextraspace(co);

    return slot && *slot == SCHED_SLOT_TASK ? (sched_task *)slot : NULL;
}
