/* lbind_kit.c - luaop.core.kit: what the test kit (lua/luaop/testing/init.lua)
 * drives, so a script's controllers run to completion in a spec without
 * waiting for wall time:
 *
 *   kit.virtual_clock([wall]) the runtime's clock (task.now, task.wall,
 *     sleeps, cond timeouts, work queue delays and rate limits) stands
 *     still, at wall seconds since the epoch (default: now), until moved
 *   kit.real_clock()  back to the monotonic and wall clocks (what still
 *     waits keeps its due time on the virtual clock's scale)
 *   kit.advance(seconds)  move it: sleeps and delayed keys whose time came
 *     are started (they run at the next kit.run)
 *   kit.next_due() -> seconds | nil  until the next sleep ends or delayed
 *     key comes due (nil: nothing waits on time)
 *   kit.run([max]) -> iterations  run the loop until nothing is ready at
 *     the clock's present time (waiting for file reads on the thread pool
 *     meanwhile); at most max iterations (default 10^6). Not from a task:
 *     it drives the loop that runs them.
 *   kit.clock() -> seconds  the real monotonic clock, whatever the
 *     virtual one says (the kit's wall deadlines: luaop.testing.guard)
 *   kit.alarm(seconds, message [, thread]) | kit.alarm()  the runner's wall
 *     deadline: once seconds pass, thread (default: the one that armed it;
 *     luaop --test's runner gives each test a coroutine of its own) raises
 *     "where: message" at its next instruction, and at every one after it
 *     (a test that catches the error with pcall and goes on is stopped at
 *     its next instruction outside the pcall: the thread ends). SIGALRM sets
 *     a count hook then, as lua.c does for ^C: no hook costs every
 *     instruction meanwhile. kit.alarm() disarms it. One in a process
 *   kit.duration(text) -> seconds | nil, why  a duration as luaop's flags
 *     read one (--test-timeout: "30s", "2m", "1.5", "1m30s"), above 0 and
 *     at most 10^9 s (LUAOP_TEST_TIMEOUT)
 *   kit.kind(path), kit.list(dir)  core.fs's kind and list, answered at
 *     once, blocking (the spec files and manifests a test names: each trip
 *     to the thread pool and back woke a thread, and the loop waited) */
#include "lbind.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <lauxlib.h>
#include <uv.h>

#include "runtime.h"
#include "scheduler.h"
#include "str.h"

static runtime *lbind_kit_virtual(lua_State *L, const char *what)
{
    runtime *rt = runtime_of(L);

    if (!rt->virtual_clock)
        luaL_error(L, "%s needs the virtual clock (kit.virtual_clock)", what);
    return rt;
}

static int lbind_kit_virtual_clock(lua_State *L)
{
    runtime *rt = runtime_of(L);
    double wall = luaL_optnumber(L, 1, -1);

    if (!rt->virtual_clock) {
        if (lua_isnoneornil(L, 1) && (wall = runtime_wall(rt)) < 0)
            return luaL_error(L, "cannot read the clock");
        rt->virtual_ns = uv_hrtime(); /* what waits already keeps its due time */
        rt->virtual_clock = 1;
    } else if (lua_isnoneornil(L, 1)) {
        return 0;
    }
    luaL_argcheck(L, isfinite(wall) && wall >= 0, 1, "a wall time is seconds since the epoch");
    rt->virtual_wall = wall;
    rt->virtual_base = rt->virtual_ns;
    lbind_task_clock_moved(rt);
    lbind_workqueue_clock_moved(rt);
    return 0;
}

static int lbind_kit_real_clock(lua_State *L)
{
    runtime *rt = runtime_of(L);

    if (rt->virtual_clock) {
        rt->virtual_clock = 0;
        lbind_task_clock_moved(rt);
        lbind_workqueue_clock_moved(rt);
    }
    return 0;
}

static int lbind_kit_advance(lua_State *L)
{
    runtime *rt = lbind_kit_virtual(L, "kit.advance");
    double secs = luaL_checknumber(L, 1);

    luaL_argcheck(L, secs >= 0 && secs <= 100.0 * 365 * 24 * 3600, 1, "seconds from 0 to 100 years");
    rt->virtual_ns += (uint64_t)ceil(secs * 1e9);
    lbind_task_clock_moved(rt);
    lbind_workqueue_clock_moved(rt);
    return 0;
}

static int lbind_kit_next_due(lua_State *L)
{
    runtime *rt = lbind_kit_virtual(L, "kit.next_due");
    uint64_t a = 0, b = 0, now = runtime_now_ns(rt);
    int has_a = lbind_task_next_due(rt, &a), has_b = lbind_workqueue_next_due(rt, &b);
    uint64_t due;

    if (!has_a && !has_b) {
        lua_pushnil(L);
        return 1;
    }
    due = !has_a ? b : !has_b ? a : a < b ? a : b;
    lua_pushnumber(L, due > now ? (lua_Number)(due - now) / 1e9 : 0);
    return 1;
}

static int lbind_kit_run(lua_State *L)
{
    runtime *rt = runtime_of(L);
    lua_Integer max = luaL_optinteger(L, 1, 1000000), n = 0;

    if (sched_current(L) != NULL)
        return luaL_error(L, "kit.run drives the loop that runs tasks: call it from outside any task");
    while (n < max) {
        n++;
        if (!uv_run(&rt->loop, UV_RUN_NOWAIT))
            break; /* nothing active at all */
        if (uv_backend_timeout(&rt->loop) == 0)
            continue; /* more is ready now */
        if (rt->fs_jobs == NULL)
            break; /* only what waits on time or on a task */
        uv_run(&rt->loop, UV_RUN_ONCE); /* a file read on the thread pool: wait for it */
    }
    lua_pushinteger(L, n);
    return 1;
}

