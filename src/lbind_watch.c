/* lbind_watch.c - streaming watches for Lua: luaop.core.api.watch.
 *
 *   w = api.watch{path =, timeout =, accept =, shard =, list =}   starts a GET that streams (no yield)
 *   w:next() -> line | nil, status, body [, reason] | nil   (yields until one comes)
 *   w:next_event([cut [, shallow]]) -> type, object, text | false, line | next()'s end
 *                          (the line taken apart as json.event's, where it lies)
 *   w:dropped() -> the events left out by shard (below)
 *   w:close()
 *
 * The API server writes one JSON watch event per line; lines are queued in C
 * as they arrive (inside curl's callback, where no Lua may run) and handed
 * out one per next(). At the end of the stream next()
 * returns nil (clean end) or nil, status, body (an error: status 0 and a
 * message for a transport error; reason "FrameTooLarge" when a line was
 * longer than LBIND_WATCH_MAX_FRAME: the watch is ended there, so that one
 * endless line costs that much memory and no more).
 *
 * shard: a set of hash ranges ({lo, last} pairs, luaop.shard.ranges): an
 * event certainly of an object whose namespace hashes outside them
 * (shard_event_kept) is left out as it arrives, never queued or decoded
 * (a sharded informer whose API server does not apply its shardSelector).
 *
 * list: the GET is a LIST, read as it arrives (listsplit.h): each item
 * queued as the line of an ADDED event, {"type":"ADDED","object":ITEM},
 * with `list` (the apiVersion and kind a list's items leave out, as
 * "\"apiVersion\":...,\"kind\":...", or "") put first in the object;
 * and once the answer ended whole, the rest of the list as the last line,
 * {"type":"LIST","object":{... "items":[]}}. A malformed list ends it with
 * reason "MalformedList" (an item over 16 MiB: "FrameTooLarge"). */
#include "lbind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <uv.h>

#include "api.h"
#include "dbuf.h"
#include "listsplit.h"
#include "runtime.h"
#include "scheduler.h"
#include "shard.h"

#define LBIND_WATCH_MT "luaop.watch"

/* The longest watch event read: client-go's (apimachinery's streaming
 * decoder's maxBytes). An object is at most etcd's request limit (1.5 MiB
 * by default); an event is that object and a few bytes. */
#define LBIND_WATCH_MAX_FRAME (16u * 1024 * 1024)

/* The most bytes of lines read and not yet handed out: past it the stream
 * is paused (the server's writes wait in TCP, as a Go watcher's do behind
 * its decoder), and read again once half of them went. A server that
 * sends faster than the informer takes costs this much, no more. */
#define LBIND_WATCH_MAX_QUEUED (16u * 1024 * 1024)

typedef struct lbind_line lbind_line;
struct lbind_line {
    lbind_line *next;
    size_t len;
    char data[];
};

typedef struct lbind_watch {
    api_call *call; /* while streaming */
    sched_wait waiter; /* of the task in next() */
    int ended;
    long status;
    char *error;
    const char *reason; /* of the end, when luaop ended it (static) */
    dbuf partial; /* an incomplete line */
    lua_State *L;  /* the main thread */
    lbind_line *head, *tail; /* lines not yet handed out */
    size_t queued; /* their bytes */
    int paused;    /* the stream waits for lines to go (LBIND_WATCH_MAX_QUEUED) */
    int taking;    /* next_event is taking the head line apart where it lies */
    int self;      /* registry ref keeping the userdata alive while streaming */
    uv_idle_t *wake; /* wakes the waiter from the loop, not from inside curl */
    int sharded;     /* only the events of objects in keep are queued */
    shard_set keep;
    lua_Integer dropped; /* events left out */
    int list;            /* a LIST read as it arrives */
    listsplit split;
    char *prefix;        /* what each item's object begins with */
    size_t prefix_len;
} lbind_watch;

static void lbind_watch_unpin(lbind_watch *w)
{
    if (w->self != LUA_NOREF) {
        luaL_unref(w->L, LUA_REGISTRYINDEX, w->self);
        w->self = LUA_NOREF;
    }
}

/* Unlink and free the line at the head (handed out), resuming a paused
 * stream when few enough are left. */
