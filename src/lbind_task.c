/* lbind_task.c - the Lua face of tasks (scheduler.c): luaop.core.task, and
 * lbind_check_task for every C function that waits. Tasks are Lua
 * coroutines run on the runtime's loop, under budgets passed in with
 * spawn_limited. Functions that wait yield the calling task.
 *
 *   task.sleep(seconds)                               (yields)
 *   task.spawn(fn, ...) -> handle;  handle:wait() -> true, results... | false, err, why
 *     (why: "error", "api", "terminal" or the budget broken, as sched_failure says)
 *   task.call_limited(instructions, fn, ...) -> true, results... | false, err
 *     fn(...) in this task, stopped past that many VM instructions (for
 *     code that must not wait and must not run away: watch map functions)
 *   task.now() -> seconds on the loop's monotonic clock
 *   task.iterations() -> how many times the loop has woken up so far
 *   task.wall() -> seconds since the epoch (wall clock, microseconds)
 *   task.cond() -> c;  c:wait([timeout]) (yields) until c:signal() wakes
 *     every waiter (true), or the timeout's seconds are over (false)
 *   task.shutdown() -> the cond signalled on SIGTERM/SIGINT; task.stopping()
 *   task.is_task(v) -> true when v is a task's own thread
 *
 * Every wait goes through sched_wait_begin/sched_wait_yield, and whatever
 * ends it keeps the wait's token (scheduler.h), never the task. */
#include "lbind.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "list.h"
#include "runtime.h"
#include "scheduler.h"

#define LBIND_TASK_MT "luaop.task"

/* The longest a sleep or a timeout waits at once, in seconds (a year). */
#define LBIND_SLEEP_MAX (365.0 * 24 * 3600)

sched_task *lbind_check_task(lua_State *L, const char *what)
{
    sched_task *t = sched_current(L);

    if (t == NULL)
        luaL_error(L, "%s can only be called from a luaop task (not from a coroutine the script made)", what);
    if (!lua_isyieldable(L))
        luaL_error(L, "%s waits, and the code calling it must not (a watch map function, a metamethod)", what);
    return t;
}

/* ---- task ------------------------------------------------------------------ */

typedef struct lbind_sleep lbind_sleep;
typedef struct lbind_cond lbind_cond;
struct lbind_sleep {
    uv_timer_t timer;
    sched_wait wait; /* the task's wait it ends */
    runtime *rt;
    lbind_cond *cond; /* the timeout of a cond:wait: it ends with false */
    uint64_t due;     /* runtime_now_ns() at which it is over */
    list_node link; /* in rt->sleeps: every sleep not yet over */
};

static void lbind_cond_timed_out(lbind_cond *c, lbind_sleep *s);

static void lbind_sleep_closed(uv_handle_t *h)
{
    free(h->data);
}

static void lbind_sleep_end(lbind_sleep *s)
{
    list_remove(&s->rt->sleeps, &s->link);
    uv_close((uv_handle_t *)&s->timer, lbind_sleep_closed);
}

static void lbind_sleep_cb(uv_timer_t *timer)
{
    lbind_sleep *s = timer->data;
    sched_wait w = s->wait;
    lua_State *co;
    int nres = 0, timed_out;

    if (runtime_now_ns(s->rt) < s->due) {
        /* the loop's clock is in (coarse) milliseconds: early, wait the rest */
        runtime_timer_start(s->rt, &s->timer, lbind_sleep_cb, s->due);
        return;
    }
    timed_out = s->cond != NULL;
    if (timed_out)
        lbind_cond_timed_out(s->cond, s);
    lbind_sleep_end(s);
    if ((co = sched_waiting(w)) == NULL)
        return; /* not the wait its task is in: dropped */
    if (timed_out) {
        lua_pushboolean(co, 0);
        nres = 1;
    }
    sched_wake(w, nres);
}

/* A wait to end on the loop's next iteration (runtime.h: rt->soon). */
struct lbind_soon {
    sched_wait wait;
    struct lbind_soon *next;
};

