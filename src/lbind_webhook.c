/* lbind_webhook.c - the Lua face of tlsserve.c: luaop.core.webhook, the
 * HTTPS server lua/luaop/webhook/ serves admission and conversion on.
 *
 *   server, err = webhook.start{address = ":9443", cert = FILE, key = FILE,
 *                               (neither: a self-signed certificate, made once)
 *                               max_body = BYTES, timeout = S, deadline = S}
 *       (max_body default 8 MiB; timeout: seconds a connection may do
 *       nothing, default 10; deadline: seconds for a whole request from
 *       the connection or the last reply, default 30) -> server, or nil
 *       and why (an address in use, a pair that does not load); raises on
 *       malformed options
 *   server:take() -> req | nil   (yields) the next request; nil once closed
 *   server:port() -> n           server:serial() -> hex (the certificate
 *                                served now; it changes when the files do)
 *   server:close()               stops the server; every take() returns nil
 *   (start's render = "metrics": a server whose requests may be answered
 *   with the runtime's metrics, rendered on the server's thread under the
 *   registry's lock, never on the loop: req:render() -> as reply's; the
 *   secure /metrics, luaop.metrics_secure)
 *   req.method, req.path (without the query), req.query, req.content_type,
 *   req.authorization (the header, or nil), req.remote ("addr:port"),
 *   req.body (a string)
 *   req:reply(status, content_type, body) -> true, or false when the client
 *       has gone (or the server closed, or the request was answered)
 *
 * Requests cross from the server's thread to the loop through tlsserve's
 * queue and a uv_async handle; the loop hands them to the tasks waiting in
 * take(), one each, oldest first. A request collected without a reply is
 * answered 500. */
#include "lbind.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "dbuf.h"
#include "metrics.h"
#include "runtime.h"
#include "scheduler.h"
#include "tlsserve.h"

#define LBIND_WH_MT "luaop.webhook.server"
#define LBIND_WH_REQ_MT "luaop.webhook.request"

typedef struct lbind_wh {
    tlsserve *s; /* NULL once closed */
    uv_async_t *async; /* the server thread's wake-up: a request is queued */
    sched_wait *waiting; /* of the tasks in take(), oldest first */
    int n, cap;
    int ref; /* pins the userdata while tasks wait */
    lua_State *L; /* the main thread (for the ref) */
} lbind_wh;

typedef struct lbind_wh_req {
    tlsserve_req *r; /* NULL once released */
} lbind_wh_req;

static lbind_wh *lbind_towh(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_WH_MT);
}

/* The server thread queued a request (any thread: uv_async_send is safe). */
static void lbind_wh_notify(void *arg)
{
    uv_async_send(arg);
}

static void lbind_wh_unpin(lbind_wh *w)
{
    if (w->ref != LUA_NOREF && w->n == 0) {
        luaL_unref(w->L, LUA_REGISTRYINDEX, w->ref);
        w->ref = LUA_NOREF;
    }
    /* the handle keeps the loop alive only while a task waits */
    if (w->async && w->n == 0)
        uv_unref((uv_handle_t *)w->async);
}

/* Push a request object for r onto co (its fields in the uservalue). */
static void lbind_wh_push_req(lua_State *co, tlsserve_req *r)
{
    const tlsserve_info *i = tlsserve_req_info(r);
    const char *keys[] = {"method", "path", "query", "content_type", "authorization", "remote"};
    const char *vals[] = {i->method, i->path, i->query, i->content_type, i->authorization, i->remote};
    lbind_wh_req *u = lua_newuserdatauv(co, sizeof *u, 1);

    u->r = r;
    luaL_setmetatable(co, LBIND_WH_REQ_MT);
    lua_createtable(co, 0, 7);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (vals[k] == NULL)
            continue;
        lua_pushstring(co, vals[k]);
        lua_setfield(co, -2, keys[k]);
    }
    lua_pushlstring(co, i->body, i->body_len);
    lua_setfield(co, -2, "body");
    lua_setiuservalue(co, -2, 1);
}

/* On the loop: hand queued requests to the waiting tasks (nil to all of
 * them once closed). */
