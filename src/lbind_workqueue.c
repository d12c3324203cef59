/* lbind_workqueue.c - the Lua face of workqueue.c: luaop.core.workqueue.
 *
 *   q = workqueue.new({base_delay =, max_delay =, qps =, burst =, name =,
 *                      metrics_owner =} [, now])
 *       (defaults: client-go's 0.005, 1000, 10, 100; with a name, the
 *       queue keeps client-go's workqueue_* metrics under it in the
 *       runtime's registry, with name and controller both the name,
 *       charged to metrics_owner (metrics.owner; none: the runtime's own);
 *       none at all when the registry refuses them: an owner at its cap)
 *   q:tune({base_delay =, max_delay =, qps =, burst =} [, now])  new backoff
 *       and bucket parameters (defaults as new's), every key kept
 *       (workqueue_tune)
 *   q:add(key)  q:add_after(key, seconds [, now])  q:add_rate_limited(key [, now])
 *   q:when(key [, now]) -> seconds       q:forget(key)   q:requeues(key) -> n
 *   q:get() -> key | nil                 q:done(key)
 *   q:tick([now])  q:next_ready() -> time | nil
 *   q:take() -> key | nil   (yields) the next key, once one is ready: a
 *     timer of the runtime's loop moves delayed keys in when they come due,
 *     and the loop hands ready keys to the waiting tasks, one each per
 *     iteration (so a worker yields to the loop between any two keys, and
 *     nobody polls); nil after q:wake() (the caller looks again) or once
 *     shut down and empty
 *   q:wake()  every task in q:take() returns nil
 *   q:shutdown()  q:shutting_down() -> boolean
 *   q:stats() -> {depth, waiting, processing, adds, retries}
 *
 * `now` is seconds on a monotonic clock; it defaults to the loop's clock,
 * and specs pass their own to drive time by hand. Bad arguments raise. */
#include "lbind.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "metrics.h"
#include "runtime.h"
#include "scheduler.h"
#include "workqueue.h"

#define LBIND_WQ_MT "luaop.workqueue"

typedef struct lbind_wq {
    workqueue *q;
    runtime *rt;
    uv_timer_t *timer; /* once a task took: when the next delayed key is due */
    uv_idle_t *ready;  /* active while a waiting task can be served */
    sched_wait *waiting; /* of the tasks in q:take(), oldest first */
    int n, cap;
    int ref;           /* pins the userdata while tasks wait */
    lua_State *L;      /* the main thread (for the ref) */
    int wake_all;      /* q:wake() or shutdown: every waiter gets nil */
    /* its workqueue_* metrics, when named */
    metrics *m;
    metrics_series *depth, *adds, *latency, *work, *unfinished, *longest, *retries;
    unsigned long adds_seen, retries_seen;
    list_node link; /* in rt->queues while it has a timer */
} lbind_wq;

static void lbind_wq_arm(lbind_wq *w);

/* A key's due time (seconds, as the queue keeps it) on the runtime's clock
 * in ns: never at or before now unless it is due by the queue's own
 * comparison, so a timer that fires always finds it ready (seconds and ns
 * round apart: a timer armed at 0 for a key the queue holds back would
 * fire again and again in one turn of the loop). */
static uint64_t lbind_wq_due_ns(const runtime *rt, double due, double now)
{
    uint64_t now_ns = runtime_now_ns(rt), ns;

    if (due <= now)
        return now_ns;
    if (!(due - now <= 365.0 * 24 * 3600))
        due = now + 365.0 * 24 * 3600; /* a delay of math.huge: look again in a year */
    ns = (uint64_t)ceil(due * 1e9);
    return ns > now_ns ? ns : now_ns + 1;
}

/* The wq at 1 (raises when it is not one). */
static lbind_wq *lbind_towq(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_WQ_MT);
}

static workqueue *lbind_wq_check(lua_State *L)
{
    lbind_wq *w = lbind_towq(L);

    if (w->q == NULL)
        luaL_error(L, "the work queue is closed");
    return w->q;
}

/* the runtime's clock, in seconds */
static double lbind_wq_clock(const runtime *rt)
{
    return (double)runtime_now_ns(rt) / 1e9;
}

static double lbind_wq_now(lua_State *L, int idx)
{
    return lua_isnoneornil(L, idx) ? lbind_wq_clock(runtime_of(L)) : luaL_checknumber(L, idx);
}