static void lbind_watch_drop_head(lbind_watch *w)
{
    lbind_line *l = w->head;

    w->head = l->next;
    if (w->head == NULL)
        w->tail = NULL;
    w->queued -= l->len;
    free(l);
    if (w->paused && w->queued <= LBIND_WATCH_MAX_QUEUED / 2 && w->call) {
        w->paused = 0;
        api_resume(w->call); /* (its lines may come before this returns) */
    }
}

/* Push the next queued line onto L; 0 when there is none. */
static int lbind_watch_pop(lbind_watch *w, lua_State *L)
{
    if (w->head == NULL)
        return 0;
    lua_pushlstring(L, w->head->data, w->head->len); /* may raise on OOM: unlinked after */
    lbind_watch_drop_head(w);
    return 1;
}

static void lbind_watch_clear(lbind_watch *w)
{
    while (w->head) {
        lbind_line *l = w->head;
        w->head = l->next;
        free(l);
    }
    w->tail = NULL;
    w->queued = 0;
}

/* Push the end: nil, or nil, status, error. */
static int lbind_watch_push_end(lbind_watch *w, lua_State *L)
{
    lua_pushnil(L);
    if (w->error == NULL)
        return 1;
    lua_pushinteger(L, w->status);
    lua_pushstring(L, w->error);
    if (w->reason == NULL)
        return 3;
    lua_pushstring(L, w->reason);
    return 4;
}

static void lbind_watch_wake_cb(uv_idle_t *h);

static void lbind_watch_wake(lbind_watch *w)
{
    sched_wait t = w->waiter;
    lua_State *co;
    int n;

    if (t.id == 0 || (w->head == NULL && !w->ended))
        return;
    if (w->taking) { /* (next_event reads the head: the waiter is woken from the loop after) */
        if (w->wake)
            uv_idle_start(w->wake, lbind_watch_wake_cb);
        return;
    }
    if ((co = sched_waiting(t)) == NULL) {
        w->waiter = (sched_wait){0}; /* not the wait its task is in: the lines stay */
        return;
    }
    if (lbind_watch_pop(w, co))
        n = 1;
    else
        n = lbind_watch_push_end(w, co);
    w->waiter = (sched_wait){0};
    sched_wake(t, n);
}

static void lbind_watch_wake_cb(uv_idle_t *h)
{
    lbind_watch *w = h->data;

    uv_idle_stop(h);
    lbind_watch_wake(w);
}

static void lbind_watch_wake_closed(uv_handle_t *h)
{
    free(h);
}

/* Queue a line made (l->len bytes), or free it when the shard leaves its
 * object out. */
static void lbind_watch_link(lbind_watch *w, lbind_line *l)
{
    if (w->sharded && !shard_event_kept(&w->keep, l->data, l->len)) {
        w->dropped++;
        free(l);
        return;
    }
    l->next = NULL;
    w->queued += l->len;
    if (w->tail)
        w->tail->next = l;
    else
        w->head = l;
    w->tail = l;
}

/* Queue a line; 0, or -1 when out of memory. */
static int lbind_watch_line(lbind_watch *w, const char *s, size_t n)
{
    lbind_line *l;

    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    if (n == 0)
        return 0;
    l = malloc(sizeof *l + n);
    if (l == NULL)
        return -1;
    l->len = n;
    memcpy(l->data, s, n);
    lbind_watch_link(w, l);
    return 0;
}

/* Queue the line {"type":TYPE,"object":OBJ}, with `prefix` put first in
 * the object (OBJ begins with its brace); 0, or -1 when out of memory. */
static int lbind_watch_wrap(lbind_watch *w, const char *type, const char *obj, size_t n, const char *prefix,
                            size_t prefix_len)
{
    static const char head[] = "{\"type\":\"", mid[] = "\",\"object\":";
    size_t t = strlen(type), i = 1;
    int comma;
    lbind_line *l;

    if (n < 2 || obj[0] != '{') /* (an object, its brace first: listsplit's items and envelope are) */
        return -1;
    while (i < n && (obj[i] == ' ' || obj[i] == '\t' || obj[i] == '\n' || obj[i] == '\r'))
        i++;
    comma = prefix_len > 0 && i < n && obj[i] != '}'; /* (an empty object takes the prefix alone) */
    l = malloc(sizeof *l + sizeof head - 1 + t + sizeof mid - 1 + 1 + prefix_len + (size_t)comma + (n - 1) + 1);
    if (l == NULL)
        return -1;
    char *p = l->data;
    memcpy(p, head, sizeof head - 1), p += sizeof head - 1;
    memcpy(p, type, t), p += t;
    memcpy(p, mid, sizeof mid - 1), p += sizeof mid - 1;
    *p++ = '{';
    memcpy(p, prefix, prefix_len), p += prefix_len;
    if (comma)
        *p++ = ',';
    memcpy(p, obj + 1, n - 1), p += n - 1;
    *p++ = '}';
    l->len = (size_t)(p - l->data);
    lbind_watch_link(w, l);
    return 0;
}

