/* scheduler.c - Lua coroutines as tasks on the event loop (see
 * scheduler.h): tasks spawned, stepped until they wait or end, woken by
 * their wait's token, owners and their caps; budgets are
 * scheduler_budget.c's, the watchdog's view scheduler_meter.c's. */
#include "scheduler_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* ---- owners ------------------------------------------------------------- */

sched_owner *sched_owner_new(unsigned max_tasks)
{
    sched_owner *o = calloc(1, sizeof *o);

    if (o) {
        o->refs = 1;
        o->max = max_tasks;
    }
    return o;
}

void sched_owner_unref(sched_owner *o)
{
    if (o && --o->refs == 0)
        free(o);
}

unsigned sched_owner_live(const sched_owner *o)
{
    return o->live;
}

/* The owner a task spawned now with budget b would count against: b's,
 * else the running task's. */
static sched_owner *sched_owner_for(const sched *s, const sched_budget *b)
{
    if (b && b->owner)
        return b->owner;
    return s && s->running ? s->running->owner : NULL;
}

const char *sched_spawn_refused(lua_State *L, const sched_budget *b)
{
    sched_owner *o;

    if (b && b->owner)
        return NULL; /* the runtime's choice (a reconcile): counted, never refused */
    o = sched_owner_for(sched_of(L), b);
    if (o == NULL)
        return NULL;
    if (o->ended)
        return "its script was removed or replaced: it starts no task";
    if (o->max && o->live >= o->max)
        return lua_pushfstring(L, "%d tasks of this script are live, the most it may have (--max-tasks): "
                                  "wait for some (handle:wait()) before starting more",
                               (int)o->max);
    return NULL;
}

sched *sched_new(lua_State *L, counters *c)
{
    sched *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    s->slot = SCHED_SLOT_SCHED;
    s->counters = c;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    s->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    *(sched **)lua_getextraspace(s->L) = s;
    s->orig_alloc = lua_getallocf(L, &s->orig_ud);
    lua_setallocf(L, sched_alloc, s);
    return s;
}

void sched_detach(sched *s)
{
    void *ud;

    if (s == NULL || s->L == NULL)
        return;
    if (lua_getallocf(s->L, &ud) == sched_alloc && ud == s)
        lua_setallocf(s->L, s->orig_alloc, s->orig_ud);
    if (*(sched **)lua_getextraspace(s->L) == s)
        *(sched **)lua_getextraspace(s->L) = NULL;
    s->L = NULL;
}

static void sched_unlink(sched_task *t)
{
    list_remove(&t->s->all, &t->link);
}

/* A task's thread keeps its task in the thread's extra space. */
static void sched_set_slot(lua_State *co, sched_task *t)
{
    *(sched_task **)lua_getextraspace(co) = t;
}

/* Give t an index in s->tasks; -1 when out of memory. */
static int sched_index_take(sched *s, sched_task *t)
{
    if (s->nfree > 0) {
        t->index = s->free[--s->nfree];
    } else {
        if (s->ntasks == s->cap) {
            uint32_t cap = s->cap ? 2 * s->cap : 64;
            sched_task **tasks;
            uint32_t *free_;
            if (cap <= s->cap)
                return -1;
            tasks = realloc(s->tasks, cap * sizeof *tasks);
            if (tasks == NULL)
                return -1;
            s->tasks = tasks;
            free_ = realloc(s->free, cap * sizeof *free_);
            if (free_ == NULL)
                return -1; /* the larger tasks stays: cap is the smaller */
            s->free = free_;
            s->cap = cap;
        }
        t->index = s->ntasks++;
    }
    s->tasks[t->index] = t;
    return 0;
}

static void sched_index_release(sched *s, sched_task *t)
{
    s->tasks[t->index] = NULL;
    s->free[s->nfree++] = t->index;
}

/* Pushes t[key] of the table at idx, read raw; true when it is a string. */
static int sched_raw_string(lua_State *L, int idx, const char *key)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx) == LUA_TSTRING;
}

/* The text of the error value on top of co's stack, pushed there and
 * returned. No metamethod runs (the task is over, its budget with it, and
 * a script's __tostring may never return): a table is read raw as the
 * client's errors are made, {code =, reason =, message =}, written
 * "Reason (code): message" as their __tostring writes it, and anything
 * else is named by its type, as lua.c does. */