/* Once per iteration: end the waits queued before it began, in order. A
 * wait queued meanwhile (the task woken sleeps 0 again) waits for the next
 * iteration, after its I/O: a task looping on a sleep of 0 takes a turn
 * like any other, and holds nothing (before, each such sleep was a timer
 * that libuv ran in the same pass, whose memory was freed only once the
 * pass ended: it never did). */
static void lbind_soon_cb(uv_idle_t *h)
{
    runtime *rt = h->data;
    struct lbind_soon *batch = rt->soon_head;

    rt->soon_head = rt->soon_tail = NULL;
    uv_idle_stop(h); /* started again by a wait queued meanwhile */
    while (batch) {
        struct lbind_soon *s = batch;
        sched_wait w = s->wait;
        batch = s->next;
        free(s);
        if (sched_waiting(w))
            sched_wake(w, 0);
    }
}

/* End the wait w on the loop's next iteration, never inside the caller.
 * -1 when out of memory. */
static int lbind_wake_soon(runtime *rt, sched_wait w)
{
    struct lbind_soon *s = malloc(sizeof *s);

    if (s == NULL)
        return -1;
    s->wait = w;
    s->next = NULL;
    if (rt->soon_tail)
        rt->soon_tail->next = s;
    else
        rt->soon_head = s;
    rt->soon_tail = s;
    uv_idle_start(&rt->soon, lbind_soon_cb);
    return 0;
}

void lbind_task_shutdown(runtime *rt)
{
    while (rt->sleeps)
        lbind_sleep_end(list_entry(rt->sleeps, lbind_sleep, link));
    while (rt->soon_head) {
        struct lbind_soon *s = rt->soon_head;
        rt->soon_head = s->next;
        free(s);
    }
    rt->soon_tail = NULL;
    uv_idle_stop(&rt->soon);
}

/* End the wait w from rt's loop after secs (a timer: at least a
 * millisecond; lbind_wake_soon is for no wait at all). NULL when out of
 * memory. */
static lbind_sleep *lbind_wake_after(runtime *rt, sched_wait w, double secs)
{
    lbind_sleep *s = malloc(sizeof *s);

    if (s == NULL)
        return NULL;
    /* NaN and negatives: now; anything longer than a year: a year (a
     * double past 2^64 ns does not convert to an integer) */
    if (!(secs > 0))
        secs = 0;
    else if (secs > LBIND_SLEEP_MAX)
        secs = LBIND_SLEEP_MAX;
    s->wait = w;
    s->rt = rt;
    s->cond = NULL;
    list_push(&rt->sleeps, &s->link);
    uv_timer_init(&rt->loop, &s->timer);
    s->timer.data = s;
    /* never early: counted from now, rounded up, and checked against the
     * clock when it fires */
    s->due = runtime_now_ns(rt) + (secs > 0 ? (uint64_t)ceil(secs * 1e9) : 0);
    runtime_timer_start(rt, &s->timer, lbind_sleep_cb, s->due);
    return s;
}

void lbind_task_clock_moved(runtime *rt)
{
    for (list_node *n = rt->sleeps; n; n = n->next) {
        lbind_sleep *s = list_entry(n, lbind_sleep, link);
        runtime_timer_start(rt, &s->timer, lbind_sleep_cb, s->due);
    }
}

int lbind_task_next_due(runtime *rt, uint64_t *due)
{
    int any = 0;

    for (list_node *n = rt->sleeps; n; n = n->next) {
        lbind_sleep *s = list_entry(n, lbind_sleep, link);
        if (!any || s->due < *due)
            *due = s->due;
        any = 1;
    }
    return any;
}

static int lbind_task_sleep(lua_State *L)
{
    double secs = luaL_checknumber(L, 1);
    runtime *rt = runtime_of(L);
    sched_wait w;

    lbind_check_task(L, "task.sleep");
    w = sched_wait_begin(L);
    /* (NaN and negatives: none) */
    if (secs > 0 ? lbind_wake_after(rt, w, secs) == NULL : lbind_wake_soon(rt, w) != 0)
        return luaL_error(L, "not enough memory");
    return sched_wait_yield(L, 0, NULL);
}

