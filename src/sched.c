/* sched.c - Lua coroutines as tasks on the event loop (see sched.h). */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

struct sched_task {
    lua_State *L;  /* the main thread: the registry's owner, always alive */
    lua_State *co; /* the task's coroutine */
    int ref;       /* keeps co alive */
    sched_done_cb done;
    void *ud;
    char *error;
    unsigned long budget, used; /* instructions */
    size_t mem_budget;
    ptrdiff_t mem_used; /* net bytes allocated while it ran */
    int mem_exceeded;
    sched_task *prev, *next; /* every task not yet ended */
};

static int sched_live;
static void sched_count_hook(lua_State *L, lua_Debug *ar);
static sched_task *sched_all;
static sched_task *sched_running_task; /* the task inside lua_resume now */

/* Memory budgets: once a task has one, the state's allocator is wrapped so
 * that what is allocated while a task runs is charged to that task (and
 * what is freed meanwhile credited). A growth past the budget fails; Lua
 * then collects garbage and tries once more before it raises. */
static lua_Alloc sched_orig_alloc;
static void *sched_orig_ud;

static void *sched_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sched_task *t = sched_running_task;
    size_t old = ptr ? osize : 0; /* without ptr, osize is a type tag */
    void *p;

    (void)ud;
    if (t == NULL || t->mem_budget == 0)
        return sched_orig_alloc(sched_orig_ud, ptr, osize, nsize);
    if (nsize > old && t->mem_used + (ptrdiff_t)(nsize - old) > (ptrdiff_t)t->mem_budget) {
        t->mem_exceeded = 1;
        return NULL;
    }
    p = sched_orig_alloc(sched_orig_ud, ptr, osize, nsize);
    if (p || nsize == 0) {
        if (nsize > old)
            t->mem_exceeded = 0; /* a growth that fit: an earlier breach was caught */
        t->mem_used += (ptrdiff_t)nsize - (ptrdiff_t)old;
        /* what the collector frees of others' garbage is no credit */
        if (t->mem_used < 0)
            t->mem_used = 0;
    }
    return p;
}

static void sched_wrap_alloc(lua_State *L)
{
    void *ud;
    lua_Alloc f = lua_getallocf(L, &ud);

    if (f == sched_alloc)
        return;
    sched_orig_alloc = f;
    sched_orig_ud = ud;
    lua_setallocf(L, sched_alloc, NULL);
}

static void sched_unlink(sched_task *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        sched_all = t->next;
    if (t->next)
        t->next->prev = t->prev;
}

/* A task's thread keeps its task in the thread's extra space. */
static sched_task **sched_slot(lua_State *co)
{
    return (sched_task **)lua_getextraspace(co);
}

sched_task *sched_current(lua_State *co)
{
    return *sched_slot(co);
}

/* Pushes t[key] of the table at idx, read raw; true when it is a string. */
static int sched_raw_string(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx) == LUA_TSTRING;
}

/* The text of the error value on top of co's stack, pushed there and
 * returned. No metamethod runs (the task is over; its budget with it): a
 * table is read raw as the client's errors are made, {reason =, message =},
 * and anything else is named by its type, as lua.c does. */
static const char *sched_error_text(lua_State *co)
{
    const char *reason = NULL, *message = NULL;

    if (!lua_checkstack(co, 4)) /* a dead coroutine's stack may be full */
        return "(error object not shown: no stack left)";
    if (lua_type(co, -1) == LUA_TSTRING || lua_type(co, -1) == LUA_TNUMBER) {
        lua_pushvalue(co, -1);
        return lua_tostring(co, -1);
    }
    if (lua_type(co, -1) == LUA_TTABLE) {
        if (sched_raw_string(co, -1, "reason"))
            reason = lua_tostring(co, -1);
        if (sched_raw_string(co, -2, "message"))
            message = lua_tostring(co, -1);
        if (reason && message)
            lua_pushfstring(co, "%s: %s", reason, message);
        else if (reason || message)
            lua_pushstring(co, reason ? reason : message);
        else
            lua_pushliteral(co, "(error object is a table value)");
        lua_replace(co, -3);
        lua_pop(co, 1);
        return lua_tostring(co, -1);
    }
    return lua_pushfstring(co, "(error object is a %s value)", luaL_typename(co, -1));
}

/* from: the thread running when the task is started from inside another
 * (so Lua counts the C calls nested so far), NULL when resumed from the
 * loop. */