static int lbind_wq_oom(lua_State *L, int rc)
{
    if (rc != 0)
        return luaL_error(L, "not enough memory");
    return 0;
}

#define LBIND_WQ_NSERIES 7

/* The series of a named queue, charged to owner (NULL: the runtime's):
 * all of them, or none when the registry refuses one (the queue works
 * without). */
static void lbind_wq_metrics(lua_State *L, lbind_wq *w, const char *name, metrics_owner *owner)
{
    static const char *const families[LBIND_WQ_NSERIES] = {
        "workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds", "workqueue_retries_total"};
    metrics_series **series[LBIND_WQ_NSERIES] = {&w->depth,      &w->adds,    &w->latency, &w->work,
                                                 &w->unfinished, &w->longest, &w->retries};
    const char *values[] = {name, name, ""}; /* the depth's priority: none */
    runtime *rt = runtime_of(L);
    char err[160];

    for (size_t i = 0; i < LBIND_WQ_NSERIES; i++) {
        *series[i] = metrics_get(rt->metrics, owner, families[i], values, i == 0 ? 3 : 2, err, sizeof err);
        if (*series[i] == NULL) {
            for (size_t j = 0; j < i; j++) {
                metrics_release(rt->metrics, *series[j]);
                *series[j] = NULL;
            }
            return;
        }
    }
    w->m = rt->metrics;
}

/* Its series let go (at collection). */
static void lbind_wq_metrics_release(lbind_wq *w)
{
    metrics_series **series[LBIND_WQ_NSERIES] = {&w->depth,      &w->adds,    &w->latency, &w->work,
                                                 &w->unfinished, &w->longest, &w->retries};

    if (w->m == NULL)
        return;
    for (size_t i = 0; i < LBIND_WQ_NSERIES; i++) {
        metrics_release(w->m, *series[i]);
        *series[i] = NULL;
    }
    w->m = NULL;
}

/* After a change: the depth, and the adds and retries counted since. */
static void lbind_wq_count(lbind_wq *w)
{
    workqueue_stats st;

    if (w->m == NULL || w->q == NULL)
        return;
    workqueue_stats_get(w->q, &st);
    metrics_set(w->m, w->depth, (double)st.depth);
    if (st.adds > w->adds_seen)
        metrics_add(w->m, w->adds, (double)(st.adds - w->adds_seen));
    if (st.retries > w->retries_seen)
        metrics_add(w->m, w->retries, (double)(st.retries - w->retries_seen));
    w->adds_seen = st.adds;
    w->retries_seen = st.retries;
}

/* A key handed out: how long it waited; its work starts. */
static void lbind_wq_started(lbind_wq *w, const char *key)
{
    double queued, started;

    if (w->m == NULL || workqueue_times(w->q, key, &queued, &started) != 0)
        return;
    metrics_observe(w->m, w->latency, started - queued);
    metrics_inflight_start(w->m, w->unfinished, started);
    metrics_inflight_start(w->m, w->longest, started);
    lbind_wq_count(w);
}

/* A key's work is done (before workqueue_done forgets when it started). */
static void lbind_wq_finished(lbind_wq *w, const char *key)
{
    double queued, started;

    if (w->m == NULL || workqueue_times(w->q, key, &queued, &started) != 0)
        return;
    metrics_observe(w->m, w->work, metrics_now() - started);
    metrics_inflight_end(w->m, w->unfinished, started);
    metrics_inflight_end(w->m, w->longest, started);
}