/* ---- conditions: cond:wait() until another task's cond:signal() ---------- */

#define LBIND_COND_MT "luaop.cond"

typedef struct lbind_waiter {
    sched_wait wait;
    lbind_sleep *timeout; /* NULL: waits for a signal only */
} lbind_waiter;

struct lbind_cond {
    runtime *rt;
    lbind_waiter *waiting;
    int n, cap;
};

static int lbind_cond_new(lua_State *L)
{
    runtime *rt = runtime_of(L);
    lbind_cond *c = lua_newuserdatauv(L, sizeof *c, 0);

    c->rt = rt;
    c->waiting = NULL;
    c->n = c->cap = 0;
    luaL_setmetatable(L, LBIND_COND_MT);
    return 1;
}

/* A waiter's timeout came: it waits no more (the timer resumes it). */
static void lbind_cond_timed_out(lbind_cond *c, lbind_sleep *s)
{
    for (int i = 0; i < c->n; i++) {
        if (c->waiting[i].timeout == s) {
            memmove(c->waiting + i, c->waiting + i + 1, (size_t)(c->n - i - 1) * sizeof *c->waiting);
            c->n--;
            return;
        }
    }
}

/* true when signalled, false when the timeout came first */
static int lbind_cond_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    if (lua_gettop(L) < 2)
        lua_pushboolean(L, 1);
    return 1;
}

/* The cond at 1 (raises when it is not one). */
static lbind_cond *lbind_tocond(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_COND_MT);
}

/* cond:wait([timeout]) -> true | false (timed out) */
static int lbind_cond_wait(lua_State *L)
{
    lbind_cond *c = lbind_tocond(L);
    double timeout = luaL_optnumber(L, 2, -1);
    lbind_sleep *s = NULL;
    sched_wait wait;

    lbind_check_task(L, "cond:wait");
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        lbind_waiter *w = realloc(c->waiting, (size_t)cap * sizeof *w);
        if (w == NULL)
            return luaL_error(L, "not enough memory");
        c->waiting = w;
        c->cap = cap;
    }
    wait = sched_wait_begin(L);
    if (timeout >= 0) {
        s = lbind_wake_after(c->rt, wait, timeout);
        if (s == NULL)
            return luaL_error(L, "not enough memory");
        s->cond = c;
    }
    c->waiting[c->n].wait = wait;
    c->waiting[c->n++].timeout = s;
    lua_settop(L, 1);
    return sched_wait_yield(L, 0, lbind_cond_wait_k);
}

/* Wake every waiting task, each from the loop (never inside the caller).
 * Returns how many, or -1 when out of memory. */
static int lbind_cond_broadcast(lbind_cond *c)
{
    int n = c->n;

    c->n = 0;
    for (int i = 0; i < n; i++) {
        if (c->waiting[i].timeout)
            lbind_sleep_end(c->waiting[i].timeout);
        if (lbind_wake_soon(c->rt, c->waiting[i].wait) != 0)
            return -1;
    }
    return n;
}

static int lbind_cond_signal(lua_State *L)
{
    int n = lbind_cond_broadcast(lbind_tocond(L));

    if (n < 0)
        return luaL_error(L, "not enough memory");
    lua_pushinteger(L, n);
    return 1;
}

/* ---- shutdown: SIGTERM and SIGINT, as tasks see them ---------------------- */

/* task.shutdown() -> the condition signalled when luaop is asked to stop */
static int lbind_task_shutdown_cond(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "luaop.shutdown");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lbind_cond_new(L);
        runtime_of(L)->shutdown_cond = lua_touserdata(L, -1); /* anchored in the registry */
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, "luaop.shutdown");
    }
    return 1;
}

static int lbind_task_stopping(lua_State *L)
{
    lua_pushboolean(L, runtime_of(L)->stopping);
    return 1;
}

int lbind_task_stop(runtime *rt)
{
    rt->stopping = 1;
    return rt->shutdown_cond ? lbind_cond_broadcast(rt->shutdown_cond) : 0;
}