/* listsplit's callback: an item, queued as an ADDED event's line. */
static int lbind_watch_item(const char *item, size_t len, void *ud)
{
    lbind_watch *w = ud;

    return lbind_watch_wrap(w, "ADDED", item, len, w->prefix ? w->prefix : "", w->prefix_len);
}

/* Whether n more bytes would make the line being read longer than a frame
 * may be; if so the watch's end says so, and the partial line goes. */
static int lbind_watch_too_long(lbind_watch *w, size_t n)
{
    if (n <= LBIND_WATCH_MAX_FRAME - w->partial.len)
        return 0;
    w->reason = "FrameTooLarge"; /* the transfer ends: lbind_watch_done says why */
    dbuf_free(&w->partial);
    return 1;
}

static int lbind_watch_data(const char *data, size_t len, void *ud)
{
    lbind_watch *w = ud;
    const char *end = data + len, *nl;

    if (w->queued >= LBIND_WATCH_MAX_QUEUED) {
        w->paused = 1; /* none of this chunk is taken: it comes again on resume */
        if (w->waiter.id && w->head)
            uv_idle_start(w->wake, lbind_watch_wake_cb);
        return HTTP_DATA_PAUSE;
    }
    if (w->list) {
        enum listsplit_error e = listsplit_feed(&w->split, data, len, lbind_watch_item, w);
        if (e == LISTSPLIT_TOO_LARGE || e == LISTSPLIT_MALFORMED)
            w->reason = e == LISTSPLIT_TOO_LARGE ? "FrameTooLarge" : "MalformedList";
        if (e != LISTSPLIT_OK)
            return 1; /* the transfer ends: lbind_watch_done says why */
        data = end; /* (no line of its own: woken below) */
    }
    while ((nl = memchr(data, '\n', (size_t)(end - data))) != NULL) {
        if (lbind_watch_too_long(w, (size_t)(nl - data)))
            return 1;
        if (w->partial.len > 0) {
            /* finish the line begun in an earlier chunk */
            int r = dbuf_append(&w->partial, data, (size_t)(nl - data)) != 0 ||
                    lbind_watch_line(w, w->partial.data, w->partial.len) != 0;
            dbuf_clear(&w->partial);
            if (r)
                return 1;
        } else if (lbind_watch_line(w, data, (size_t)(nl - data)) != 0) {
            return 1;
        }
        data = nl + 1;
    }
    if (data < end && (lbind_watch_too_long(w, (size_t)(end - data)) ||
                       dbuf_append(&w->partial, data, (size_t)(end - data)) != 0))
        return 1;
    /* This runs inside a curl callback, where Lua code (which may start or
     * cancel requests) must not run: wake the waiter from the loop. */
    if (w->waiter.id && w->head)
        uv_idle_start(w->wake, lbind_watch_wake_cb);
    return 0;
}

/* Why luaop ended the stream (w->reason), as its error's text. */
static char *lbind_watch_reason_text(const lbind_watch *w)
{
    char msg[160];

    if (strcmp(w->reason, "MalformedList") == 0) {
        snprintf(msg, sizeof msg, "malformed list: %s", w->split.error ? w->split.error : "no list");
        return strdup(msg);
    }
    return strdup(w->list ? "a list item longer than 16 MiB, the most luaop reads: the list is ended"
                          : "a watch event longer than 16 MiB, the most luaop reads: the watch is ended");
}

