/* lbind.h - the Lua faces of the core's modules, gathered in luaop.core. */
#ifndef LUAOP_LBIND_H
#define LUAOP_LBIND_H

#include <lauxlib.h>
#include <stdint.h>

#include <lua.h>

/* Pushes t[key] of the table at idx, read raw (no __index of a table a
 * script made runs: rule 2 of docs/security.md's rules for C bindings), and
 * returns its type, as lua_getfield does. */
static inline int lbind_rawfield(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Each pushes its module's table. */
int lbind_json_open(lua_State *L);
struct json_cut;
/* json.event's work on the len bytes at s (which must stay as they are
 * until it returns: a Lua string on the stack, or a watch's line no Lua
 * can free meanwhile), cut as node says (lbind_json_tocut), the object
 * decoded shallow when asked: pushes type, object, text and returns 3, or
 * returns 0 pushing nothing for a line it does not take so. */
int lbind_json_event_push(lua_State *L, const char *s, size_t len, const struct json_cut *node, int shallow);
/* The cut at idx (json.cut's userdata), or the cache's own when none. */
const struct json_cut *lbind_json_tocut(lua_State *L, int idx);
int lbind_log_open(lua_State *L);
int lbind_kubeconfig_open(lua_State *L);
int lbind_api_open(lua_State *L);
int lbind_task_open(lua_State *L);
int lbind_workqueue_open(lua_State *L);
int lbind_fs_open(lua_State *L);
int lbind_metrics_open(lua_State *L);
int lbind_check_open(lua_State *L);
int lbind_kit_open(lua_State *L);
int lbind_yaml_open(lua_State *L);
int lbind_webhook_open(lua_State *L);
int lbind_shard_open(lua_State *L);

/* lbind_shard.c: the set of hash ranges in the table at idx, a list of
 * {lo, last} integer pairs (luaop.shard.ranges), into *set (its old ranges
 * replaced); raises naming `what` on a bad one or when out of memory. */
struct shard_set;
void lbind_shard_toset(lua_State *L, int idx, const char *what, struct shard_set *set);

/* Every module finds its runtime (loop, API server) with runtime_of(L). */
struct runtime;

/* lbind_task.c: the task running on L; raises (naming `what`) when L is
 * not a task's thread or cannot yield. Every C function that waits
 * starts with it. */
struct sched_task;
struct sched_task *lbind_check_task(lua_State *L, const char *what);

/* Asked to stop (a signal): wake the tasks waiting on task.shutdown().
 * Returns how many were waiting (0: nobody drains, just exit). */
int lbind_task_stop(struct runtime *rt);

/* Stop the timers of tasks still sleeping (at exit). */
void lbind_task_shutdown(struct runtime *rt);

/* The virtual clock moved (lbind_kit.c): sleeps and work queues whose
 * time came are started again. */
void lbind_task_clock_moved(struct runtime *rt);
void lbind_workqueue_clock_moved(struct runtime *rt);
/* The earliest time (runtime_now_ns) a sleep ends or a delayed key of a
 * queue a task waits on comes due: 1 and *due, or 0 when none. */
int lbind_task_next_due(struct runtime *rt, uint64_t *due);
int lbind_workqueue_next_due(struct runtime *rt, uint64_t *due);

/* File system work still on the thread pool (at exit) is freed when done,
 * its task forgotten. */
void lbind_fs_shutdown(struct runtime *rt);

/* lbind_metrics.c: the metrics owner of the userdata at idx (a
 * metrics.owner), NULL for nil; raises for anything else. */
struct metrics_owner;
struct metrics_owner *lbind_metrics_owner(lua_State *L, int idx);

/* lbind_watch.c: add api.watch to the api table on top of L's stack. */
void lbind_watch_add(lua_State *L);

/* lbind_class.c: register the metatable `name` of a userdata class, once:
 * __index the methods (NULL-terminated), and __gc and __close when given. */
void lbind_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                 lua_CFunction close);

/* luaop.core: a table with one field per module (json, ...) and version;
 * without kubeconfig (it hands out credentials) when the runtime runs
 * untrusted scripts (runtime.scripts). */
int luaopen_luaop_core(lua_State *L);

#endif