static int lbind_cond_gc(lua_State *L)
{
    lbind_cond *c = lbind_tocond(L);

    free(c->waiting);
    c->waiting = NULL;
    c->n = c->cap = 0;
    return 0;
}

/* task.is_task(v) -> whether v is a task's own thread: the scheduler's,
 * which no Lua code may resume, close or yield (the sandbox's coroutine
 * library asks) */
static int lbind_task_is_task(lua_State *L)
{
    lua_State *co = lua_tothread(L, 1);

    lua_pushboolean(L, co != NULL && sched_current(co) != NULL);
    return 1;
}

static int lbind_task_iterations(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)runtime_of(L)->iterations);
    return 1;
}

/* task.now() -> seconds on the runtime's monotonic clock */
static int lbind_task_now(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)runtime_now_ns(runtime_of(L)) / 1e9);
    return 1;
}

/* task.wall() -> seconds since the epoch, to the microsecond */
static int lbind_task_wall(lua_State *L)
{
    double wall = runtime_wall(runtime_of(L));

    if (wall < 0)
        return luaL_error(L, "cannot read the clock");
    lua_pushnumber(L, wall);
    return 1;
}

static int lbind_spawn(lua_State *L, const sched_budget *b);

/* A spawned task's handle: a userdata whose user value is a table holding
 * the outcome ({ok, results...}) once it ended, or the waiting task. */
typedef struct lbind_handle {
    int ended;
    sched_wait waiter; /* of a task blocked in :wait() */
} lbind_handle;

static void lbind_spawn_done(sched_task *t, lua_State *co, int ok, int nres, void *ud)
{
    /* a failed task's stack may be full (it died of that): its error goes
     * through the main thread's */
    lua_State *L = ok ? co : sched_main_thread(t);
    int href = (int)(intptr_t)ud;
    lbind_handle *h;

    luaL_checkstack(L, 4, "a task's outcome");
    /* The handle lives in the registry until the task ends. */
    lua_rawgeti(L, LUA_REGISTRYINDEX, href);
    h = lua_touserdata(L, -1);
    lua_getiuservalue(L, -1, 1);
    lua_pushboolean(L, ok);
    lua_rawseti(L, -2, 1);
    if (ok) {
        for (int i = 0; i < nres; i++) {
            lua_pushvalue(L, -2 - nres + i);
            lua_rawseti(L, -2, i + 2);
        }
        lua_pushinteger(L, nres + 1);
    } else {
        lua_pushstring(L, sched_error(t));
        lua_rawseti(L, -2, 2);
        lua_pushstring(L, sched_failure(t));
        lua_rawseti(L, -2, 3);
        lua_pushinteger(L, 3);
    }
    lua_setfield(L, -2, "n");
    lua_pop(L, 2);
    luaL_unref(L, LUA_REGISTRYINDEX, href);
    h->ended = 1;
    if (sched_waiting(h->waiter)) {
        sched_wait w = h->waiter;
        h->waiter = (sched_wait){0};
        /* from the loop, never inside this task's end: tasks each waiting
         * for the next would otherwise end one inside another, a C resume
         * nested per task (Lua counts none of them: the wake-up is a
         * resume from no thread) until the C stack ran out, a SIGSEGV */
        if (lbind_wake_soon(runtime_of(L), w) != 0)
            sched_wake(w, 0); /* (out of memory: at once, as before) */
    }
}

/* A positive integer field of the budget table, 0 when absent. */
static lua_Integer lbind_budget_field(lua_State *L, const char *name)
{
    lua_Integer v = 0;

    if (lbind_rawfield(L, 1, name) != LUA_TNIL) {
        int isint;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint || v <= 0)
            luaL_error(L, "bad budget: %s must be a positive integer", name);
    }
    lua_pop(L, 1);
    return v;
}

/* ---- owners: task.owner(max_tasks) -> owner; owner:stop(); owner:live() */

#define LBIND_OWNER_MT "luaop.task.owner"

typedef struct lbind_owner {
    sched_owner *o;
} lbind_owner;