static void lbind_watch_done(const http_response *r, void *ud)
{
    lbind_watch *w = ud;

    w->call = NULL;
    w->ended = 1;
    w->status = r->status;
    if (w->partial.len > 0) {
        lbind_watch_line(w, w->partial.data, w->partial.len); /* a last line without \n */
        dbuf_clear(&w->partial);
    }
    if (w->list && !w->reason && !r->error && r->status >= 200 && r->status <= 299) {
        /* the list's end: the rest of it, once it was whole */
        if (listsplit_finish(&w->split) != LISTSPLIT_OK) {
            w->reason = "MalformedList";
        } else {
            size_t n;
            const char *env = listsplit_envelope(&w->split, &n);
            if (lbind_watch_wrap(w, "LIST", env, n, "", 0) != 0)
                w->error = strdup("not enough memory for the list's end");
        }
    }
    if (w->error == NULL) {
        if (w->reason)
            w->error = lbind_watch_reason_text(w);
        else if (r->error)
            w->error = strdup(r->error);
        else if (r->status < 200 || r->status > 299)
            w->error = strdup(r->body_len ? r->body : "the watch failed");
    }
    /* Unpinned before the waiter runs: its stack keeps w alive meanwhile,
     * and once it has run w may be closed and collected, so nothing here
     * may touch w after the wake. */
    lbind_watch_unpin(w);
    lbind_watch_wake(w);
}

/* api.watch{path =, timeout =, accept =, shard =, list =} -> a watch */
static int lbind_watch_start(lua_State *L)
{
    runtime *rt = runtime_of(L);
    api_spec s = {0};
    lbind_watch *w;

    if (rt->api == NULL)
        return luaL_error(L, "no API server is configured");
    luaL_checktype(L, 1, LUA_TTABLE);
    if (lbind_rawfield(L, 1, "path") != LUA_TSTRING || lua_tostring(L, -1)[0] != '/')
        return luaL_error(L, "api.watch needs a path that starts with /");
    s.path = lua_tostring(L, -1); /* anchored: it stays on the stack */
    if (lbind_rawfield(L, 1, "timeout") != LUA_TNIL)
        s.timeout_ms = (long)(luaL_checknumber(L, -1) * 1000);
    lua_pop(L, 1);
    if (lbind_rawfield(L, 1, "accept") != LUA_TNIL)
        s.accept = luaL_checkstring(L, -1); /* anchored: it stays on the stack (api_request copies it) */
    s.method = "GET";
    s.on_data = lbind_watch_data;

    w = lua_newuserdatauv(L, sizeof *w, 0);
    memset(w, 0, sizeof *w);
    w->self = LUA_NOREF;
    luaL_setmetatable(L, LBIND_WATCH_MT); /* (its __gc frees the set if what follows raises) */
    if (lbind_rawfield(L, 1, "shard") != LUA_TNIL) {
        lbind_shard_toset(L, -1, "api.watch: shard", &w->keep);
        w->sharded = 1;
    }
    lua_pop(L, 1);
    if (lbind_rawfield(L, 1, "list") != LUA_TNIL) {
        size_t n;
        const char *prefix = luaL_checklstring(L, -1, &n);
        w->list = 1;
        listsplit_init(&w->split);
        if (n > 0) {
            if ((w->prefix = malloc(n)) == NULL)
                return luaL_error(L, "not enough memory");
            memcpy(w->prefix, prefix, n);
            w->prefix_len = n;
        }
    }
    lua_pop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    w->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    w->wake = malloc(sizeof *w->wake);
    if (w->wake == NULL)
        return luaL_error(L, "not enough memory");
    uv_idle_init(&rt->loop, w->wake);
    w->wake->data = w;
    lua_pushvalue(L, -1);
    w->self = luaL_ref(L, LUA_REGISTRYINDEX);
    w->call = api_request(rt->api, &s, lbind_watch_done, w);
    if (w->call == NULL) {
        lbind_watch_unpin(w); /* __gc closes the rest */
        return luaL_error(L, "not enough memory");
    }
    return 1;
}

static int lbind_watch_next_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    return lua_gettop(L) - 1;
}

/* The watch at 1 (raises when it is not one). */
static lbind_watch *lbind_towatch(lua_State *L)
{
    return luaL_checkudata(L, 1, LBIND_WATCH_MT);
}

/* With no line queued: the end, or the calling task waits for a line (its
 * results then pushed by lbind_watch_wake, and k run on them). */