static double lbind_wq_field(lua_State *L, int idx, const char *key, double def)
{
    double v = def;

    if (lbind_rawfield(L, idx, key) != LUA_TNIL)
        v = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The backoff and bucket parameters of the table at idx (raises when bad). */
static void lbind_wq_opts(lua_State *L, int idx, workqueue_opts *o)
{
    o->base_delay = lbind_wq_field(L, idx, "base_delay", 0.005);
    o->max_delay = lbind_wq_field(L, idx, "max_delay", 1000);
    o->qps = lbind_wq_field(L, idx, "qps", 10);
    double burst = lbind_wq_field(L, idx, "burst", 100);

    /* (a double past an int's range is no int: held at a billion) */
    o->burst = burst >= 1e9 ? 1000000000 : burst >= 1 ? (int)burst : 1;
    if (!(o->base_delay >= 0 && o->max_delay >= o->base_delay))
        luaL_error(L, "need 0 <= base_delay <= max_delay");
}

static int lbind_wq_new(lua_State *L)
{
    workqueue_opts o = {0};
    lbind_wq *w;
    double now = lbind_wq_now(L, 2);

    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lbind_wq_opts(L, 1, &o);
    w = lua_newuserdatauv(L, sizeof *w, 0);
    memset(w, 0, sizeof *w);
    w->ref = LUA_NOREF;
    luaL_setmetatable(L, LBIND_WQ_MT);
    o.clock = metrics_now;
    w->q = workqueue_new(&o, now);
    if (w->q == NULL)
        return luaL_error(L, "not enough memory");
    if (lbind_rawfield(L, 1, "name") != LUA_TNIL) {
        const char *name = luaL_checkstring(L, -1); /* on the stack */
        metrics_owner *owner;
        lbind_rawfield(L, 1, "metrics_owner");
        owner = lbind_metrics_owner(L, -1);
        lbind_wq_metrics(L, w, name, owner);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 1;
}

/* After a change: hand ready keys to waiting tasks, or time the next. */
static int lbind_wq_changed(lua_State *L, int rc)
{
    lbind_wq_count(lbind_towq(L));
    lbind_wq_arm(lbind_towq(L));
    return lbind_wq_oom(L, rc);
}

static int lbind_wq_tune(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);
    workqueue_opts o = {0};
    double now = lbind_wq_now(L, 3);

    luaL_checktype(L, 2, LUA_TTABLE);
    lbind_wq_opts(L, 2, &o);
    workqueue_tune(q, &o, now);
    return lbind_wq_changed(L, 0);
}

static int lbind_wq_add(lua_State *L)
{
    return lbind_wq_changed(L, workqueue_add(lbind_wq_check(L), luaL_checkstring(L, 2)));
}

static int lbind_wq_add_after(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    return lbind_wq_changed(L, workqueue_add_after(q, luaL_checkstring(L, 2), luaL_checknumber(L, 3),
                                                   lbind_wq_now(L, 4)));
}

static int lbind_wq_add_rate_limited(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    return lbind_wq_changed(L, workqueue_add_rate_limited(q, luaL_checkstring(L, 2), lbind_wq_now(L, 3)));
}

static int lbind_wq_when(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);

    lua_pushnumber(L, workqueue_when(q, luaL_checkstring(L, 2), lbind_wq_now(L, 3)));
    return 1;
}

static int lbind_wq_forget(lua_State *L)
{
    workqueue_forget(lbind_wq_check(L), luaL_checkstring(L, 2));
    return 0;
}

static int lbind_wq_requeues(lua_State *L)
{
    lua_pushinteger(L, workqueue_requeues(lbind_wq_check(L), luaL_checkstring(L, 2)));
    return 1;
}

static int lbind_wq_get(lua_State *L)
{
    const char *key = workqueue_get(lbind_wq_check(L));

    if (key) {
        lbind_wq_started(lbind_towq(L), key);
        lua_pushstring(L, key);
    }
    else
        lua_pushnil(L);
    return 1;
}

static int lbind_wq_done(lua_State *L)
{
    workqueue *q = lbind_wq_check(L);
    const char *key = luaL_checkstring(L, 2);

    lbind_wq_finished(lbind_towq(L), key);
    workqueue_done(q, key);
    return lbind_wq_changed(L, 0); /* a key added meanwhile is queued again */
}

static int lbind_wq_tick(lua_State *L)
{
    workqueue_tick(lbind_wq_check(L), lbind_wq_now(L, 2));
    return 0;
}

static int lbind_wq_next_ready(lua_State *L)
{
    double t = workqueue_next_ready(lbind_wq_check(L));

    if (t < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, t);
    return 1;
}

static int lbind_wq_shutdown(lua_State *L)
{
    workqueue_shutdown(lbind_wq_check(L));
    return lbind_wq_changed(L, 0);
}

/* ---- take: waiting for a key, woken by the loop's timer ------------------- */

static void lbind_wq_unpin(lbind_wq *w)
{
    if (w->ref != LUA_NOREF && w->n == 0) {
        luaL_unref(w->L, LUA_REGISTRYINDEX, w->ref);
        w->ref = LUA_NOREF;
    }
}