static int lbind_task_owner(lua_State *L)
{
    lua_Integer max = luaL_optinteger(L, 1, 0);
    lbind_owner *h;

    luaL_argcheck(L, max >= 0 && max <= 0x7fffffff, 1, "the most tasks is an integer from 0 (no cap)");
    h = lua_newuserdatauv(L, sizeof *h, 0);
    h->o = NULL;
    luaL_setmetatable(L, LBIND_OWNER_MT);
    h->o = sched_owner_new((unsigned)max);
    if (h->o == NULL)
        return luaL_error(L, "not enough memory");
    return 1;
}

static int lbind_owner_gc(lua_State *L)
{
    lbind_owner *h = luaL_checkudata(L, 1, LBIND_OWNER_MT);

    sched_owner_unref(h->o);
    h->o = NULL;
    return 0;
}

/* End every task of the owner (sched_owner_end). */
static int lbind_owner_stop(lua_State *L)
{
    lbind_owner *h = luaL_checkudata(L, 1, LBIND_OWNER_MT);

    sched_owner_end(runtime_of(L)->sched, h->o);
    return 0;
}

static int lbind_owner_live(lua_State *L)
{
    lbind_owner *h = luaL_checkudata(L, 1, LBIND_OWNER_MT);

    lua_pushinteger(L, (lua_Integer)sched_owner_live(h->o));
    return 1;
}

static const luaL_Reg lbind_owner_methods[] = {
    {"stop", lbind_owner_stop},
    {"live", lbind_owner_live},
    {NULL, NULL},
};

/* task.refused() -> why a plain spawn from here would be refused, or nil */
static int lbind_task_refused(lua_State *L)
{
    const sched_budget none = {0};
    const char *why = sched_spawn_refused(L, &none);

    if (why == NULL)
        return 0;
    lua_pushstring(L, why);
    return 1;
}

/* spawn with a budget: task.spawn_limited(instructions, fn, ...) or
 * task.spawn_limited({instructions = N, memory = bytes, name = s,
 * owner = task.owner(...), shard = hash}, fn, ...); shard marks the task
 * and those it spawns as made for a key of that hash (sched_mark, the
 * fence by range: lbind_shard.c) */
static int lbind_task_spawn_limited(lua_State *L)
{
    sched_budget b = {0};
    char name[96];

    if (lua_istable(L, 1)) {
        b.instructions = (unsigned long)lbind_budget_field(L, "instructions");
        b.memory = (size_t)lbind_budget_field(L, "memory");
        if (lbind_rawfield(L, 1, "name") == LUA_TSTRING) {
            snprintf(name, sizeof name, "%s", lua_tostring(L, -1));
            b.name = name; /* copied by sched_spawn_budgeted */
        }
        lua_pop(L, 1);
        if (lbind_rawfield(L, 1, "owner") != LUA_TNIL) {
            lbind_owner *h = luaL_testudata(L, -1, LBIND_OWNER_MT);
            if (h == NULL)
                return luaL_error(L, "bad budget: owner must be a task.owner()");
            b.owner = h->o; /* the budget table anchors it meanwhile */
        }
        lua_pop(L, 1);
        if (lbind_rawfield(L, 1, "shard") != LUA_TNIL) {
            int isint;
            lua_Integer h = lua_tointegerx(L, -1, &isint);
            if (!isint)
                return luaL_error(L, "bad budget: shard must be an integer (a key's hash)");
            b.marked = 1;
            b.mark = (uint64_t)h;
        }
        lua_pop(L, 1);
    } else {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n > 0, 1, "an instruction budget must be positive");
        b.instructions = (unsigned long)n;
    }
    lua_remove(L, 1);
    return lbind_spawn(L, &b);
}

