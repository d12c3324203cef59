/* sched.c - Lua coroutines as tasks on the event loop (see sched.h). */
#include "sched.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "ldebug.h"
#include "lstate.h"

#include "charge.h"
#include "counters.h"
#include "list.h"
#include "pattern.h"

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

/* A script, as its tasks count against it (sched.h). */
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

static void sched_count_hook(lua_State *L, lua_Debug *ar);
static sched *sched_of(lua_State *L);

/* Add to one of the CPU meter's counts: written by the loop's thread only,
 * so a plain load and store (no locked add on the allocator's path), read
 * whole by the watchdog's. */
static inline void sched_meter_add(_Atomic uint64_t *count, uint64_t n)
{
    atomic_store_explicit(count, atomic_load_explicit(count, memory_order_relaxed) + n, memory_order_relaxed);
}

static uint64_t sched_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* On the loop's thread: the watchdog's view says the resume of t (NULL:
 * none) runs, inside an outermost one begun at `since` (0: none). */
static void sched_publish(sched *s, uint64_t since, const sched_task *t)
{
    uint64_t words[SCHED_NAME_LEN / 8] = {0};
    unsigned seq = atomic_load_explicit(&s->busy_seq, memory_order_relaxed);

    s->shown = t;
    if (t)
        memcpy(words, t->name, sizeof words);
    atomic_store_explicit(&s->busy_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->busy_ns, since, memory_order_relaxed);
    atomic_store_explicit(&s->busy_run, t ? t->run : 0, memory_order_relaxed);
    for (size_t i = 0; i < SCHED_NAME_LEN / 8; i++)
        atomic_store_explicit(&s->busy_name[i], words[i], memory_order_relaxed);
    atomic_store_explicit(&s->busy_seq, seq + 2, memory_order_release);
}

void sched_busy_read(sched *s, sched_busy *b)
{
    uint64_t words[SCHED_NAME_LEN / 8];
    struct timespec pause = {0, 100000};

    memset(b, 0, sizeof *b);
    /* the loop holds it odd for a few stores: retried, and after a
     * thousand tries (the loop's thread preempted meanwhile) with a pause
     * in between; given up after a second, as "not busy" */
    for (int tries = 0; tries < 11000; tries++) {
        unsigned seq = atomic_load_explicit(&s->busy_seq, memory_order_acquire);
        if ((seq & 1) == 0) {
            uint64_t since = atomic_load_explicit(&s->busy_ns, memory_order_relaxed);
            uint64_t run = atomic_load_explicit(&s->busy_run, memory_order_relaxed);
            for (size_t i = 0; i < SCHED_NAME_LEN / 8; i++)
                words[i] = atomic_load_explicit(&s->busy_name[i], memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->busy_seq, memory_order_relaxed) == seq) {
                if (since == 0)
                    return;
                b->since = since;
                b->run = run;
                memcpy(b->name, words, sizeof b->name);
                b->name[sizeof b->name - 1] = '\0';
                if (b->name[0] == '\0')
                    snprintf(b->name, sizeof b->name, "task");
                return;
            }
        }
        if (tries >= 1000)
            nanosleep(&pause, NULL);
    }
}

uint64_t sched_busy_since(sched *s)
{
    sched_busy b;

    sched_busy_read(s, &b);
    return b.since;
}

/* Record co as inside lua_resume (the innermost), and forget it again.
 * Deeper than SCHED_RESUMED_MAX only the depth is counted. */
static void sched_resumed_push(sched *s, lua_State *co)
{
    int n = atomic_load_explicit(&s->nresumed, memory_order_relaxed);

    if (n < SCHED_RESUMED_MAX)
        atomic_store_explicit(&s->resumed[n], co, memory_order_relaxed);
    atomic_store_explicit(&s->nresumed, n + 1, memory_order_relaxed);
}

static void sched_resumed_pop(sched *s)
{
    int n = atomic_load_explicit(&s->nresumed, memory_order_relaxed) - 1;

    atomic_store_explicit(&s->nresumed, n, memory_order_relaxed);
    if (n < SCHED_RESUMED_MAX)
        atomic_store_explicit(&s->resumed[n], NULL, memory_order_relaxed);
}

