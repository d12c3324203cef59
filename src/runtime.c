/* runtime.c - one luaop runtime (see runtime.h). */
#include "runtime.h"

#include <stdlib.h>

#include <lauxlib.h>

#include "metrics.h"
#include "scheduler.h"

static const char runtime_key = 0; /* its address keys the registry */

static void runtime_count(uv_check_t *h)
{
    ((runtime *)h->data)->iterations++;
}

runtime *runtime_new(void)
{
    runtime *rt = calloc(1, sizeof *rt);

    if (rt && ((rt->metrics = metrics_new()) == NULL || uv_loop_init(&rt->loop) != 0)) {
        metrics_free(rt->metrics);
        free(rt);
        return NULL;
    }
    if (rt) {
        rt->log = *log_default();
        uv_check_init(&rt->loop, &rt->counter);
        rt->counter.data = rt;
        uv_check_start(&rt->counter, runtime_count);
        uv_unref((uv_handle_t *)&rt->counter); /* counting keeps nothing running */
        uv_idle_init(&rt->loop, &rt->soon); /* started while a wait is to end (lbind_task.c) */
        rt->soon.data = rt;
    }
    return rt;
}

static void runtime_close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int runtime_free(runtime *rt)
{
    int r;

    if (rt == NULL)
        return 0;
    uv_close((uv_handle_t *)&rt->counter, NULL);
    uv_close((uv_handle_t *)&rt->soon, NULL);
    uv_run(&rt->loop, UV_RUN_DEFAULT);
    /* anything still open now is forgotten by its owner: close it */
    uv_walk(&rt->loop, runtime_close_handle, NULL);
    uv_run(&rt->loop, UV_RUN_DEFAULT);
    r = uv_loop_close(&rt->loop);
    sched_free(rt->sched);
    metrics_free(rt->metrics);
    if (rt->log_file)
        fclose(rt->log_file);
    free(rt);
    return r;
}

int runtime_attach(runtime *rt, lua_State *L)
{
    rt->sched = sched_new(L, &rt->counters);
    if (rt->sched == NULL)
        return -1;
    lua_pushlightuserdata(L, rt);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &runtime_key);
    return 0;
}

runtime *runtime_get(lua_State *L)
{
    runtime *rt;

    lua_rawgetp(L, LUA_REGISTRYINDEX, &runtime_key);
    rt = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return rt;
}

runtime *runtime_of(lua_State *L)
{
    runtime *rt = runtime_get(L);

    if (rt == NULL)
        luaL_error(L, "no luaop runtime runs this Lua state");
    return rt;
}

uint64_t runtime_now_ns(const runtime *rt)
{
    return rt->virtual_clock ? rt->virtual_ns : uv_hrtime();
}

double runtime_wall(const runtime *rt)
{
    uv_timeval64_t tv;

    if (rt->virtual_clock)
        return rt->virtual_wall + (double)(rt->virtual_ns - rt->virtual_base) / 1e9;
    if (uv_gettimeofday(&tv) != 0)
        return -1;
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void runtime_timer_start(runtime *rt, uv_timer_t *t, uv_timer_cb cb, uint64_t due_ns)
{
    uint64_t now = runtime_now_ns(rt);

    if (rt->virtual_clock) {
        if (due_ns <= now)
            uv_timer_start(t, cb, 0, 0);
        else
            uv_timer_stop(t);
        return;
    }
    /* counted from the loop's time, as libuv counts a timeout (its
     * milliseconds at the iteration's start, on the same monotonic clock),
     * rounded up, at least one: never early, however long the iteration
     * that starts it has run (counted from now, a timer fired early by that
     * much, and its callback, finding nothing due, woke the loop once more:
     * under load, a delayed key took three wake-ups), and never due in the
     * pass over timers that starts it (libuv runs, in the same pass, a
     * timer started there that is due by the loop's time: a task looping on
     * a sleep held the loop in its timers for good). Each callback still
     * checks its due time and starts again for the rest. */
    uint64_t loop_ns = uv_now(t->loop) * 1000000u;
    uv_timer_start(t, cb, due_ns > loop_ns ? (due_ns - loop_ns + 999999) / 1000000 : 1, 0);
}