/* task.call_limited(instructions | {instructions =, memory =}, fn, ...) */
static int lbind_task_call_limited(lua_State *L)
{
    lua_Integer n, mem = 0;
    int status;

    if (lua_istable(L, 1)) {
        lbind_rawfield(L, 1, "instructions");
        n = luaL_checkinteger(L, -1);
        lbind_rawfield(L, 1, "memory");
        mem = luaL_optinteger(L, -1, 0);
        lua_pop(L, 2);
        luaL_argcheck(L, mem >= 0, 1, "a memory budget is never negative");
    } else {
        n = luaL_checkinteger(L, 1);
    }
    luaL_argcheck(L, n > 0, 1, "an instruction budget must be positive");
    luaL_checktype(L, 2, LUA_TFUNCTION);
    status = sched_pcall_limited(L, lua_gettop(L) - 2, LUA_MULTRET, (unsigned long)n, (size_t)mem);
    if (status == -1)
        return luaL_error(L, "task.call_limited can only be called from a luaop task");
    luaL_checkstack(L, 1, "call_limited results");
    lua_pushboolean(L, status == LUA_OK);
    lua_replace(L, 1); /* over the budget: true|false, then the results or the error */
    return lua_gettop(L);
}

/* Spawn the function at 1 with the arguments above it, under budget b
 * (inherited from the spawning task when it has none of its own). */
static int lbind_spawn(lua_State *L, const sched_budget *b)
{
    int nargs = lua_gettop(L) - 1;
    lbind_handle *h;
    int href;
    const char *refused;

    luaL_checktype(L, 1, LUA_TFUNCTION);
    refused = sched_spawn_refused(L, b);
    if (refused)
        return luaL_error(L, "%s", refused);
    h = lua_newuserdatauv(L, sizeof *h, 1);
    h->ended = 0;
    h->waiter = (sched_wait){0};
    lua_newtable(L);
    lua_setiuservalue(L, -2, 1);
    luaL_setmetatable(L, LBIND_TASK_MT);
    lua_pushvalue(L, -1);
    href = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_insert(L, 1); /* the handle below the function, to return it */
    if (sched_spawn_budgeted(L, nargs, b, lbind_spawn_done, (void *)(intptr_t)href) == NULL)
        return luaL_error(L, "not enough memory");
    lua_settop(L, 1);
    return 1;
}

static int lbind_task_spawn(lua_State *L)
{
    const sched_budget none = {0};

    return lbind_spawn(L, &none);
}

static int lbind_handle_results(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, n, "task results");
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    return n;
}

/* :wait() -> true, results... | false, err */
static int lbind_handle_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    lua_settop(L, 1);
    return lbind_handle_results(L);
}

/* The handle at 1 (raises when it is not one). */
static lbind_handle *lbind_tohandle(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_TASK_MT);
}

static int lbind_handle_wait(lua_State *L)
{
    lbind_handle *h = lbind_tohandle(L);

    if (h->ended)
        return lbind_handle_results(L);
    if (sched_waiting(h->waiter))
        return luaL_error(L, "another task is already waiting for this one");
    lbind_check_task(L, "task:wait");
    h->waiter = sched_wait_begin(L);
    return sched_wait_yield(L, 0, lbind_handle_wait_k);
}

static const luaL_Reg lbind_task_funcs[] = {
    {"sleep", lbind_task_sleep},
    {"cond", lbind_cond_new},
    {"shutdown", lbind_task_shutdown_cond},
    {"stopping", lbind_task_stopping},
    {"spawn", lbind_task_spawn},
    {"spawn_limited", lbind_task_spawn_limited},
    {"call_limited", lbind_task_call_limited},
    {"now", lbind_task_now},
    {"iterations", lbind_task_iterations},
    {"wall", lbind_task_wall},
    {"is_task", lbind_task_is_task},
    {"owner", lbind_task_owner},
    {"refused", lbind_task_refused},
    {NULL, NULL},
};

int lbind_task_open(lua_State *L)
{
    static const luaL_Reg cond_methods[] = {
        {"wait", lbind_cond_wait},
        {"signal", lbind_cond_signal},
        {NULL, NULL},
    };
    static const luaL_Reg task_methods[] = {
        {"wait", lbind_handle_wait},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_COND_MT, cond_methods, lbind_cond_gc, NULL);
    lbind_class(L, LBIND_TASK_MT, task_methods, NULL, NULL);
    lbind_class(L, LBIND_OWNER_MT, lbind_owner_methods, lbind_owner_gc, NULL);
    luaL_newlib(L, lbind_task_funcs);
    return 1;
}
