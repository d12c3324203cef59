/* runtime_test.c - two runtimes in one process: each its own loop, Lua
 * state, scheduler and log, tasks sleeping and waking on their own loop only, a work queue's
 * timer on its runtime's loop, and both torn down cleanly. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lbind.h"
#include "luaembed.h"
#include "runtime.h"
#include "scheduler.h"
#include "tap.h"

typedef struct one {
    runtime *rt;
    lua_State *L;
    int ended, ok;
    char error[256];
    char logpath[128];
} one;

static void one_done(sched_task *t, lua_State *co, int ok, int nres, void *ud)
{
    one *o = ud;

    (void)co;
    (void)nres;
    o->ended = 1;
    o->ok = ok;
    if (!ok)
        snprintf(o->error, sizeof o->error, "%s", sched_error(t));
}

/* A runtime running `code` as a task (luaop.core as `core`, `name` given). */
static int one_start(one *o, const char *name, const char *code)
{
    memset(o, 0, sizeof *o);
    o->rt = runtime_new();
    o->L = luaL_newstate();
    if (o->rt == NULL || o->L == NULL)
        return -1;
    if (runtime_attach(o->rt, o->L) != 0)
        return -1;
    luaL_openlibs(o->L);
    luaL_getsubtable(o->L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(o->L, luaopen_luaop_core);
    lua_setfield(o->L, -2, "luaop.core");
    lua_pop(o->L, 1);
    luaembed_preload(o->L);
    lua_pushstring(o->L, name);
    lua_setglobal(o->L, "name");
    snprintf(o->logpath, sizeof o->logpath, "build/runtime_test.%s.%ld.log", name, (long)getpid());
    remove(o->logpath);
    lua_pushstring(o->L, o->logpath);
    lua_setglobal(o->L, "logpath");
    if (luaL_loadstring(o->L, code) != LUA_OK)
        return -1;
    return sched_spawn(o->L, 0, one_done, o) ? 0 : -1;
}

static const char *global(one *o, const char *name)
{
    lua_getglobal(o->L, name);
    const char *s = lua_tostring(o->L, -1);
    lua_pop(o->L, 1);
    return s ? s : "(nil)";
}

/* Whether the file at path holds text. */
static int file_has(const char *path, const char *text)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

int main(void)
{
    static const char code[] =
        "local core = require 'luaop.core'\n"
        "core.log.setup{path = logpath}\n"
        "core.log.write(0, 'test', 'from ' .. name)\n"
        "local q = core.workqueue.new()\n"
        "local t0 = core.task.now()\n"
        "q:add_after(name, name == 'a' and 0.05 or 0.1)\n"
        "core.task.sleep(0.02)\n"
        "local key = q:take()\n"
        "took = key .. ' after ' .. (core.task.now() - t0 >= (name == 'a' and 0.05 or 0.1) and 'its delay' or 'too early')\n";
    one a, b;

    TAP_OK(one_start(&a, "a", code) == 0 && one_start(&b, "b", code) == 0, "two runtimes start in one process");
    TAP_OK(&a.rt->loop != &b.rt->loop, "each has a loop of its own");
    TAP_OK(a.rt->sched && b.rt->sched && a.rt->sched != b.rt->sched, "each has a scheduler of its own");
    TAP_OK(sched_running(a.rt->sched) == 1 && sched_running(b.rt->sched) == 1, "each scheduler holds its own task");
    /* a's loop alone: only a's tasks move */
    while (!a.ended && uv_run(&a.rt->loop, UV_RUN_ONCE))
        ;
    TAP_OK(a.ended && a.ok, a.ended && !a.ok ? a.error : "a's task ran to its end on a's loop");
    TAP_OK(strcmp(global(&a, "took"), "a after its delay") == 0, "a's delayed key came from a's queue timer");
    TAP_OK(!b.ended && strcmp(global(&b, "took"), "(nil)") == 0, "b's task waits: nothing of b ran on a's loop");
    TAP_OK(sched_running(a.rt->sched) == 0 && sched_running(b.rt->sched) == 1, "a's task ended in a's scheduler only");
    while (!b.ended && uv_run(&b.rt->loop, UV_RUN_ONCE))
        ;
    TAP_OK(b.ended && b.ok, b.ended && !b.ok ? b.error : "b's task ran to its end on b's loop");
    TAP_OK(strcmp(global(&b, "took"), "b after its delay") == 0, "b's delayed key came from b's queue timer");
    TAP_OK(a.rt->iterations > 0 && b.rt->iterations > 0, "each loop counted its own wake-ups");
    lbind_task_shutdown(a.rt);
    lbind_task_shutdown(b.rt);
    lua_close(a.L);
    lua_close(b.L);
    TAP_OK(runtime_free(a.rt) == 0 && runtime_free(b.rt) == 0, "both close their loops with nothing left open");
    TAP_OK(file_has(a.logpath, "from a") && !file_has(a.logpath, "from b"), "a's log has a's line only");
    TAP_OK(file_has(b.logpath, "from b") && !file_has(b.logpath, "from a"), "b's log has b's line only");
    remove(a.logpath);
    remove(b.logpath);
    return tap_done();
}
