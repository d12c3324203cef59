/* scheduler_budget.c - budgets of tasks (see scheduler.h): the accounts a
 * reconcile's tasks share, the allocator that charges memory to them, the
 * count hook that charges instructions, charges of long C calls, limited
 * calls, and the breach's one message. */
#include "scheduler_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ldebug.h"
#include "lstate.h"

#include "charge.h"
#include "pattern.h"

_Thread_local unsigned sched_match_countdown = SCHED_MATCH_BATCH;

void sched_breach(sched *s, sched_account *a, int why)
{
    if (a->breached == SCHED_BREACH_NONE) {
        a->breached = why;
        if (why != SCHED_BREACH_ENDED)
            counter_add(s->counters, COUNTER_BUDGET_BREACHES, 1);
    }
}

void *sched_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sched *s = ud;
    sched_task *t = s->running;
    sched_account *a = t ? t->acct : NULL;
    size_t old = ptr ? osize : 0; /* without ptr, osize is a type tag */
    void *p;

    if (a == NULL || (a->mem_budget == 0 && a->budget == 0))
        return s->orig_alloc(s->orig_ud, ptr, osize, nsize);
    /* after a breach every growth fails, but for the one message that
     * names it (sched_count_hook) */
    if (a->mem_budget && nsize > old && ((a->breached && !a->announcing) ||
                        a->mem_used + (ptrdiff_t)(nsize - old) > (ptrdiff_t)a->mem_budget)) {
        sched_breach(s, a, SCHED_BREACH_MEMORY);
        return NULL;
    }
    p = s->orig_alloc(s->orig_ud, ptr, osize, nsize);
    if (p && nsize > old && a->budget) {
        /* what it allocates is work too, the collector's later work on it
         * included (charged to nobody when it runs: gcstep.h); an account
         * it takes past its budget raises at the next instruction */
        unsigned long n = (nsize - old) / CHARGE_ALLOC;
        /* (for the CPU meter, each allocation is accounted as
         * CHARGE_ALLOC_CALL instructions, not charged: an allocator slower
         * than an instruction, a sanitizer's, is not time no count saw) */
        sched_meter_add(&s->accounted, CHARGE_ALLOC_CALL);
        a->used = a->used + n > a->budget ? a->budget + 1 : a->used + n;
        if (a->used > a->budget)
            sched_nudge(s);
    }
    if (p || nsize == 0) {
        a->mem_used += (ptrdiff_t)nsize - (ptrdiff_t)old;
        /* what the collector frees of others' garbage is no credit */
        if (a->mem_used < 0)
            a->mem_used = 0;
    }
    return p;
}

sched_account *sched_account_new(unsigned long instructions, size_t memory)
{
    sched_account *a = calloc(1, sizeof *a);

    if (a) {
        a->budget = instructions;
        a->mem_budget = memory;
        a->refs = 1;
    }
    return a;
}

void sched_account_unref(sched_account *a)
{
    if (a && --a->refs == 0)
        free(a);
}

/* Note where the breach happened, unless known already: the first Lua
 * function (with a line) at or above `level` of L's stack. Allocates
 * nothing, so it may run after a memory breach; L may be a coroutine that
 * died of it (its stack is kept). */
/* Whether a function's source is luaop's own Lua (lua/luaop/, embedded
 * as "@lua/luaop/..." or found on a spec's path): a breach is noted at the
 * script's line that called into it, not inside luaop. */
static int sched_is_runtime_source(const char *source)
{
    return strncmp(source, "@lua/luaop/", 11) == 0 || strstr(source, "/lua/luaop/") != NULL;
}