/* lua_resume of co, recorded in s (when there is one) meanwhile */
static int sched_resume_in(sched *s, lua_State *co, lua_State *from, int narg, int *nres)
{
    int status;

    if (s == NULL)
        return lua_resume(co, from, narg, nres);
    sched_resumed_push(s, co);
    status = lua_resume(co, from, narg, nres);
    sched_resumed_pop(s);
    return status;
}

int sched_resume_tracked(lua_State *co, lua_State *from, int narg, int *nres)
{
    return sched_resume_in(sched_of(co), co, from, narg, nres);
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

void sched_meter_read(sched *s, uint64_t *resumes, uint64_t *accounted)
{
    *resumes = atomic_load_explicit(&s->resumes, memory_order_relaxed);
    *accounted = atomic_load_explicit(&s->accounted, memory_order_relaxed);
}

void sched_owe(sched *s, uint64_t run, uint64_t ns)
{
    atomic_store_explicit(&s->debt_run, run, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->debt_ns, ns, memory_order_release);
}

void sched_interrupt(sched *s, uint64_t run)
{
    atomic_store(&s->interrupt_run, run);
}

/* Whether the watchdog interrupted t's resume running now. */
static int sched_interrupted(sched *s, const sched_task *t)
{
    return atomic_load_explicit(&s->interrupt_run, memory_order_relaxed) == t->run;
}

/* The scheduler of L's state (any of its threads); NULL when none. */
static sched *sched_of(lua_State *L)
{
    int *slot = *(int **)lua_getextraspace(L);

    if (slot == NULL)
        return NULL;
    return *slot == SCHED_SLOT_TASK ? ((sched_task *)slot)->s : (sched *)slot;
}

static void sched_breach(sched *s, sched_account *a, int why)
{
    if (a->breached == SCHED_BREACH_NONE) {
        a->breached = why;
        if (why != SCHED_BREACH_ENDED)
            counter_add(s->counters, COUNTER_BUDGET_BREACHES, 1);
    }
}

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

static void *sched_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
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

static sched_account *sched_account_new(unsigned long instructions, size_t memory)
{
    sched_account *a = calloc(1, sizeof *a);

    if (a) {
        a->budget = instructions;
        a->mem_budget = memory;
        a->refs = 1;
    }
    return a;
}

static void sched_account_unref(sched_account *a)
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

static void sched_note_where(sched_account *a, lua_State *L, int level)
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
#define SCHED_ENDED "task ended: its script was removed or replaced"
static const char *sched_breach_message(lua_State *L, const sched_account *a)
{
    if (a->breached == SCHED_BREACH_WATCHDOG)
        return lua_pushfstring(L, "%sinterrupted by the watchdog: it ran without waiting for too long", a->where);
    if (a->breached == SCHED_BREACH_MEMORY)
        return lua_pushfstring(L, "%smemory budget of %I bytes exceeded", a->where, (lua_Integer)a->mem_budget);
    if (a->breached == SCHED_BREACH_ENDED)
        return lua_pushfstring(L, "%s" SCHED_ENDED, a->where);
    return lua_pushfstring(L, "%sinstruction budget of %I exceeded", a->where, (lua_Integer)a->budget);
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

sched_task *sched_current(lua_State *co)
{
    int *slot = *(int **)lua_getextraspace(co);

    return slot && *slot == SCHED_SLOT_TASK ? (sched_task *)slot : NULL;
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
static void sched_count_hook(lua_State *L, lua_Debug *ar)
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

_Thread_local unsigned sched_match_countdown = SCHED_MATCH_BATCH;

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
    int status;

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
    t->acct = limited;
    lua_sethook(co, sched_count_hook, LUA_MASKCOUNT, SCHED_BUDGET_STEP);
    status = lua_pcall(co, nargs, nres, 0);
    /* a breach of the call's own budget ends with the call */
    t->acct = outer;
    if (status != LUA_OK && limited->breached == SCHED_BREACH_MEMORY) {
        /* an allocation it refused: say which budget, not "not enough
         * memory" (the message is the task's to allocate, not the call's) */
        lua_pop(co, 1);
        sched_breach_message(co, limited);
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

/* ---- waits ------------------------------------------------------------- */

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