/* On the loop, once an iteration while active: move due keys in, hand
 * ready ones to the tasks waiting now (oldest first), nil to all of them
 * when woken or shut down and empty. A task that takes again waits for the
 * next iteration, so the loop polls for I/O between any two keys. */
static void lbind_wq_serve(uv_idle_t *idle)
{
    lbind_wq *w = idle->data; /* pinned while tasks wait: alive until unpinned below */
    int serve = w->n;
    int wake_all = w->wake_all;

    if (w->q == NULL)
        return;
    w->wake_all = 0;
    workqueue_tick(w->q, lbind_wq_clock(w->rt));
    while (serve-- > 0 && w->n > 0 && w->q) {
        sched_wait t = w->waiting[0];
        lua_State *co = sched_waiting(t);
        if (co == NULL) {
            /* not the wait its task is in: dropped, before it takes a key */
            memmove(w->waiting, w->waiting + 1, (size_t)(--w->n) * sizeof *w->waiting);
            continue;
        }
        const char *key = workqueue_get(w->q);
        if (key == NULL && !wake_all && !workqueue_shutting_down(w->q))
            break;
        memmove(w->waiting, w->waiting + 1, (size_t)(--w->n) * sizeof *w->waiting);
        if (key) {
            lbind_wq_started(w, key);
            lua_pushstring(co, key);
        } else {
            lua_pushnil(co);
        }
        sched_wake(t, 1); /* may add, take or wake again: arms anew */
    }
    if (w->q)
        lbind_wq_arm(w);
    lbind_wq_unpin(w);
}

/* The next delayed key is due: move it in and serve. */
static void lbind_wq_due(uv_timer_t *timer)
{
    lbind_wq *w = timer->data;

    if (w->q == NULL)
        return;
    workqueue_tick(w->q, lbind_wq_clock(w->rt));
    lbind_wq_arm(w);
}

/* While tasks wait: serve on the next iteration when one can be served,
 * and time the next delayed key (never early: rounded up to the loop's
 * milliseconds; a timer that fires a little early finds nothing due and
 * arms again). Nothing runs while nobody waits: the next take looks
 * itself (and an armed handle would keep the loop alive for nobody). */
static void lbind_wq_arm(lbind_wq *w)
{
    workqueue_stats st;
    double due, now;

    if (w->timer == NULL || w->q == NULL)
        return;
    if (w->n == 0) {
        uv_idle_stop(w->ready);
        uv_timer_stop(w->timer);
        return;
    }
    workqueue_stats_get(w->q, &st);
    if (st.depth > 0 || w->wake_all || workqueue_shutting_down(w->q))
        uv_idle_start(w->ready, lbind_wq_serve);
    else
        uv_idle_stop(w->ready);
    due = workqueue_next_ready(w->q);
    if (due < 0) {
        uv_timer_stop(w->timer);
        return;
    }
    now = lbind_wq_clock(w->rt);
    if (due - now > 365.0 * 24 * 3600)
        due = now + 365.0 * 24 * 3600; /* requeue_after(math.huge): look again in a year */
    runtime_timer_start(w->rt, w->timer, lbind_wq_due, lbind_wq_due_ns(w->rt, due, now));
}

void lbind_workqueue_clock_moved(runtime *rt)
{
    for (list_node *n = rt->queues; n; n = n->next)
        lbind_wq_arm(list_entry(n, lbind_wq, link));
}

int lbind_workqueue_next_due(runtime *rt, uint64_t *due)
{
    int any = 0;

    for (list_node *n = rt->queues; n; n = n->next) {
        lbind_wq *w = list_entry(n, lbind_wq, link);
        double d = w->q && w->n > 0 ? workqueue_next_ready(w->q) : -1;
        uint64_t ns = d >= 0 ? lbind_wq_due_ns(rt, d, lbind_wq_clock(rt)) : 0;
        if (d >= 0 && (!any || ns < *due)) {
            *due = ns;
            any = 1;
        }
    }
    return any;
}

static int lbind_wq_take_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)L;
    (void)status;
    (void)ctx;
    return 1; /* what lbind_wq_serve pushed */
}