static void lbind_wh_serve(uv_async_t *async)
{
    lbind_wh *w = async->data; /* alive while the handle is */

    while (w->n > 0) {
        sched_wait t = w->waiting[0];
        lua_State *co = sched_waiting(t);
        tlsserve_req *r = NULL;
        if (co != NULL && w->s != NULL && (r = tlsserve_next(w->s)) == NULL)
            break;
        memmove(w->waiting, w->waiting + 1, (size_t)(--w->n) * sizeof *w->waiting);
        if (co == NULL) { /* not the wait its task is in: dropped */
            tlsserve_release(r);
            continue;
        }
        if (r)
            lbind_wh_push_req(co, r);
        else
            lua_pushnil(co);
        sched_wake(t, 1);
    }
    lbind_wh_unpin(w);
}

/* On the server thread: the registry's text (serve.c's /metrics does the same). */
static int lbind_wh_render_metrics(void *arg, dbuf *out)
{
    return metrics_write(arg, metrics_now(), out);
}

static int lbind_wh_opt_int(lua_State *L, const char *key, lua_Integer min, lua_Integer max, lua_Integer def)
{
    lua_Integer v = def;

    if (lbind_rawfield(L, 1, key) != LUA_TNIL) {
        int ok;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < min || v > max)
            luaL_error(L, "webhook.start: %s must be a whole number from %d to %d", key, (int)min, (int)max);
    }
    lua_pop(L, 1);
    return (int)v;
}

static int lbind_wh_start(lua_State *L)
{
    tlsserve_opts o = {.name = "webhook"};
    runtime *rt = runtime_of(L);
    lbind_wh *w;
    char err[512];
    lua_Integer max_body = TLSSERVE_MAX_BODY;

    luaL_checktype(L, 1, LUA_TTABLE);
    lbind_rawfield(L, 1, "address");
    o.address = luaL_optstring(L, -1, ":9443");
    lbind_rawfield(L, 1, "cert");
    o.cert = luaL_optstring(L, -1, NULL);
    lbind_rawfield(L, 1, "key");
    o.key = luaL_optstring(L, -1, NULL);
    if ((o.cert == NULL) != (o.key == NULL))
        return luaL_error(L, "webhook.start: a cert and a key, or neither (a self-signed certificate)");
    lbind_rawfield(L, 1, "name");
    o.name = luaL_optstring(L, -1, "webhook");
    if (lbind_rawfield(L, 1, "max_body") != LUA_TNIL) {
        int ok;
        max_body = lua_tointegerx(L, -1, &ok);
        if (!ok || max_body < 1 || max_body > ((lua_Integer)1 << 31))
            return luaL_error(L, "webhook.start: max_body must be a whole number of bytes from 1 to 2Gi");
    }
    lua_pop(L, 1);
    o.max_body = (size_t)max_body;
    if (lbind_rawfield(L, 1, "render") != LUA_TNIL) {
        const char *what = lua_tostring(L, -1);
        if (what == NULL || strcmp(what, "metrics") != 0)
            return luaL_error(L, "webhook.start: render is \"metrics\" or nil");
        o.render = lbind_wh_render_metrics;
        o.render_arg = rt->metrics;
    }
    lua_pop(L, 1);
    o.timeout = lbind_wh_opt_int(L, "timeout", 1, 3600, TLSSERVE_TIMEOUT);
    o.deadline = lbind_wh_opt_int(L, "deadline", 1, 3600, TLSSERVE_DEADLINE);
    w = lua_newuserdatauv(L, sizeof *w, 0);
    memset(w, 0, sizeof *w);
    w->ref = LUA_NOREF;
    luaL_setmetatable(L, LBIND_WH_MT);
    w->async = malloc(sizeof *w->async);
    if (w->async == NULL)
        return luaL_error(L, "not enough memory");
    if (uv_async_init(&rt->loop, w->async, lbind_wh_serve) != 0) {
        free(w->async);
        w->async = NULL;
        return luaL_error(L, "not enough memory");
    }
    w->async->data = w;
    uv_unref((uv_handle_t *)w->async);
    o.notify = lbind_wh_notify;
    o.notify_arg = w->async;
    w->s = tlsserve_start(&o, err, sizeof err);
    if (w->s == NULL) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        return 2; /* the handle is closed with the userdata */
    }
    return 1;
}

static int lbind_wh_take_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)L;
    (void)status;
    (void)ctx;
    return 1; /* what lbind_wh_serve pushed */
}

