/* scheduler.h - Lua coroutines as tasks on the event loop (its names: sched_).
 *
 * A task is a Lua function run in its own coroutine. A C function that has
 * to wait (for the network, a timer) begins a wait (sched_wait_begin),
 * gives its token to whatever will complete the work, and returns
 * sched_wait_yield(L, ...); when the work completes its callback pushes the
 * results onto the thread sched_waiting gives for that token and calls
 * sched_wake. So Lua code reads top to bottom while many tasks wait at once
 * in one OS thread.
 *
 * Task threads belong to the scheduler: a waker keeps a token, never a
 * pointer to the task, and a token that is not the wait the task is in now
 * (its task ended, or was woken already) is dropped; a resume of a waiting
 * task's thread by anything but sched_wake (coroutine.resume in Lua code)
 * finds it still waiting and it yields again at once; a task that yields
 * without a wait (coroutine.yield at its own top level) fails. */
#ifndef LUAOP_SCHEDULER_H
#define LUAOP_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

struct counters;

typedef struct sched sched;
typedef struct sched_task sched_task;

/* The scheduler of L's state: it wraps the state's allocator (to charge
 * memory budgets) and marks the main thread's extra space, so every thread
 * of the state finds it; breaches are counted in c. One per Lua state;
 * NULL when out of memory. */
sched *sched_new(lua_State *L, struct counters *c);

/* Give the state its allocator back and unmark it, while the state still
 * lives (when the scheduler goes before the state does). */
void sched_detach(sched *s);

/* Free s and forget every task still waiting: after lua_close of its
 * state (or sched_detach), since their threads will never be resumed. */
void sched_free(sched *s);

/* Called once when the task ends: ok with its nres return values on top of
 * `co`'s stack, or not ok with sched_error(t) telling why. The task is
 * freed right after. */
typedef void (*sched_done_cb)(sched_task *t, lua_State *co, int ok, int nres, void *ud);

/* Start the function below `nargs` arguments on top of L's stack as a new
 * task (popping them), and run it until it first waits or ends. NULL (all
 * popped) when out of memory or L's state has no scheduler. */
sched_task *sched_spawn(lua_State *L, int nargs, sched_done_cb done, void *ud);

/* What a task may use: VM instructions (counted in steps of
 * SCHED_BUDGET_STEP) and bytes of Lua memory, net of what is freed while it
 * runs; 0 means no limit. Running past either raises an error in the task
 * ("instruction budget of N exceeded", "memory budget of N bytes
 * exceeded"), which fails it unless it catches the error itself. */
typedef struct sched_owner sched_owner;
typedef struct sched_budget {
    unsigned long instructions;
    size_t memory;
    const char *name; /* what the task does, for the watchdog's log (copied) */
    sched_owner *owner; /* the script it counts against; NULL: the spawning task's */
    /* A mark the task carries (sharding: the hash of the key a reconcile
     * is for; sched_mark); unmarked, a task takes the spawning task's. */
    int marked;
    uint64_t mark;
} sched_budget;
/* A script, as its tasks count against it: at most max_tasks of them live
 * at once (0: no cap), and all of them ended together when it is removed
 * or replaced. A task spawned by a task counts against that task's owner.
 * Reference counted: the creator holds one (sched_owner_unref), each live
 * task another. NULL when out of memory. */
sched_owner *sched_owner_new(unsigned max_tasks);
void sched_owner_unref(sched_owner *o);
/* Its tasks not ended yet. */
unsigned sched_owner_live(const sched_owner *o);
/* End every task of o: one waiting now fails at once, one inside a resume
 * now at its next instruction (as a breach: no pcall keeps it going), each
 * with "task ended: its script was removed or replaced" (sched_failure
 * "ended"); o starts no task from then on. */
void sched_owner_end(sched *s, sched_owner *o);
/* Why a task spawned now from L with budget b would be refused (the
 * running task's owner ended, or at its cap), pushed on L or static; NULL:
 * it would not be. A budget that names its owner is never refused: the
 * runtime spawns so (a reconcile), and such a task counts against it (a
 * task spawned for an ended owner fails at its first instruction). */
const char *sched_spawn_refused(lua_State *L, const sched_budget *b);

/* The same, with a budget from the first instruction. */
sched_task *sched_spawn_budgeted(lua_State *L, int nargs, const sched_budget *b, sched_done_cb done, void *ud);

/* lua_pcall the function below `nargs` arguments on co's stack, on task
 * co's own thread, with at most `instructions` VM instructions (counted as
 * for a budget) and `memory` bytes of heap growth (0: none of its own) for
 * it: past them it fails with "instruction budget of N exceeded" or
 * "memory budget of N bytes exceeded", even when the code caught the
 * breach (an xpcall inside it). The task's own budgets, if it has
 * them, cap these, are set aside meanwhile and are charged what the call
 * used. Returns lua_pcall's status; -1 (nothing called, nothing popped)
 * when co is not a task's thread. */
int sched_pcall_limited(lua_State *co, int nargs, int nres, unsigned long instructions, size_t memory);

/* The task running on thread `co`, or NULL when co is no task's coroutine
 * (the main thread, or a coroutine a script made itself). */
sched_task *sched_current(lua_State *co);

/* The mark of the task running now (the one inside lua_resume, whatever
 * coroutine of its runs): 1 and *mark, or 0 when none runs or it has none. */
