/* lbind_fs.c - luaop.core.fs: what loading and reloading scripts needs of
 * the file system.
 *
 *   fs.kind(path) -> "file" | "directory" | "other" | nil, err (follows links)
 *   fs.list(dir) -> names of the entries, in no set order (no . or ..) | nil, err
 *   fs.read(path) -> the file's bytes | nil, err
 *   fs.watch(dir) -> a watcher of changes in dir (entries added, removed,
 *                    renamed or written: how an editor saves and how the
 *                    kubelet swaps a ConfigMap volume's ..data link)
 *   watcher:wait() -> true once something changed since the last wait or
 *                     take (yields the task until then); false when closed
 *   watcher:take() -> whether something changed since; clears it (no wait)
 *   watcher:close()
 *
 * kind, list and read yield the task: the file system is touched on libuv's
 * thread pool, never on the loop. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <uv.h>

#include "lbind.h"
#include "dbuf.h"
#include "runtime.h"
#include "scheduler.h"
#include "str.h"

#define LBIND_FS_WATCH_MT "luaop.fs.watcher"

static int lbind_fs_fail(lua_State *L, const char *path, int uverr)
{
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, uv_strerror(uverr));
    return 2;
}

/* ---- kind, list, read: on the thread pool ------------------------------- */

typedef enum { LBIND_FS_KIND, LBIND_FS_LIST, LBIND_FS_READ } lbind_fs_op;

/* fs.read reads no file larger than this (a script, a kubeconfig) */
#define LBIND_FS_MAX_READ ((size_t)256 << 20)

typedef struct lbind_fs_job lbind_fs_job;
struct lbind_fs_job {
    uv_work_t work;
    sched_wait wait; /* of the task; {0} once its Lua state is gone */
    lbind_fs_op op;
    char *path;
    int err;       /* a negated errno, or 0 */
    const char *kind;
    dbuf data;     /* READ: the bytes; LIST: the names, each NUL-terminated */
    size_t count;  /* LIST: how many names */
    runtime *rt;
    list_node link; /* in rt->fs_jobs: every job not yet done */
};

/* On a pool thread: plain blocking calls, no Lua. */
static void lbind_fs_work(uv_work_t *w)
{
    lbind_fs_job *j = w->data;

    if (j->op == LBIND_FS_KIND) {
        struct stat st;
        if (stat(j->path, &st) != 0)
            j->err = -errno;
        else
            j->kind = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "directory" : "other";
    } else if (j->op == LBIND_FS_LIST) {
        DIR *d = opendir(j->path);
        struct dirent *e;
        if (d == NULL) {
            j->err = -errno;
            return;
        }
        while (j->err == 0 && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (dbuf_append(&j->data, e->d_name, strlen(e->d_name) + 1) != 0)
                j->err = -ENOMEM;
            j->count++;
        }
        closedir(d);
    } else {
        j->err = -dbuf_read_file(&j->data, j->path, LBIND_FS_MAX_READ);
    }
}

static void lbind_fs_job_free(lbind_fs_job *j)
{
    list_remove(&j->rt->fs_jobs, &j->link);
    free(j->path);
    dbuf_free(&j->data);
    free(j);
}

/* Back on the loop: hand the outcome to the task. */
static void lbind_fs_done(uv_work_t *w, int status)
{
    lbind_fs_job *j = w->data;
    sched_wait wait = j->wait;
    lua_State *co = sched_waiting(wait);
    int n = 1;

    if (co == NULL) {
        lbind_fs_job_free(j); /* not the wait its task is in: dropped */
        return;
    }
    if (status < 0 || j->err < 0) {
        n = lbind_fs_fail(co, j->path, status < 0 ? status : j->err);
    } else if (j->op == LBIND_FS_KIND) {
        lua_pushstring(co, j->kind);
    } else if (j->op == LBIND_FS_READ) {
        lua_pushlstring(co, j->data.data ? j->data.data : "", j->data.len);
    } else {
        const char *p = j->data.data;
        lua_createtable(co, (int)j->count, 0);
        for (size_t i = 1; i <= j->count; i++) {
            lua_pushstring(co, p);
            lua_rawseti(co, -2, (lua_Integer)i);
            p += strlen(p) + 1;
        }
    }
    lbind_fs_job_free(j);
    sched_wake(wait, n);
}

