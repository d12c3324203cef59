/* runtime.h - one luaop runtime: its event loop, its API server connection,
 * the scheduler of its Lua state's tasks, its log, and what the Lua faces
 * of tasks and files keep between calls, reachable
 * from every thread of the Lua state it runs (runtime_of). Created and
 * destroyed by one pair of functions; each runtime has a loop of its own,
 * so two can run in one process. */
#ifndef LUAOP_RUNTIME_H
#define LUAOP_RUNTIME_H

#include <stdatomic.h>
#include <stdint.h>

#include <lua.h>
#include <uv.h>

#include "counters.h"
#include "list.h"
#include "log.h"

struct api;
struct metrics;
struct sched;

typedef struct runtime {
    uv_loop_t loop;
    uv_check_t counter;        /* counts the loop's iterations (its wake-ups) */
    unsigned long iterations;
    struct api *api; /* NULL: no API server configured */
    struct sched *sched; /* its Lua state's tasks (runtime_attach) */
    log_sink log;        /* where its lines go: the process's sink at first */
    counters counters;   /* what its containment counted */
    struct metrics *metrics; /* its Prometheus registry (metrics.h) */
    atomic_int ready;    /* scripts loaded and caches synced: /readyz */
    atomic_int failing;  /* a supervised task keeps dying: /healthz fails */
    int scripts;         /* it runs untrusted scripts: luaop.core without credentials */
    FILE *log_file;      /* opened for log.setup{path=}, closed with it */
    /* lbind_task.c */
    list_node *sleeps; /* every sleep not yet over (lbind_sleep.link) */
    /* waits to end on the loop's next iteration, in order (a sleep of 0, a
     * condition's signal, a task's end): served by `soon`, an idle handle,
     * once per iteration, after its I/O (lbind_soon) */
    struct lbind_soon *soon_head, *soon_tail;
    uv_idle_t soon;
    int stopping;               /* asked to stop (a signal) */
    void *shutdown_cond;        /* task.shutdown()'s condition, once made */
    /* lbind_fs.c */
    list_node *fs_jobs; /* work still on the thread pool (lbind_fs_job.link) */
    /* lbind_workqueue.c */
    list_node *queues; /* every queue with a timer (lbind_wq.link) */
    /* The clock of tasks, sleeps and work queues (runtime_now_ns): the
     * monotonic clock, or, for the test kit, a virtual one that stands
     * still until it is moved (lbind_task.c: task.virtual_clock) */
    int virtual_clock;
    uint64_t virtual_ns; /* its monotonic time, in ns */
    /* its wall time is virtual_wall at virtual_base, and moves with
     * virtual_ns (one clock, so a key due at an hour on the one is at the
     * hour on the other, not a rounding short of it) */
    uint64_t virtual_base;
    double virtual_wall;
} runtime;

/* A runtime with a new loop; NULL when out of memory. */
runtime *runtime_new(void);

/* Run the loop until every handle left is closed, close it and free rt
 * with its scheduler. Close or stop the handles first
 * (lbind_task_shutdown, lbind_fs_shutdown, api_free), and close its Lua
 * state (or sched_detach). Returns uv_loop_close's result. */
int runtime_free(runtime *rt);

/* Make rt the runtime of L's state (through its registry) and give the
 * state its scheduler (sched_new). 0, or -1 when out of memory. */
int runtime_attach(runtime *rt, lua_State *L);

/* rt's monotonic time in ns (uv_hrtime's, or the virtual clock's), and
 * its wall time in seconds since the epoch (-1 when it cannot be read). */
uint64_t runtime_now_ns(const runtime *rt);
double runtime_wall(const runtime *rt);

/* Start timer t to call cb once rt's clock reaches due_ns: never early (a
 * callback should check the clock and start it again when early). On the
 * virtual clock a due time still ahead arms nothing: moving the clock
 * starts it again (lbind_task_clock_moved). */
void runtime_timer_start(runtime *rt, uv_timer_t *t, uv_timer_cb cb, uint64_t due_ns);

/* The runtime of L's state: runtime_get NULL when none, runtime_of raises. */
runtime *runtime_get(lua_State *L);
runtime *runtime_of(lua_State *L);

#endif
