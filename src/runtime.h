/* runtime.h - one luaop runtime: its event loop, its API server connection
 * and what the Lua faces of tasks and files keep between calls, reachable
 * from every thread of the Lua state it runs (runtime_of). Created and
 * destroyed by one pair of functions; each runtime has a loop of its own,
 * so two can run in one process. */
#ifndef LUAOP_RUNTIME_H
#define LUAOP_RUNTIME_H

#include <lua.h>
#include <uv.h>

#include "list.h"

struct api;

typedef struct runtime {
    uv_loop_t loop;
    uv_check_t counter;        /* counts the loop's iterations (its wake-ups) */
    unsigned long iterations;
    struct api *api; /* NULL: no API server configured */
    /* lbind_task.c */
    list_node *sleeps; /* every sleep not yet over (lbind_sleep.link) */
    int stopping;               /* asked to stop (a signal) */
    void *shutdown_cond;        /* task.shutdown()'s condition, once made */
    /* lbind_fs.c */
    list_node *fs_jobs; /* work still on the thread pool (lbind_fs_job.link) */
} runtime;

/* A runtime with a new loop; NULL when out of memory. */
runtime *runtime_new(void);

/* Run the loop until every handle left is closed, close it and free rt.
 * Close or stop the handles first (lbind_task_shutdown, lbind_fs_shutdown,
 * api_free). Returns uv_loop_close's result. */
int runtime_free(runtime *rt);

/* Make rt the runtime of L's state (through its registry). */
void runtime_attach(runtime *rt, lua_State *L);

/* The runtime of L's state: runtime_get NULL when none, runtime_of raises. */
runtime *runtime_get(lua_State *L);
runtime *runtime_of(lua_State *L);

#endif