static int lbind_watch_end_or_wait(lbind_watch *w, lua_State *L, const char *what, lua_KFunction k)
{
    if (w->ended)
        return lbind_watch_push_end(w, L);
    if (sched_waiting(w->waiter))
        return luaL_error(L, "another task is already waiting on this watch");
    lbind_check_task(L, what);
    w->waiter = sched_wait_begin(L);
    return sched_wait_yield(L, 0, k);
}

static int lbind_watch_next(lua_State *L)
{
    lbind_watch *w = lbind_towatch(L);

    lua_settop(L, 1);
    if (w->taking)
        return luaL_error(L, "watch:next: called while a line is being taken apart");
    if (lbind_watch_pop(w, L))
        return 1;
    return lbind_watch_end_or_wait(w, L, "watch:next", lbind_watch_next_k);
}

/* next_event's results from the line next() pushed at the top (the
 * string, anchored there), or next()'s end as it is. */
static int lbind_watch_event_of(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    size_t len;
    const char *s;

    if (n != 1 || lua_type(L, -1) != LUA_TSTRING)
        return n;
    s = lua_tolstring(L, -1, &len);
    if (lbind_json_event_push(L, s, len, lbind_json_tocut(L, 2), lua_toboolean(L, 3)) == 3)
        return 3;
    lua_pushboolean(L, 0);
    lua_insert(L, -2); /* false, line */
    return 2;
}

static int lbind_watch_next_event_k(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    return lbind_watch_event_of(L, 3);
}

/* w:next_event([cut [, shallow]]): next()'s, with its line taken apart
 * as json.event(line, cut, shallow) takes it: type, object, text; false,
 * line for a line json.event does not take; the end as next()'s. A line
 * already queued is read where it lies, never made a Lua string: no Lua
 * can free it meanwhile (only __gc clears the queue, and w is on the
 * stack; luaop's finalizers never read a watch, scripts may have none,
 * and a call while one takes the line apart is refused: a raise inside
 * leaves that refusal, and the task whose call raised closes the watch). */
static int lbind_watch_next_event(lua_State *L)
{
    lbind_watch *w = lbind_towatch(L);
    const struct json_cut *node = lbind_json_tocut(L, 2);
    int shallow = lua_toboolean(L, 3), n;

    lua_settop(L, 3);
    if (w->taking)
        return luaL_error(L, "watch:next_event: called while a line is being taken apart");
    if (w->head == NULL)
        return lbind_watch_end_or_wait(w, L, "watch:next_event", lbind_watch_next_event_k);
    w->taking = 1;
    n = lbind_json_event_push(L, w->head->data, w->head->len, node, shallow);
    w->taking = 0;
    if (n == 3) {
        lbind_watch_drop_head(w);
        return 3;
    }
    lbind_watch_pop(w, L); /* (the line as next() hands it, decoded whole by the caller) */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

static void lbind_watch_stop(lbind_watch *w)
{
    if (w->call) {
        api_cancel(w->call);
        w->call = NULL;
    }
    w->ended = 1;
}

static int lbind_watch_dropped(lua_State *L)
{
    lua_pushinteger(L, lbind_towatch(L)->dropped);
    return 1;
}

static int lbind_watch_close(lua_State *L)
{
    lbind_watch *w = lbind_towatch(L);

    lbind_watch_stop(w);
    lbind_watch_wake(w);
    lbind_watch_unpin(w);
    return 0;
}

static int lbind_watch_gc(lua_State *L)
{
    lbind_watch *w = lbind_towatch(L);

    lbind_watch_stop(w);
    if (w->wake) {
        uv_close((uv_handle_t *)w->wake, lbind_watch_wake_closed);
        w->wake = NULL;
    }
    dbuf_free(&w->partial);
    free(w->error);
    w->error = NULL;
    listsplit_free(&w->split);
    free(w->prefix);
    w->prefix = NULL;
    lbind_watch_clear(w);
    shard_set_clear(&w->keep);
    return 0;
}

void lbind_watch_add(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"next", lbind_watch_next},
        {"next_event", lbind_watch_next_event},
        {"dropped", lbind_watch_dropped},
        {"close", lbind_watch_close},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_WATCH_MT, methods, lbind_watch_gc, lbind_watch_close);
    lua_pushcfunction(L, lbind_watch_start);
    lua_setfield(L, -2, "watch");
}