static int lbind_wq_take(lua_State *L)
{
    lbind_wq *w = lbind_towq(L);
    workqueue *q = lbind_wq_check(L);
    workqueue_stats st;

    lbind_check_task(L, "workqueue:take");
    if (w->timer == NULL) {
        runtime *rt = runtime_of(L);
        w->timer = malloc(sizeof *w->timer);
        w->ready = malloc(sizeof *w->ready);
        if (w->timer == NULL || w->ready == NULL) {
            free(w->timer);
            free(w->ready);
            w->timer = NULL;
            w->ready = NULL;
            return luaL_error(L, "not enough memory");
        }
        uv_timer_init(&rt->loop, w->timer);
        uv_idle_init(&rt->loop, w->ready);
        w->timer->data = w->ready->data = w;
        w->rt = rt;
        list_push(&rt->queues, &w->link);
    }
    /* even a key ready now is handed over by the loop: waits first */
    workqueue_stats_get(q, &st);
    if (workqueue_shutting_down(q) && st.depth == 0) {
        lua_pushnil(L);
        return 1;
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 4;
        sched_wait *ws = realloc(w->waiting, (size_t)cap * sizeof *ws);
        if (ws == NULL)
            return luaL_error(L, "not enough memory");
        w->waiting = ws;
        w->cap = cap;
    }
    if (w->ref == LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
        w->L = lua_tothread(L, -1);
        lua_pop(L, 1);
        lua_pushvalue(L, 1);
        w->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    w->waiting[w->n++] = sched_wait_begin(L);
    lbind_wq_arm(w);
    return sched_wait_yield(L, 0, lbind_wq_take_k);
}

static int lbind_wq_wake(lua_State *L)
{
    lbind_wq *w = lbind_towq(L);

    lbind_wq_check(L);
    if (w->n > 0) {
        w->wake_all = 1;
        lbind_wq_arm(w);
    }
    return 0;
}

static int lbind_wq_shutting_down(lua_State *L)
{
    lua_pushboolean(L, workqueue_shutting_down(lbind_wq_check(L)));
    return 1;
}

static int lbind_wq_stats(lua_State *L)
{
    workqueue_stats s;

    workqueue_stats_get(lbind_wq_check(L), &s);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)s.depth);
    lua_setfield(L, -2, "depth");
    lua_pushinteger(L, (lua_Integer)s.waiting);
    lua_setfield(L, -2, "waiting");
    lua_pushinteger(L, (lua_Integer)s.processing);
    lua_setfield(L, -2, "processing");
    lua_pushinteger(L, (lua_Integer)s.adds);
    lua_setfield(L, -2, "adds");
    lua_pushinteger(L, (lua_Integer)s.retries);
    lua_setfield(L, -2, "retries");
    lua_pushinteger(L, (lua_Integer)s.chunks);
    lua_setfield(L, -2, "chunks");
    return 1;
}

static void lbind_wq_handle_closed(uv_handle_t *h)
{
    free(h);
}

static int lbind_wq_gc(lua_State *L)
{
    lbind_wq *w = lbind_towq(L);

    workqueue_free(w->q);
    w->q = NULL;
    lbind_wq_metrics_release(w);
    free(w->waiting); /* nobody waits: the waiters pin it */
    w->waiting = NULL;
    w->n = w->cap = 0;
    if (w->timer) {
        list_remove(&w->rt->queues, &w->link);
        uv_close((uv_handle_t *)w->timer, lbind_wq_handle_closed);
        uv_close((uv_handle_t *)w->ready, lbind_wq_handle_closed);
        w->timer = NULL;
        w->ready = NULL;
    }
    return 0;
}

int lbind_workqueue_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"tune", lbind_wq_tune},
        {"add", lbind_wq_add},
        {"add_after", lbind_wq_add_after},
        {"add_rate_limited", lbind_wq_add_rate_limited},
        {"when", lbind_wq_when},
        {"forget", lbind_wq_forget},
        {"requeues", lbind_wq_requeues},
        {"get", lbind_wq_get},
        {"done", lbind_wq_done},
        {"tick", lbind_wq_tick},
        {"next_ready", lbind_wq_next_ready},
        {"take", lbind_wq_take},
        {"wake", lbind_wq_wake},
        {"shutdown", lbind_wq_shutdown},
        {"shutting_down", lbind_wq_shutting_down},
        {"stats", lbind_wq_stats},
        {NULL, NULL},
    };
    static const luaL_Reg funcs[] = {
        {"new", lbind_wq_new},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_WQ_MT, methods, lbind_wq_gc, NULL);
    luaL_newlib(L, funcs);
    return 1;
}