static int lbind_fs_start(lua_State *L, lbind_fs_op op, const char *what)
{
    const char *path = luaL_checkstring(L, 1);
    runtime *rt = runtime_of(L);
    lbind_fs_job *j;
    int r;

    lbind_check_task(L, what);
    j = calloc(1, sizeof *j);
    if (j == NULL || (j->path = str_dup(path)) == NULL) {
        free(j);
        return luaL_error(L, "not enough memory");
    }
    j->wait = sched_wait_begin(L);
    j->op = op;
    j->rt = rt;
    j->work.data = j;
    r = uv_queue_work(&j->rt->loop, &j->work, lbind_fs_work, lbind_fs_done);
    if (r < 0) {
        free(j->path);
        free(j);
        return lbind_fs_fail(L, path, r);
    }
    list_push(&j->rt->fs_jobs, &j->link);
    return sched_wait_yield(L, 0, NULL);
}

static int lbind_fs_kind(lua_State *L)
{
    return lbind_fs_start(L, LBIND_FS_KIND, "fs.kind");
}

static int lbind_fs_list(lua_State *L)
{
    return lbind_fs_start(L, LBIND_FS_LIST, "fs.list");
}

static int lbind_fs_read(lua_State *L)
{
    return lbind_fs_start(L, LBIND_FS_READ, "fs.read");
}

void lbind_fs_shutdown(runtime *rt)
{
    for (list_node *n = rt->fs_jobs; n; n = n->next)
        list_entry(n, lbind_fs_job, link)->wait = (sched_wait){0}; /* its task is gone with the Lua state: done only frees it */
}

/* ---- watchers ------------------------------------------------------------- */

typedef struct lbind_fs_watch {
    uv_fs_event_t *ev; /* NULL once closed; freed by its close callback */
    int changed;
    sched_wait waiter;
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
    if (w->waiter.id) {
        sched_wait t = w->waiter;
        lua_State *co = sched_waiting(t);
        w->waiter = (sched_wait){0};
        if (co) {
            w->changed = 0;
            lua_pushboolean(co, 1);
            sched_wake(t, 1);
        }
    }
}

static int lbind_fs_watch_new(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    runtime *rt = runtime_of(L);
    lbind_fs_watch *w = lua_newuserdatauv(L, sizeof *w, 0);
    int r;

    memset(w, 0, sizeof *w);
    luaL_setmetatable(L, LBIND_FS_WATCH_MT);
    w->ev = malloc(sizeof *w->ev);
    if (w->ev == NULL)
        return luaL_error(L, "not enough memory");
    uv_fs_event_init(&rt->loop, w->ev);
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

/* The fs watch at 1 (raises when it is not one). */
static lbind_fs_watch *lbind_tofswatch(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_FS_WATCH_MT);
}

static int lbind_fs_watch_wait(lua_State *L)
{
    lbind_fs_watch *w = lbind_tofswatch(L);

    lbind_check_task(L, "watcher:wait");
    if (w->changed || w->ev == NULL) {
        lua_pushboolean(L, w->changed);
        w->changed = 0;
        return 1;
    }
    if (sched_waiting(w->waiter))
        return luaL_error(L, "another task is already waiting on this watcher");
    w->waiter = sched_wait_begin(L);
    return sched_wait_yield(L, 0, lbind_fs_watch_wait_k);
}

static int lbind_fs_watch_take(lua_State *L)
{
    lbind_fs_watch *w = lbind_tofswatch(L);

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
    lbind_fs_watch *w = lbind_tofswatch(L);

    lbind_fs_watch_stop(w);
    if (w->waiter.id) {
        sched_wait t = w->waiter;
        lua_State *co = sched_waiting(t);
        w->waiter = (sched_wait){0};
        if (co) {
            lua_pushboolean(co, 0);
            sched_wake(t, 1);
        }
    }
    return 0;
}

/* Collected (or the state closing): no task can be waiting any more. */
static int lbind_fs_watch_gc(lua_State *L)
{
    lbind_fs_watch *w = lbind_tofswatch(L);

    w->waiter = (sched_wait){0};
    lbind_fs_watch_stop(w);
    return 0;
}

static const luaL_Reg lbind_fs_funcs[] = {
    {"kind", lbind_fs_kind},
    {"list", lbind_fs_list},
    {"read", lbind_fs_read},
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
