/* lbind_fs.c - luaop.core.fs: what loading and reloading scripts needs of
 * the file system.
 *
 *   fs.kind(path) -> "file" | "directory" | "other" | nil, err (follows links)
 *   fs.list(dir) -> names of the entries, in no set order (no . or ..) | nil, err
 *   fs.watch(dir) -> a watcher of changes in dir (entries added, removed,
 *                    renamed or written: how an editor saves and how the
 *                    kubelet swaps a ConfigMap volume's ..data link)
 *   watcher:wait() -> true once something changed since the last wait or
 *                     take (yields the task until then); false when closed
 *   watcher:take() -> whether something changed since; clears it (no wait)
 *   watcher:close()
 *
 * kind and list stat and read a directory synchronously, on the loop: they
 * are for the local directories scripts live in (a ConfigMap volume is
 * tmpfs), read when a script changes, never for anything remote. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "lbind.h"
#include "sched.h"

#define LBIND_FS_WATCH_MT "luaop.fs.watcher"

static int lbind_fs_fail(lua_State *L, const char *path, int uverr)
{
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, uv_strerror(uverr));
    return 2;
}

static int lbind_fs_kind(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    uv_fs_t req;
    int r = uv_fs_stat(NULL, &req, path, NULL);

    if (r < 0) {
        uv_fs_req_cleanup(&req);
        return lbind_fs_fail(L, path, r);
    }
    if (S_ISREG(req.statbuf.st_mode))
        lua_pushliteral(L, "file");
    else if (S_ISDIR(req.statbuf.st_mode))
        lua_pushliteral(L, "directory");
    else
        lua_pushliteral(L, "other");
    uv_fs_req_cleanup(&req);
    return 1;
}

static int lbind_fs_list(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    uv_fs_t req;
    uv_dirent_t ent;
    int r = uv_fs_scandir(NULL, &req, path, 0, NULL);
    int n = 0;

    if (r < 0) {
        uv_fs_req_cleanup(&req);
        return lbind_fs_fail(L, path, r);
    }
    lua_createtable(L, r, 0);
    while (uv_fs_scandir_next(&req, &ent) != UV_EOF) {
        lua_pushstring(L, ent.name);
        lua_rawseti(L, -2, ++n);
    }
    uv_fs_req_cleanup(&req);
    return 1;
}

/* ---- watchers ------------------------------------------------------------- */

typedef struct lbind_fs_watch {
    uv_fs_event_t *ev; /* NULL once closed; freed by its close callback */
    int changed;
    sched_task *waiter;
} lbind_fs_watch;

static void lbind_fs_closed(uv_handle_t *h)
{
    free(h);
}

static void lbind_fs_event(uv_fs_event_t *ev, const char *name, int events, int status)
{
    lbind_fs_watch *w = ev->data;

    (void)name;
    (void)events;
    (void)status; /* an error is a change too: the caller looks again */
    w->changed = 1;
    if (w->waiter) {
        sched_task *t = w->waiter;
        w->waiter = NULL;
        w->changed = 0;
        lua_pushboolean(sched_thread(t), 1);
        sched_resume(t, 1);
    }
}

static int lbind_fs_watch_new(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lbind_fs_watch *w = lua_newuserdatauv(L, sizeof *w, 0);
    int r;

    memset(w, 0, sizeof *w);
    luaL_setmetatable(L, LBIND_FS_WATCH_MT);
    w->ev = malloc(sizeof *w->ev);
    if (w->ev == NULL)
        return luaL_error(L, "not enough memory");
    uv_fs_event_init(uv_default_loop(), w->ev);
    w->ev->data = w;
    r = uv_fs_event_start(w->ev, lbind_fs_event, path, 0);
    if (r < 0) {
        uv_close((uv_handle_t *)w->ev, lbind_fs_closed);
        w->ev = NULL;
        return lbind_fs_fail(L, path, r);
    }
    return 1;
}

static int lbind_fs_watch_wait_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)L;
    (void)status;
    (void)ctx;
    return 1; /* the value the waker pushed */
}

static int lbind_fs_watch_wait(lua_State *L)
{
    lbind_fs_watch *w = luaL_checkudata(L, 1, LBIND_FS_WATCH_MT);
    sched_task *t = lbind_check_task(L, "watcher:wait");

    if (w->changed || w->ev == NULL) {
        lua_pushboolean(L, w->changed);
        w->changed = 0;
        return 1;
    }
    if (w->waiter)
        return luaL_error(L, "another task is already waiting on this watcher");
    w->waiter = t;
    return lua_yieldk(L, 0, 0, lbind_fs_watch_wait_k);
}

static int lbind_fs_watch_take(lua_State *L)
{
    lbind_fs_watch *w = luaL_checkudata(L, 1, LBIND_FS_WATCH_MT);

    lua_pushboolean(L, w->changed);
    w->changed = 0;
    return 1;
}

static void lbind_fs_watch_stop(lbind_fs_watch *w)
{
    if (w->ev) {
        uv_close((uv_handle_t *)w->ev, lbind_fs_closed);
        w->ev = NULL;
    }
}

static int lbind_fs_watch_close(lua_State *L)
{
    lbind_fs_watch *w = luaL_checkudata(L, 1, LBIND_FS_WATCH_MT);

    lbind_fs_watch_stop(w);
    if (w->waiter) {
        sched_task *t = w->waiter;
        w->waiter = NULL;
        lua_pushboolean(sched_thread(t), 0);
        sched_resume(t, 1);
    }
    return 0;
}

/* Collected (or the state closing): no task can be waiting any more. */
static int lbind_fs_watch_gc(lua_State *L)
{
    lbind_fs_watch *w = luaL_checkudata(L, 1, LBIND_FS_WATCH_MT);

    w->waiter = NULL;
    lbind_fs_watch_stop(w);
    return 0;
}

static const luaL_Reg lbind_fs_funcs[] = {
    {"kind", lbind_fs_kind},
    {"list", lbind_fs_list},
    {"watch", lbind_fs_watch_new},
    {NULL, NULL},
};

int lbind_fs_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"wait", lbind_fs_watch_wait},
        {"take", lbind_fs_watch_take},
        {"close", lbind_fs_watch_close},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_FS_WATCH_MT, methods, lbind_fs_watch_gc, lbind_fs_watch_close);
    luaL_newlib(L, lbind_fs_funcs);
    return 1;
}