void sched_note_where(sched_account *a, lua_State *L, int level)
{
    lua_Debug ar;
    CallInfo *ci = L->ci, *first = NULL;

    if (a->where[0])
        return;
    /* L's calls from `level` out, walked once: lua_getstack(L, n) walks n
     * calls, and a loop of it over the stack was quadratic in its depth
     * (a breach 100,000 calls deep in luaop.copy of a table holding
     * itself: seconds inside the hook, and the watchdog's exit) */
    for (; level > 0 && ci != &L->base_ci; ci = ci->previous)
        level--;
    for (; ci != &L->base_ci; ci = ci->previous) {
        ar.i_ci = ci;
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0)
            continue;
        if (first == NULL)
            first = ci;
        if (!sched_is_runtime_source(ar.source)) {
            snprintf(a->where, sizeof a->where, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    }
    /* only luaop's own Lua on the stack: its first line */
    ar.i_ci = first;
    if (first != NULL && lua_getinfo(L, "Sl", &ar))
        snprintf(a->where, sizeof a->where, "%s:%d: ", ar.short_src, ar.currentline);
}

/* The message of a breach, pushed on L: where it happened (whichever task
 * of the account it was), then what. */
const char *sched_breach_message(lua_State *L, const sched_account *a)
{
    if (a->breached == SCHED_BREACH_WATCHDOG)
        return lua_pushfstring(L, "%sinterrupted by the watchdog: it ran without waiting for too long", a->where);
    if (a->breached == SCHED_BREACH_MEMORY)
        return lua_pushfstring(L, "%smemory budget of %I bytes exceeded", a->where, (lua_Integer)a->mem_budget);
    if (a->breached == SCHED_BREACH_ENDED)
        return lua_pushfstring(L, "%s" SCHED_ENDED, a->where);
    return lua_pushfstring(L, "%sinstruction budget of %I exceeded", a->where, (lua_Integer)a->budget);
}

/* Make L's count hook fire after count instructions. lua_sethook also
 * sets the trap of every Lua call on L's stack (settraps: a walk of all
 * its CallInfos), which a thread that has had the count mask on since its
 * calls began has set already (Lua clears a call's trap only when neither
 * the count nor the line mask is on): there only the counts change, in
 * O(1). Through lua_sethook, a stack 300,000 calls deep took some 30 ms
 * a nudge and as much again for the hook's re-arm after it, time no count
 * saw, so the CPU meter nudged again at every tick and the loop did
 * nothing else until the watchdog's exit. Called from the nudge's signal
 * handler too: the counts are plain ints Lua allows to be set there. */
static void sched_hook_count(lua_State *L, int count)
{
    if (L->hook == sched_count_hook && L->hookmask == LUA_MASKCOUNT) {
        L->basehookcount = count;
        resethookcount(L);
        return;
    }
    lua_sethook(L, sched_count_hook, LUA_MASKCOUNT, count);
}

void sched_nudge(sched *s)
{
    int n = atomic_load_explicit(&s->nresumed, memory_order_relaxed);

    for (int i = 0; i < n && i < SCHED_RESUMED_MAX; i++) {
        lua_State *L = atomic_load_explicit(&s->resumed[i], memory_order_relaxed);
        /* only a budgeted task's threads (they carry the hook); lua_sethook
         * is safe from a signal handler (ldebug.c says so; lua.c's SIGINT) */
        if (L && lua_gethook(L) == sched_count_hook)
            sched_hook_count(L, 1);
    }
}

/* Add n instructions, and the CPU time the watchdog found owed by this
 * resume, to t's account a; whether that breaches its budget now. */
static int sched_account_add(sched *s, sched_task *t, sched_account *a, unsigned long n)
{
    sched_meter_add(&s->accounted, n);
    if (atomic_load_explicit(&s->debt_ns, memory_order_relaxed)) {
        uint64_t ns = atomic_exchange_explicit(&s->debt_ns, 0, memory_order_acquire);
        /* owed by another resume (one over since): dropped */
        if (atomic_load_explicit(&s->debt_run, memory_order_relaxed) == t->run)
            n += ns / CHARGE_NS_PER > (1UL << 48) ? (1UL << 48) : (unsigned long)(ns / CHARGE_NS_PER);
    }
    if (a->budget == 0)
        return 0;
    a->used = n > a->budget ? a->budget + 1 : a->used + n;
    return a->used > a->budget;
}

/* Every SCHED_BUDGET_STEP instructions of any thread with the hook: charge
 * the task running now (its own thread, or a coroutine it resumed). Once
 * its account is breached the hook fires at every instruction and raises
 * each time, so no pcall can keep the code going. */
void sched_count_hook(lua_State *L, lua_Debug *ar)
{
    sched *s = sched_of(L);
    sched_task *t = s ? s->running : NULL;
    sched_account *a = t ? t->acct : NULL;

    (void)ar;
    if (a == NULL)
        return;
    if (!a->breached && sched_interrupted(s, t))
        sched_breach(s, a, SCHED_BREACH_WATCHDOG);
    if (!a->breached) {
        unsigned long n = SCHED_BUDGET_STEP;
        if (lua_gethookcount(L) != SCHED_BUDGET_STEP) {
            /* made to fire at every instruction: by a breach of another
             * account, or by a nudge (an interrupt, CPU time owed) */
            sched_hook_count(L, SCHED_BUDGET_STEP);
            n = 1;
        }
        if (!sched_account_add(s, t, a, n))
            return;
        sched_breach(s, a, SCHED_BREACH_INSTRUCTIONS);
    }
    if (lua_gethookcount(L) != 1)
        sched_hook_count(L, 1);
    sched_nudge(s); /* the threads that resumed this one raise at once too */
    if (!a->announced) {
        /* once, an error that names the breach and where it happened */
        a->announced = a->announcing = 1;
        sched_note_where(a, L, 0); /* in a hook, level 0 is the Lua function running */
        sched_breach_message(L, a);
        a->announcing = 0;
        lua_error(L);
    }
    /* from then on a memory error: Lua runs no message handler for one, so
     * no xpcall handler can run code (hooks may be off while it would) */
    lua_newuserdatauv(L, 1, 0);
    lua_error(L); /* not reached: that allocation fails */
}

/* Charge n instructions of work done in C (a long C call: pattern
 * matching, sorting, a collection, encoding) to the task running now, and
 * take the watchdog's interrupt meant for it: the count hook never fires
 * inside a C call. Raises on L when the account is, or now becomes,
 * breached; returns when there is no budgeted task. `why` is the breach an
 * overrun counts as (SCHED_BREACH_INSTRUCTIONS or _PATTERN). */
static void sched_charge_as(lua_State *L, unsigned long n, int why)
{
    sched *s = sched_of(L);
    sched_task *t = s ? s->running : NULL;
    sched_account *a = t ? t->acct : NULL;

    if (a == NULL)
        return;
    if (!a->breached && sched_interrupted(s, t))
        sched_breach(s, a, SCHED_BREACH_WATCHDOG);
    if (!a->breached) {
        if (!sched_account_add(s, t, a, n))
            return;
        sched_breach(s, a, why);
    }
    if (!a->announced) {
        a->announced = a->announcing = 1;
        sched_note_where(a, L, 1); /* the Lua code that called the C function */
        sched_breach_message(L, a);
        a->announcing = 0;
        lua_error(L);
    }
    lua_newuserdatauv(L, 1, 0); /* a memory error, as in sched_count_hook */
    lua_error(L);
}

void sched_charge(lua_State *L, unsigned long n)
{
    sched_charge_as(L, n, SCHED_BREACH_INSTRUCTIONS);
}

void sched_match_steps(lua_State *L)
{
    sched_match_countdown = SCHED_MATCH_BATCH;
    sched_charge_as(L, SCHED_MATCH_BATCH, SCHED_BREACH_PATTERN);
}

int sched_pcall_limited(lua_State *co, int nargs, int nres, unsigned long instructions, size_t memory)
{
    sched_task *t = sched_current(co);
    sched_account *outer, *limited;
    int status, base;

    if (t == NULL || t->co != co || instructions == 0)
        return -1;
    outer = t->acct;
    if (outer && outer->budget) {
        /* no more than the task has left of its own */
        unsigned long left = outer->used < outer->budget ? outer->budget - outer->used : 1;
        if (left < instructions)
            instructions = left;
    }
    if (outer && outer->mem_budget) {
        size_t left = outer->mem_used < (ptrdiff_t)outer->mem_budget ? outer->mem_budget - (size_t)outer->mem_used : 1;
        if (memory == 0 || left < memory)
            memory = left;
    }
    limited = sched_account_new(instructions, memory);
    if (limited == NULL)
        return luaL_error(co, "not enough memory");
    base = lua_gettop(co) - nargs - 1;
    t->acct = limited;
    lua_sethook(co, sched_count_hook, LUA_MASKCOUNT, SCHED_BUDGET_STEP);
    status = lua_pcall(co, nargs, nres, 0);
    /* a breach of the call's own budget ends with the call */
    t->acct = outer;
    if (limited->breached) {
        /* it fails the call, whatever the code made of it (an xpcall inside
         * whose handler could allocate nothing): say which budget, not "not
         * enough memory" (the message is the task's to allocate, not the
         * call's) */
        lua_settop(co, base);
        sched_breach_message(co, limited);
        status = LUA_ERRRUN;
    }
    lua_sethook(co, outer ? sched_count_hook : NULL, outer ? LUA_MASKCOUNT : 0, SCHED_BUDGET_STEP);
    if (outer) {
        outer->used += limited->used;
        outer->mem_used += limited->mem_used;
        if (outer->budget && outer->used > outer->budget)
            sched_breach(t->s, outer, SCHED_BREACH_INSTRUCTIONS);
    }
    sched_account_unref(limited);
    return status;
}