static const char *sched_error_text(lua_State *co)
{
    const char *reason = NULL, *message = NULL;
    lua_Integer code = 0;

    if (!lua_checkstack(co, 4))
        return "(error object not shown: no stack left)";
    if (lua_type(co, -1) == LUA_TSTRING || lua_type(co, -1) == LUA_TNUMBER) {
        lua_pushvalue(co, -1);
        return lua_tostring(co, -1);
    }
    if (lua_type(co, -1) == LUA_TTABLE) {
        lua_pushliteral(co, "code");
        if (lua_rawget(co, -2) == LUA_TNUMBER && lua_isinteger(co, -1))
            code = lua_tointeger(co, -1);
        lua_pop(co, 1);
        if (sched_raw_string(co, -1, "reason"))
            reason = lua_tostring(co, -1);
        if (sched_raw_string(co, -2, "message"))
            message = lua_tostring(co, -1);
        if (reason && code > 0)
            lua_pushfstring(co, "%s (%I)%s%s", reason, (lua_Integer)code, message ? ": " : "", message ? message : "");
        else if (reason && message)
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

/* msg with the place of the innermost Lua function on co's stack in front
 * ("file:line: msg"), pushed on L: an error raised as a value (a table:
 * error(err) of an API error) carries no position of its own. */
static const char *sched_error_where(lua_State *L, lua_State *co, const char *msg)
{
    lua_Debug ar;

    for (int level = 0; lua_getstack(co, level, &ar); level++) {
        if (lua_getinfo(co, "Sl", &ar) && ar.currentline > 0)
            return lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
    }
    return msg;
}

/* Why a task failed, from its account and its error value (on top of L). */
static const char *sched_failure_of(const sched_account *a, lua_State *L)
{
    static const char *const breaches[] = {"error", "instructions", "memory", "watchdog", "pattern", "ended"};
    const char *kind = "error";

    if (a && a->breached)
        return breaches[a->breached];
    if (lua_type(L, -1) == LUA_TTABLE) {
        if (sched_raw_string(L, -1, "reason"))
            kind = "api";
        lua_pop(L, 1);
        /* luaop.terminal's value (luaop.retry): not retried */
        lua_pushliteral(L, "terminal");
        if (lua_rawget(L, -2) == LUA_TBOOLEAN && lua_toboolean(L, -1))
            kind = "terminal";
        lua_pop(L, 1);
    }
    return kind;
}

/* Why a task that did not end by itself failed (the scheduler's own
 * errors: no Lua code raised them). */
#define SCHED_YIELDED "coroutine.yield in a task's own thread, outside any coroutine the task made: " \
                      "a task yields only to wait (luaop.sleep, a request, a condition)"
#define SCHED_CLOSED "its thread was closed (coroutine.close) while it waited"

static void sched_task_disown(sched_task *t)
{
    if (t->owner) {
        t->owner->live--;
        sched_owner_unref(t->owner);
        t->owner = NULL;
    }
}

/* Run t until it waits or ends. from: the thread running when the task is
 * started from inside another (so Lua counts the C calls nested so far),
 * NULL when resumed from the loop. fail: end it now with that error
 * instead (its thread is no longer one that can be resumed). */
static void sched_step(sched_task *t, int nargs, lua_State *from, const char *fail)
{
    lua_State *co = t->co;
    sched *s = t->s;
    int nres = 0;
    sched_task *outer = s->running;
    /* what the watchdog saw before: put back when this resume is over (a
     * resume made from a done callback, where no task is running, may still
     * be inside another task's resume: that one's clock and name) */
    uint64_t since = s->since; /* 0: no resume runs below this one */
    const sched_task *shown = s->shown;
    int status = LUA_ERRRUN;

    if (fail == NULL) {
        s->running = t;
        /* the innermost task running is the one the watchdog names, by the
         * generation of this resume; the clock runs from the outermost */
        t->run = ++s->next_id;
        sched_meter_add(&s->resumes, 1);
        if (since == 0)
            s->since = sched_now_ns();
        sched_publish(s, s->since, t);
        status = sched_resume_in(s, co, from, nargs, &nres);
        s->since = since;
        sched_publish(s, since, shown);
        /* What follows is bookkeeping, charged to nobody; the task that
         * started this one (if any) is charged again once we return to it. */
        s->running = NULL;
        if (status == LUA_YIELD) {
            /* values yielded to the scheduler are dropped */
            lua_pop(co, nres);
            nres = 0;
            if (t->waiting) {
                s->running = outer;
                return;
            }
            /* a yield that is no wait: nothing would ever resume it */
            fail = SCHED_YIELDED;
        }
    } else {
        lua_pop(co, nargs);
    }
    if (fail)
        status = LUA_ERRRUN;
    if (status == LUA_OK && t->acct && t->acct->breached) {
        /* it got to its end, but a task charged to the same account (one it
         * spawned, or that spawned it) breached the budget: that fails it */
        lua_pop(co, nres);
        nres = 0;
        status = LUA_ERRRUN;
        sched_breach_message(co, t->acct);
    }
    if (status != LUA_OK) {
        /* The error's text and traceback are made on the main thread: the
         * task's stack may be full (it may have died of that). */
        lua_State *L = t->L;
        int top = lua_gettop(L);
        if (!lua_checkstack(L, LUA_MINSTACK)) {
            t->error = strdup("(error not shown: no stack left)");
        } else {
            const char *msg;
            if (fail) {
                t->failure = t->acct && t->acct->breached == SCHED_BREACH_ENDED ? "ended" : "error";
                msg = sched_error_where(L, co, fail);
            } else {
                lua_xmove(co, L, 1); /* the error value */
                t->failure = sched_failure_of(t->acct, L);
                if (t->acct && t->acct->breached && (status == LUA_ERRMEM || status == LUA_ERRERR ||
                                                      lua_type(L, -1) != LUA_TSTRING)) {
                    /* whatever a script made of the breach, it is the reason */
                    sched_note_where(t->acct, co, 0);
                    msg = sched_breach_message(L, t->acct);
                } else {
                    int where = lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER;
                    msg = sched_error_text(L);
                    if (where)
                        msg = sched_error_where(L, co, msg);
                }
            }
            luaL_traceback(L, co, msg, 0);
            t->error = strdup(lua_tostring(L, -1));
        }
        lua_settop(L, top);
    }
    /* from now on an ordinary coroutine, should anything still resume it
     * (one that failed while suspended): charged to whoever does */
    *(sched **)lua_getextraspace(co) = s;
    s->live--;
    sched_unlink(t);
    sched_index_release(s, t);
    if (t->done)
        t->done(t, co, status == LUA_OK, status == LUA_OK ? nres : 0, t->ud);
    luaL_unref(t->L, LUA_REGISTRYINDEX, t->ref);
    sched_account_unref(t->acct);
    sched_task_disown(t);
    free(t->error);
    free(t);
    s->running = outer;
}

sched_task *sched_spawn(lua_State *L, int nargs, sched_done_cb done, void *ud)
{
    return sched_spawn_budgeted(L, nargs, NULL, done, ud);
}

sched_task *sched_spawn_budgeted(lua_State *L, int nargs, const sched_budget *b, sched_done_cb done, void *ud)
{
    sched *s = sched_of(L);
    sched_task *t;
    lua_State *co;
    int ref;

    if (s == NULL) {
        lua_pop(L, nargs + 1);
        return NULL;
    }
    /* The thread first, anchored: making it may raise (the spawner's memory
     * budget), and nothing of C's is allocated yet to leak then. */
    co = lua_newthread(L);
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    t = calloc(1, sizeof *t);
    if (t == NULL)
        goto fail;
    t->slot = SCHED_SLOT_TASK;
    t->s = s;
    if (b && (b->instructions || b->memory)) {
        t->acct = sched_account_new(b->instructions, b->memory);
        if (t->acct == NULL)
            goto fail;
    }
    if (b && b->name) {
        snprintf(t->name, sizeof t->name, "%s", b->name);
    } else if (s->running && s->running->acct) {
        snprintf(t->name, sizeof t->name, "%s", s->running->name);
        /* spawned from a budgeted task: charged to the same account */
        t->acct = s->running->acct;
        t->acct->refs++;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    t->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    if (sched_index_take(s, t) != 0)
        goto fail;
    if (b && b->marked) {
        t->marked = 1;
        t->mark = b->mark;
    } else if (s->running && s->running->marked) {
        t->marked = 1;
        t->mark = s->running->mark;
    }
    t->owner = sched_owner_for(s, b);
    if (t->owner) {
        t->owner->refs++;
        t->owner->live++;
        if (t->owner->ended && t->acct == NULL) {
            /* (sched_spawn_refused said so first; unbudgeted: nothing could end it) */
            sched_task_disown(t);
        } else if (t->owner->ended) {
            sched_breach(s, t->acct, SCHED_BREACH_ENDED);
        }
    }
    t->done = done;
    t->ud = ud;
    t->co = co;
    t->ref = ref;
    sched_set_slot(t->co, t);
    lua_xmove(L, t->co, nargs + 1); /* the function and its arguments */
    s->live++;
    list_push(&s->all, &t->link);
    /* Coroutines the task creates inherit its thread's hook (lua_newthread
     * copies it), and the hook charges whatever task is running. */
    lua_sethook(t->co, t->acct ? sched_count_hook : NULL, t->acct ? LUA_MASKCOUNT : 0, SCHED_BUDGET_STEP);
    sched_step(t, nargs, L, NULL);
    return t;
fail:
    if (t)
        sched_account_unref(t->acct);
    free(t);
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    lua_pop(L, nargs + 1);
    return NULL;
}

/* ---- waits ------------------------------------------------------------- */

int sched_mark(lua_State *L, uint64_t *mark)
{
    sched *s = sched_of(L);

    if (s == NULL || s->running == NULL || !s->running->marked)
        return 0;
    *mark = s->running->mark;
    return 1;
}

sched_wait sched_wait_begin(lua_State *L)
{
    sched_task *t = sched_current(L);
    sched_wait w = {0};

    if (t == NULL || t->co != L)
        return w; /* sched_wait_yield raises */
    t->wait = ++t->s->next_id;
    t->waiting = 0;
    w.s = t->s;
    w.id = t->wait;
    w.slot = t->index;
    return w;
}

/* The continuation of every wait: the task goes on only when sched_wake
 * resumed it; any other resume (coroutine.resume of its thread, from Lua
 * code) finds it still waiting, and it yields again. ctx: the stack's top
 * when it yielded. */
static int sched_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    sched_task *t = sched_current(L);
    int top = (int)ctx;

    if (t == NULL || !t->woken) {
        lua_settop(L, top); /* what that resume passed is dropped */
        return lua_yieldk(L, 0, ctx, sched_wait_k);
    }
    t->woken = 0;
    if (t->k) {
        lua_KFunction k = t->k;
        t->k = NULL;
        return k(L, status, t->kctx);
    }
    return lua_gettop(L) - top; /* what the waker pushed */
}

int sched_wait_yield(lua_State *L, lua_KContext ctx, lua_KFunction k)
{
    sched_task *t = sched_current(L);

    if (t == NULL || t->co != L || t->wait == 0 || !lua_isyieldable(L))
        return luaL_error(L, "a wait outside a luaop task's own thread");
    t->k = k;
    t->kctx = ctx;
    t->woken = 0;
    t->waiting = 1;
    return lua_yieldk(L, 0, (lua_KContext)lua_gettop(L), sched_wait_k);
}

/* The task in the wait w now, or NULL. */
static sched_task *sched_waiter(sched_wait w)
{
    sched_task *t;

    if (w.s == NULL || w.id == 0 || w.slot >= w.s->ntasks)
        return NULL;
    t = w.s->tasks[w.slot];
    return t && t->wait == w.id && t->waiting ? t : NULL;
}

lua_State *sched_waiting(sched_wait w)
{
    sched_task *t = sched_waiter(w);

    return t ? t->co : NULL;
}

void sched_wake(sched_wait w, int nres)
{
    sched_task *t = sched_waiter(w);

    if (t == NULL)
        return;
    t->wait = 0;
    t->waiting = 0;
    if (lua_status(t->co) != LUA_YIELD) {
        /* closed meanwhile (coroutine.close): it can never go on */
        sched_step(t, nres, NULL, SCHED_CLOSED);
        return;
    }
    t->woken = 1;
    sched_step(t, nres, NULL, NULL);
}

void sched_owner_end(sched *s, sched_owner *o)
{
    sched_wait *waits = NULL;
    size_t n = 0, cap = 0, i;
    list_node *it;

    if (s == NULL || o == NULL || o->ended)
        return;
    o->ended = 1;
    /* Every task of o fails: one in a resume now at its next instruction
     * (its account breached, sticky as any breach), one waiting now, at
     * once. The waiting ones are found first, by their tokens: ending one
     * runs its done callback, which may end or start others. */
    for (it = s->all; it; it = it->next) {
        sched_task *t = list_entry(it, sched_task, link);
        if (t->owner != o)
            continue;
        if (t->acct)
            sched_breach(s, t->acct, SCHED_BREACH_ENDED);
        if (t->waiting && t->wait) {
            if (n == cap) {
                sched_wait *w = realloc(waits, (cap = cap ? cap * 2 : 16) * sizeof *w);
                if (w == NULL)
                    break; /* the rest fail when next woken (their accounts are breached) */
                waits = w;
            }
            waits[n++] = (sched_wait){s, t->wait, t->index};
        }
    }
    sched_nudge(s);
    for (i = 0; i < n; i++) {
        sched_task *t = sched_waiter(waits[i]);
        if (t == NULL)
            continue; /* ended meanwhile */
        t->wait = 0;
        t->waiting = 0;
        sched_step(t, 0, NULL, SCHED_ENDED);
    }
    free(waits);
}

const char *sched_failure(const sched_task *t)
{
    return t->failure ? t->failure : "error";
}

const char *sched_error(const sched_task *t)
{
    return t->error ? t->error : "(error not shown: out of memory)";
}

lua_State *sched_main_thread(const sched_task *t)
{
    return t->L;
}

int sched_running(const sched *s)
{
    return s->live;
}

void sched_free(sched *s)
{
    if (s == NULL)
        return;
    while (s->all) {
        sched_task *t = list_entry(s->all, sched_task, link);
        sched_unlink(t);
        sched_account_unref(t->acct);
        sched_task_disown(t);
        free(t->error);
        free(t);
    }
    free(s->tasks);
    free(s->free);
    free(s);
}