int sched_mark(lua_State *L, uint64_t *mark);

#define SCHED_BUDGET_STEP 10000

#define SCHED_NAME_LEN 96

/* What the loop is doing, for the watchdog (another thread): read whole,
 * never torn (a seqlock). */
typedef struct sched_busy {
    uint64_t since; /* monotonic ns at which the outermost resume running now
                       began; 0: the loop is not inside one */
    uint64_t run;   /* the generation of the innermost task's resume running
                       now: a 64-bit number never reused (0 when since is) */
    char name[SCHED_NAME_LEN]; /* that task's name ("task" when it has none) */
} sched_busy;

/* Read what the loop is doing now (safe from another thread). */
void sched_busy_read(sched *s, sched_busy *b);

/* The same, its since only (0: the loop is not inside a task). */
uint64_t sched_busy_since(sched *s);

/* Make the resume of generation `run` (sched_busy's) fail at its next count
 * hook, or the next charge of work done in C, as a breach of its budget
 * (safe from another thread). When that resume is over already, nothing
 * happens: no other task, nor a later resume of the same one, is hit. */
void sched_interrupt(sched *s, uint64_t run);

/* The CPU meter (watchdog.c), safe from another thread: how many resumes
 * have begun, and how many instructions have been accounted to budgets
 * (counted by the hook, or charged for work done in C), so far. */
void sched_meter_read(sched *s, uint64_t *resumes, uint64_t *accounted);

/* The resume of generation `run` owes `ns` of CPU time that no count saw
 * (an instruction that costs O(n), a C call that charges nothing): charged
 * as instructions, at CHARGE_NS_PER ns each, at its next count hook or
 * charge (sched_nudge makes that the next instruction). Dropped when that
 * resume is over. Safe from another thread. */
void sched_owe(sched *s, uint64_t run, uint64_t ns);

/* The main thread of the task's Lua state (idle whenever a task's
 * callback runs). */
lua_State *sched_main_thread(const sched_task *t);

/* A wait, as whatever will wake the task keeps it: the scheduler and the
 * token of the one wait the task is in (a 64-bit number never reused),
 * never a pointer to the task, which may have ended meanwhile. {0}: none. */
typedef struct sched_wait {
    sched *s;
    uint64_t id;
    uint32_t slot; /* where s finds the task */
} sched_wait;

/* Begin a wait of the task whose own thread is L (lbind_check_task has
 * said it is one, and may yield), to end with `return sched_wait_yield(...)`:
 * from then on only sched_wake with this token resumes the task; a wait
 * begun before is forgotten (its wake-up will be dropped). */
sched_wait sched_wait_begin(lua_State *L);

/* Yield L, a task's own thread, for the wait begun: return it from the C
 * function (it never returns otherwise). When sched_wake ends the wait,
 * k(L, LUA_YIELD, ctx) runs when k is not NULL, else the values the waker
 * pushed are the C function's results. A resume by anything else (a
 * coroutine.resume of the thread in Lua code) finds the task still
 * waiting: its values are dropped and the thread yields again at once. */
int sched_wait_yield(lua_State *L, lua_KContext ctx, lua_KFunction k);

/* The thread to push the wake-up's values on when w is the wait its task is
 * in now; NULL when it is not (the task ended, was woken already, or began
 * another wait): the wake-up is to be dropped. */
lua_State *sched_waiting(sched_wait w);

/* End the wait w: resume its task with the nres values pushed on
 * sched_waiting(w)'s thread. Nothing when w is not the wait its task is in
 * now (then no values may have been pushed: sched_waiting said NULL). */
void sched_wake(sched_wait w, int nres);

/* The error of a failed task: "message\nstack traceback:..." (valid in the
 * done callback). */
const char *sched_error(const sched_task *t);

/* Why it failed: "error" (it raised), "api" (it raised a table with a
 * reason: the client's errors), "terminal" (a table whose raw field
 * terminal is true: luaop.terminal's), the budget it broke: "instructions",
 * "memory", "pattern" (pattern matching's steps, charged as instructions),
 * "watchdog"; or "ended" (sched_owner_end). */
const char *sched_failure(const sched_task *t);

/* Charge n instructions of work a C function does for the running task
 * (the count hook never fires inside a C call), and take a pending
 * watchdog interrupt for it: raises on L when its budget is spent or it
 * was interrupted; returns at once outside a budgeted task. Call it before
 * or while doing the work, from a C function called by Lua (it raises). */
void sched_charge(lua_State *L, unsigned long n);

/* The threads of the resumes running now that sched_nudge reaches (deeper
 * nesting is counted, not reached). */
#define SCHED_RESUMED_MAX 64

/* lua_resume, with co recorded as running inside it for sched_nudge (Lua's
 * coroutine library is built calling this: charge_lib.h). */
int sched_resume_tracked(lua_State *co, lua_State *from, int narg, int *nres);

/* Make the count hook of every budgeted thread inside a resume now fire at
 * its next VM instruction, so that an interrupt (or a breach) lands there
 * rather than up to SCHED_BUDGET_STEP instructions later: those may each
 * cost O(n) (a compare or concatenation of long strings). Async-signal-safe:
 * the watchdog's signal handler calls it on the loop's thread. */
void sched_nudge(sched *s);

/* Tasks not yet ended. */
int sched_running(const sched *s);

#endif
