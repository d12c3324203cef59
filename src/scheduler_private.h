/* scheduler_private.h - what the scheduler's files share (scheduler.c: tasks,
 * steps and waits; scheduler_budget.c: accounts, the allocator, the count hook
 * and charges; scheduler_meter.c: the watchdog's view, the CPU meter, the
 * threads inside a resume). Not for any other file: scheduler.h is the API. */
#ifndef LUAOP_SCHEDULER_PRIVATE_H
#define LUAOP_SCHEDULER_PRIVATE_H

#include "scheduler.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "counters.h"
#include "list.h"

/* What a budget charges: a reconcile's task and every task it spawns
 * share one account, so spawning cannot multiply a budget. A breach is
 * sticky: once over, every further hook call and every growth of memory
 * fails again, so a script that catches the error (pcall, a coroutine of
 * its own) cannot go on. */
typedef struct sched_account {
    unsigned long budget, used; /* instructions; budget 0: no limit */
    size_t mem_budget;          /* 0: no limit */
    ptrdiff_t mem_used;         /* net bytes allocated while its tasks ran */
    int breached;               /* SCHED_BREACH_*: sticky */
    int announced, announcing;  /* the breach's one message: raised, being made */
    int refs;                   /* tasks (and limited calls) sharing it */
    char where[160];            /* "file:line: " of the breach, once known */
} sched_account;

enum {
    SCHED_BREACH_NONE,
    SCHED_BREACH_INSTRUCTIONS,
    SCHED_BREACH_MEMORY,
    SCHED_BREACH_WATCHDOG,
    SCHED_BREACH_PATTERN,
    SCHED_BREACH_ENDED /* not a budget: its owner was ended (sched_owner_end) */
};

/* A script, as its tasks count against it (scheduler.h). */
struct sched_owner {
    int refs;            /* the Lua handle's, and each live task's */
    unsigned live, max;  /* tasks not ended; most at once (0: no cap) */
    int ended;
};

/* What a thread's extra space points to: a task's thread, its task; the
 * main thread (and so every coroutine a script makes, which copies it),
 * the scheduler. */
enum { SCHED_SLOT_SCHED = 1, SCHED_SLOT_TASK };

struct sched_task {
    int slot;      /* SCHED_SLOT_TASK */
    sched *s;
    lua_State *L;  /* the main thread: the registry's owner, always alive */
    lua_State *co; /* the task's coroutine */
    int ref;       /* keeps co alive */
    sched_done_cb done;
    void *ud;
    char *error;
    const char *failure;     /* sched_failure */
    sched_account *acct;     /* NULL: unbudgeted */
    sched_owner *owner;      /* NULL: the runtime's own */
    char name[SCHED_NAME_LEN]; /* what it does (the watchdog's log) */
    list_node link; /* in s->all: every task not yet ended */
    uint32_t index; /* in s->tasks, where a wait's token finds it */
    /* Its wait: only sched_wake with this token resumes it (sched_wait_k). */
    uint64_t wait;  /* the token of the wait begun; 0: none */
    int waiting;    /* yielded for it (sched_wait_yield) */
    int woken;      /* resumed by sched_wake: the continuation goes on */
    lua_KFunction k; /* the waiting C function's continuation, and its context */
    lua_KContext kctx;
    uint64_t run;   /* the generation of its resume running now (the watchdog's) */
    int marked;     /* sched_budget.mark, or the spawning task's */
    uint64_t mark;
};

/* One Lua state's tasks. */
struct sched {
    int slot; /* SCHED_SLOT_SCHED */
    lua_State *L;
    counters *counters; /* where breaches are counted */
    int live;
    list_node *all;
    sched_task *running; /* the task inside lua_resume now */
    const sched_task *shown; /* the task the watchdog's view names now */
    uint64_t since;      /* when the outermost resume running now began */
    uint64_t next_id;    /* the last wait token or resume generation given */
    /* Every task not yet ended by its index (NULL: a free index, in free). */
    sched_task **tasks;
    uint32_t *free;
    uint32_t ntasks, nfree, cap;
    /* Memory budgets: the state's allocator is wrapped so that what is
     * allocated while a task runs is charged to that task (and what is
     * freed meanwhile credited). A growth past the budget fails; Lua then
     * collects garbage and tries once more before it raises. */
    lua_Alloc orig_alloc;
    void *orig_ud;
    /* The watchdog's view (watchdog.c, another thread): a seqlock, odd
     * while the loop writes it; what the running task was interrupted for. */
    _Atomic unsigned busy_seq;
    _Atomic uint64_t busy_ns, busy_run;
    _Atomic uint64_t busy_name[SCHED_NAME_LEN / 8]; /* all 0: "task" */
    _Atomic uint64_t interrupt_run;
    /* The CPU meter's (watchdog.c): resumes begun, instructions accounted
     * to budgets (counted and charged), and the CPU time, in ns, the
     * watchdog measured that no count saw, owed by the resume `debt_run`. */
    _Atomic uint64_t resumes, accounted;
    _Atomic uint64_t debt_ns, debt_run;
    /* The threads inside lua_resume now, outermost first (a task's, then
     * the coroutines it resumed: sched_resume_tracked): where sched_nudge
     * makes the count hook fire at the next instruction. Written by the
     * loop's thread, read by its signal handler: lock-free atomics. */
    _Atomic(lua_State *) resumed[SCHED_RESUMED_MAX];
    _Atomic int nresumed;
};

_Static_assert(SCHED_NAME_LEN % 8 == 0, "a name is whole words");
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2, "a signal handler reads them");

/* Add to one of the CPU meter's counts: written by the loop's thread only,
 * so a plain load and store (no locked add on the allocator's path), read
 * whole by the watchdog's. */
static inline void sched_meter_add(_Atomic uint64_t *count, uint64_t n)
{
    atomic_store_explicit(count, atomic_load_explicit(count, memory_order_relaxed) + n, memory_order_relaxed);
}

/* "task ended" as a breach message says it (sched_owner_end's too) */
#define SCHED_ENDED "task ended: its script was removed or replaced"

/* scheduler_meter.c */
uint64_t sched_now_ns(void);
/* On the loop's thread: the watchdog's view says the resume of t (NULL:
 * none) runs, inside an outermost one begun at `since` (0: none). */
void sched_publish(sched *s, uint64_t since, const sched_task *t);
/* lua_resume of co, recorded in s (when there is one) meanwhile */
int sched_resume_in(sched *s, lua_State *co, lua_State *from, int narg, int *nres);
/* Whether the watchdog interrupted t's resume running now. */
int sched_interrupted(sched *s, const sched_task *t);
/* The scheduler of L's state (any of its threads); NULL when none. */
sched *sched_of(lua_State *L);

/* scheduler_budget.c */
void sched_breach(sched *s, sched_account *a, int why);
/* the state's allocator while a scheduler is attached: charges budgets */
void *sched_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
sched_account *sched_account_new(unsigned long instructions, size_t memory);
void sched_account_unref(sched_account *a);
/* Note where a breach happened, unless known already (level: of L's stack). */
void sched_note_where(sched_account *a, lua_State *L, int level);
/* The message of a breach, pushed on L. */
const char *sched_breach_message(lua_State *L, const sched_account *a);
/* The count hook of every budgeted task's threads. */
void sched_count_hook(lua_State *L, lua_Debug *ar);

#endif