static int lbind_kit_clock(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)uv_hrtime() / 1e9);
    return 1;
}

static const char KIT_ALARM_MESSAGE[] = "luaop.kit.alarm";
static const char KIT_ALARM_THREAD[] = "luaop.kit.alarm.thread";
static lua_State *volatile kit_alarm_L; /* the thread kit.alarm interrupts, or NULL */

static void kit_alarm_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    /* the hook stays: every later instruction of the thread raises again */
    luaL_where(L, 0); /* (in a hook, level 0 is the function it interrupted) */
    lua_getfield(L, LUA_REGISTRYINDEX, KIT_ALARM_MESSAGE);
    lua_concat(L, 2);
    lua_error(L);
}

/* lua_sethook may be called from a signal handler (Lua's manual). */
static void kit_alarm_signal(int sig)
{
    lua_State *L = kit_alarm_L;

    (void)sig;
    if (L != NULL)
        lua_sethook(L, kit_alarm_hook, LUA_MASKCOUNT, 1);
}

static int lbind_kit_alarm(lua_State *L)
{
    struct itimerval it;

    memset(&it, 0, sizeof it);
    if (lua_isnoneornil(L, 1)) {
        setitimer(ITIMER_REAL, &it, NULL);
        if (kit_alarm_L != NULL && lua_gethook(kit_alarm_L) == kit_alarm_hook)
            lua_sethook(kit_alarm_L, NULL, 0, 0); /* fired as the test ended */
        kit_alarm_L = NULL;
        lua_pushnil(L);
        lua_setfield(L, LUA_REGISTRYINDEX, KIT_ALARM_THREAD);
        return 0;
    }
    lua_Number secs = luaL_checknumber(L, 1);
    struct sigaction sa;
    lua_State *target = L;

    luaL_argcheck(L, secs > 0 && secs <= 1e9, 1, "seconds from 0 to 10^9");
    luaL_checkstring(L, 2);
    if (!lua_isnoneornil(L, 3)) {
        target = lua_tothread(L, 3);
        luaL_argcheck(L, target != NULL, 3, "a thread (coroutine) is needed");
    }
    if (kit_alarm_L != NULL && lua_gethook(kit_alarm_L) == kit_alarm_hook)
        lua_sethook(kit_alarm_L, NULL, 0, 0); /* a thread armed before */
    lua_pushvalue(L, 2);
    lua_setfield(L, LUA_REGISTRYINDEX, KIT_ALARM_MESSAGE);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = kit_alarm_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return luaL_error(L, "kit.alarm: %s", strerror(errno));
    if (target == L)
        lua_pushthread(L); /* anchored while armed: the handler never reaches a collected thread */
    else
        lua_pushvalue(L, 3);
    lua_setfield(L, LUA_REGISTRYINDEX, KIT_ALARM_THREAD);
    kit_alarm_L = target;
    it.it_value.tv_sec = (time_t)secs;
    it.it_value.tv_usec = (suseconds_t)((secs - (lua_Number)it.it_value.tv_sec) * 1e6);
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    if (setitimer(ITIMER_REAL, &it, NULL) != 0) {
        kit_alarm_L = NULL;
        return luaL_error(L, "kit.alarm: %s", strerror(errno));
    }
    return 0;
}

static int lbind_kit_duration(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    double secs = 0;

    if (str_parse_duration(text, &secs) != 0 || !isfinite(secs) || secs <= 0 || secs > 1e9) {
        lua_pushnil(L);
        lua_pushfstring(L, "a duration above 0 and at most 10^9 s, such as 30s or 2m, is needed, not \"%s\"", text);
        return 2;
    }
    lua_pushnumber(L, secs);
    return 1;
}

static int lbind_kit_fail(lua_State *L, const char *path, int err)
{
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, uv_strerror(-err));
    return 2;
}

static int lbind_kit_kind(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;

    if (stat(path, &st) != 0)
        return lbind_kit_fail(L, path, errno);
    lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "directory" : "other");
    return 1;
}

/* The directory kit.list reads, closed by its __gc should a push raise. */
static int lbind_kit_dir_gc(lua_State *L)
{
    DIR **box = lua_touserdata(L, 1);

    if (box != NULL && *box != NULL) {
        closedir(*box);
        *box = NULL;
    }
    return 0;
}

static int lbind_kit_list(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    DIR **box = lua_newuserdatauv(L, sizeof *box, 0);
    struct dirent *e;
    lua_Integer n = 0;

    *box = NULL;
    if (luaL_newmetatable(L, "luaop.kit.dir")) {
        lua_pushcfunction(L, lbind_kit_dir_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    *box = opendir(path);
    if (*box == NULL)
        return lbind_kit_fail(L, path, errno);
    lua_newtable(L);
    while ((e = readdir(*box)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(*box);
    *box = NULL;
    return 1;
}

int lbind_kit_open(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"virtual_clock", lbind_kit_virtual_clock},
        {"real_clock", lbind_kit_real_clock},
        {"advance", lbind_kit_advance},
        {"next_due", lbind_kit_next_due},
        {"run", lbind_kit_run},
        {"clock", lbind_kit_clock},
        {"alarm", lbind_kit_alarm},
        {"duration", lbind_kit_duration},
        {"kind", lbind_kit_kind},
        {"list", lbind_kit_list},
        {NULL, NULL},
    };

    luaL_newlib(L, funcs);
    return 1;
}
