/* sched.h - Lua coroutines as tasks on the event loop.
 *
 * A task is a Lua function run in its own coroutine. A C function that has
 * to wait (for the network, a timer) starts the work, keeps the task's
 * thread, and returns lua_yield(L, 0); when the work completes its callback
 * pushes the results onto that thread and calls sched_resume. So Lua code
 * reads top to bottom while many tasks wait at once in one OS thread. */
#ifndef LUAOP_SCHED_H
#define LUAOP_SCHED_H

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
typedef struct sched_budget {
    unsigned long instructions;
    size_t memory;
    const char *name; /* what the task does, for the watchdog's log (copied) */
} sched_budget;

/* The same, with a budget from the first instruction. */
sched_task *sched_spawn_budgeted(lua_State *L, int nargs, const sched_budget *b, sched_done_cb done, void *ud);

/* lua_pcall the function below `nargs` arguments on co's stack, on task
 * co's own thread, with at most `instructions` VM instructions (counted as
 * for a budget) and `memory` bytes of heap growth (0: none of its own) for
 * it: past them it fails with "instruction budget of N exceeded" or
 * "memory budget of N bytes exceeded". The task's own budgets, if it has
 * them, cap these, are set aside meanwhile and are charged what the call
 * used. Returns lua_pcall's status; -1 (nothing called, nothing popped)
 * when co is not a task's thread. */
int sched_pcall_limited(lua_State *co, int nargs, int nres, unsigned long instructions, size_t memory);

/* The task running on thread `co`, or NULL when co is no task's coroutine
 * (the main thread, or a coroutine a script made itself). */
sched_task *sched_current(lua_State *co);

#define SCHED_BUDGET_STEP 10000

/* For the watchdog (another thread): the monotonic time in ns at which the
 * resume running now began, 0 when the loop is not inside one; the running
 * task's name goes to buf. */
uint64_t sched_busy_since(sched *s, char *buf, size_t len);

/* Make the task running now fail at its next count hook, as a breach of its
 * budget (safe from another thread). */
void sched_interrupt(sched *s);

/* The task's coroutine: push resume values here. */
lua_State *sched_thread(sched_task *t);

/* The main thread of the task's Lua state (idle whenever a task's
 * callback runs). */
lua_State *sched_main_thread(const sched_task *t);

/* Continue a waiting task with the nres values pushed on its thread. */
void sched_resume(sched_task *t, int nres);

/* The error of a failed task: "message\nstack traceback:..." (valid in the
 * done callback). */
const char *sched_error(const sched_task *t);

/* Why it failed: "error" (it raised), "api" (it raised a table with a
 * reason: the client's errors), or the budget it broke: "instructions",
 * "memory", "pattern" (pattern matching's steps, charged as instructions),
 * "watchdog". */
const char *sched_failure(const sched_task *t);

/* Charge n instructions of work a C function does for the running task
 * (the count hook never fires inside a C call), and take a pending
 * watchdog interrupt for it: raises on L when its budget is spent or it
 * was interrupted; returns at once outside a budgeted task. Call it before
 * or while doing the work, from a C function called by Lua (it raises). */
void sched_charge(lua_State *L, unsigned long n);

/* Tasks not yet ended. */
int sched_running(const sched *s);

#endif