static void sched_step(sched_task *t, int nargs, lua_State *from)
{
    lua_State *co = t->co;
    int nres = 0;
    sched_task *outer = sched_running_task;
    int status;

    sched_running_task = t;
    status = lua_resume(co, from, nargs, &nres);
    /* What follows is bookkeeping, charged to nobody; the task that
     * started this one (if any) is charged again once we return to it. */
    sched_running_task = NULL;

    if (status == LUA_YIELD) {
        /* Waiting for whatever it yielded for; values yielded by a script's
         * own coroutine.yield at the top level are dropped. */
        lua_pop(co, nres);
        sched_running_task = outer;
        return;
    }
    if (status != LUA_OK) {
        const char *msg = sched_error_text(co);
        if (status == LUA_ERRMEM && t->mem_exceeded) {
            lua_pushfstring(co, "memory budget of %I bytes exceeded", (lua_Integer)t->mem_budget);
            msg = lua_tostring(co, -1);
        }
        luaL_traceback(co, co, msg, 0);
        t->error = strdup(lua_tostring(co, -1));
        lua_pop(co, 1);
    }
    *sched_slot(co) = NULL;
    sched_live--;
    sched_unlink(t);
    if (t->done)
        t->done(t, co, status == LUA_OK, status == LUA_OK ? nres : 0, t->ud);
    luaL_unref(t->L, LUA_REGISTRYINDEX, t->ref);
    free(t->error);
    free(t);
    sched_running_task = outer;
}

sched_task *sched_spawn(lua_State *L, int nargs, sched_done_cb done, void *ud)
{
    return sched_spawn_budgeted(L, nargs, NULL, done, ud);
}

static void sched_set_budget(sched_task *t, unsigned long instructions);

sched_task *sched_spawn_budgeted(lua_State *L, int nargs, const sched_budget *b, sched_done_cb done, void *ud)
{
    sched_task *t = calloc(1, sizeof *t);

    if (t == NULL) {
        lua_pop(L, nargs + 1);
        return NULL;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    t->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    t->done = done;
    t->ud = ud;
    t->co = lua_newthread(L);
    t->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *sched_slot(t->co) = t;
    lua_xmove(L, t->co, nargs + 1); /* the function and its arguments */
    sched_live++;
    t->next = sched_all;
    if (sched_all)
        sched_all->prev = t;
    sched_all = t;
    if (b && b->instructions)
        sched_set_budget(t, b->instructions);
    if (b && b->memory) {
        sched_wrap_alloc(L);
        t->mem_budget = b->memory;
    }
    sched_step(t, nargs, L);
    return t;
}

static void sched_count_hook(lua_State *L, lua_Debug *ar)
{
    sched_task *t = sched_current(L);

    (void)ar;
    if (t == NULL || t->budget == 0)
        return;
    t->used += SCHED_BUDGET_STEP;
    if (t->used > t->budget)
        luaL_error(L, "instruction budget of %I exceeded", (lua_Integer)t->budget);
}

/* Counted on the task's own thread, in steps of SCHED_BUDGET_STEP. */
static void sched_set_budget(sched_task *t, unsigned long instructions)
{
    t->budget = instructions;
    t->used = 0;
    lua_sethook(t->co, instructions ? sched_count_hook : NULL, instructions ? LUA_MASKCOUNT : 0,
                SCHED_BUDGET_STEP);
}

int sched_pcall_limited(lua_State *co, int nargs, int nres, unsigned long instructions)
{
    sched_task *t = sched_current(co);
    unsigned long budget, used;
    int status;

    if (t == NULL || t->co != co || instructions == 0)
        return -1;
    budget = t->budget;
    used = t->used;
    if (budget) {
        /* no more than the task has left of its own */
        unsigned long left = used < budget ? budget - used : 1;
        if (left < instructions)
            instructions = left;
    }
    sched_set_budget(t, instructions);
    status = lua_pcall(co, nargs, nres, 0);
    used += t->used;
    sched_set_budget(t, budget);
    t->used = used;
    return status;
}

lua_State *sched_thread(sched_task *t)
{
    return t->co;
}

void sched_resume(sched_task *t, int nres)
{
    sched_step(t, nres, NULL);
}

const char *sched_error(const sched_task *t)
{
    return t->error;
}

int sched_running(void)
{
    return sched_live;
}

void sched_shutdown(void)
{
    while (sched_all) {
        sched_task *t = sched_all;
        sched_unlink(t);
        free(t->error);
        free(t);
    }
    sched_live = 0;
}