static int lbind_wh_take(lua_State *L)
{
    lbind_wh *w = lbind_towh(L);

    lbind_check_task(L, "webhook server:take");
    if (w->s == NULL) {
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
    uv_ref((uv_handle_t *)w->async);
    /* a request queued already is handed over by the loop, too */
    uv_async_send(w->async);
    return sched_wait_yield(L, 0, lbind_wh_take_k);
}

static int lbind_wh_port(lua_State *L)
{
    lbind_wh *w = lbind_towh(L);

    if (w->s == NULL)
        return luaL_error(L, "the webhook server is closed");
    lua_pushinteger(L, tlsserve_port(w->s));
    return 1;
}

static int lbind_wh_serial(lua_State *L)
{
    lbind_wh *w = lbind_towh(L);
    char serial[96];

    if (w->s == NULL)
        return luaL_error(L, "the webhook server is closed");
    tlsserve_serial(w->s, serial, sizeof serial);
    lua_pushstring(L, serial);
    return 1;
}

static void lbind_wh_stop(lbind_wh *w)
{
    if (w->s == NULL)
        return;
    tlsserve_stop(w->s);
    w->s = NULL;
    if (w->async && w->n > 0)
        uv_async_send(w->async); /* the waiting tasks get nil */
}

static int lbind_wh_close(lua_State *L)
{
    lbind_wh_stop(lbind_towh(L));
    return 0;
}

static void lbind_wh_closed(uv_handle_t *h)
{
    free(h);
}

static int lbind_wh_gc(lua_State *L)
{
    lbind_wh *w = lbind_towh(L);

    lbind_wh_stop(w); /* nobody waits: the waiters pin it */
    free(w->waiting);
    w->waiting = NULL;
    w->n = w->cap = 0;
    if (w->async) {
        uv_close((uv_handle_t *)w->async, lbind_wh_closed);
        w->async = NULL;
    }
    return 0;
}

/* ---- requests ------------------------------------------------------------------ */

static int lbind_wh_reply(lua_State *L)
{
    lbind_wh_req *u = luaL_checkudata(L, 1, LBIND_WH_REQ_MT);
    lua_Integer status = luaL_checkinteger(L, 2);
    const char *type = luaL_optstring(L, 3, "text/plain; charset=utf-8");
    size_t len = 0;
    const char *body = luaL_optlstring(L, 4, "", &len);

    luaL_argcheck(L, status >= 100 && status <= 599, 2, "an HTTP status, 100 to 599");
    lua_pushboolean(L, u->r != NULL && tlsserve_reply(u->r, (int)status, type, body, len));
    return 1;
}

/* req:render() -> true | false: 200 with the runtime's metrics text */
static int lbind_wh_render(lua_State *L)
{
    lbind_wh_req *u = luaL_checkudata(L, 1, LBIND_WH_REQ_MT);

    lua_pushboolean(L, u->r != NULL &&
                           tlsserve_reply_rendered(u->r, 200, "text/plain; version=0.0.4; charset=utf-8"));
    return 1;
}

static int lbind_wh_req_index(lua_State *L)
{
    const char *key = lua_tostring(L, 2);

    if (key && strcmp(key, "reply") == 0) {
        lua_pushcfunction(L, lbind_wh_reply);
        return 1;
    }
    if (key && strcmp(key, "render") == 0) {
        lua_pushcfunction(L, lbind_wh_render);
        return 1;
    }
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
}

static int lbind_wh_req_gc(lua_State *L)
{
    lbind_wh_req *u = luaL_checkudata(L, 1, LBIND_WH_REQ_MT);

    tlsserve_release(u->r); /* unanswered: 500 */
    u->r = NULL;
    return 0;
}

int lbind_webhook_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"take", lbind_wh_take},
        {"port", lbind_wh_port},
        {"serial", lbind_wh_serial},
        {"close", lbind_wh_close},
        {NULL, NULL},
    };
    static const luaL_Reg funcs[] = {
        {"start", lbind_wh_start},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_WH_MT, methods, lbind_wh_gc, NULL);
    if (luaL_newmetatable(L, LBIND_WH_REQ_MT)) {
        lua_pushcfunction(L, lbind_wh_req_index);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, lbind_wh_req_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    luaL_newlib(L, funcs);
    return 1;
}
