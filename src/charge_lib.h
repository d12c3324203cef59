/* charge_lib.h - forced into Lua's own library sources (lbaselib.c,
 * ltablib.c and lstrpat.c, see the Makefile) so that the work they do in C
 * is charged to the running task's instruction budget (charge.h).
 *
 * Lua declares every API function with its name in parentheses, so a
 * function-like macro of the same name changes the calls of these files
 * and nothing else: each macro below charges, then calls the real function.
 * The rates are instructions (about 2.3 ns each on the reference machine,
 * docs/security.md) per unit of work, measured on the release build:
 * - CHARGE_ACCESS: a t[i] read or write, or a comparison, made from C
 *   (table.sort, concat, insert, remove, move, unpack, pack);
 * - bytes copied or scanned: one per CHARGE_COPY bytes (buffer growth,
 *   pushed and converted strings, collected heap), one per CHARGE_LOOP
 *   bytes where C loops per byte (string.upper, lower, reverse, char and
 *   %q), CHARGE_PARSE per byte parsed (load);
 * - a collection: the whole heap's bytes (it marks and sweeps everything,
 *   every script's objects included), before it starts. */
#ifndef LUAOP_CHARGE_LIB_H
#define LUAOP_CHARGE_LIB_H

/* as the library files do, before luaconf.h (l_likely and the like) */
#define LUA_LIB

#include "lprefix.h"

#include <stdarg.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

#include "charge.h"

/* lcorolib.c: a coroutine a script resumes is recorded as running, so that
 * the watchdog's interrupt reaches its hook at the next instruction
 * (sched_nudge) */
int sched_resume_tracked(lua_State *co, lua_State *from, int narg, int *nres);
#define lua_resume(co, from, narg, nres) sched_resume_tracked(co, from, narg, nres)


/* a string's length when both values are strings (their comparison reads
 * them), else 0 */
static inline size_t charge_strings(lua_State *L, int a, int b)
{
    size_t la, lb;

    if (lua_type(L, a) != LUA_TSTRING || lua_type(L, b) != LUA_TSTRING)
        return 0;
    la = lua_rawlen(L, a);
    lb = lua_rawlen(L, b);
    return la < lb ? la : lb;
}

static inline int charge_geti(lua_State *L, int idx, lua_Integer n)
{
    charge_add(L, CHARGE_ACCESS);
    return (lua_geti)(L, idx, n);
}

static inline void charge_seti(lua_State *L, int idx, lua_Integer n)
{
    charge_add(L, CHARGE_ACCESS);
    (lua_seti)(L, idx, n);
}

static inline int charge_compare(lua_State *L, int a, int b, int op)
{
    charge_add(L, CHARGE_ACCESS + charge_strings(L, a, b) / CHARGE_COPY);
    return (lua_compare)(L, a, b, op);
}

static inline int charge_rawequal(lua_State *L, int a, int b)
{
    charge_add(L, 1 + charge_strings(L, a, b) / CHARGE_COPY);
    return (lua_rawequal)(L, a, b);
}

static inline void charge_pushinteger(lua_State *L, lua_Integer n)
{
    charge_add(L, 2);
    (lua_pushinteger)(L, n);
}

/* Where the work needs memory, charged once it is allocated: a memory
 * budget that cannot hold it is the breach, before the instructions. */
static inline const char *charge_pushlstring(lua_State *L, const char *s, size_t len)
{
    const char *r = (lua_pushlstring)(L, s, len);

    charge_add(L, 1 + len / CHARGE_COPY);
    return r;
}

/* after the conversion: its length is what the caller goes on to read
 * (tonumber's scan, gsub's replacement per match, %q per byte) */
static inline const char *charge_tolstring(lua_State *L, int idx, size_t *len)
{
    size_t l = 0;
    const char *s = (lua_tolstring)(L, idx, &l);

    if (len)
        *len = l;
    charge_add(L, 1 + 2 * l / CHARGE_LOOP);
    return s;
}

/* tostring, print, format's %s: a new string is made unless it was one */
static inline const char *charge_ltolstring(lua_State *L, int idx, size_t *len)
{
    int was = lua_type(L, idx) == LUA_TSTRING;
    size_t l = 0;
    const char *s = (luaL_tolstring)(L, idx, &l);

    if (len)
        *len = l;
    charge_add(L, 1 + (was ? 0 : 4 * l / CHARGE_COPY));
    return s;
}

/* luaL_checkstring (no length wanted): a format the caller walks
 * (string.pack, unpack, packsize) */
static inline const char *charge_checklstring(lua_State *L, int arg, size_t *len)
{
    size_t l = 0;
    const char *s = (luaL_checklstring)(L, arg, &l);

    if (len)
        *len = l;
    else
        charge_add(L, 1 + l / CHARGE_LOOP);
    return s;
}

/* before the loop that fills it, after its allocation */
static inline char *charge_buffinitsize(lua_State *L, luaL_Buffer *B, size_t sz)
{
    char *b = (luaL_buffinitsize)(L, B, sz);

    charge_add(L, 1 + sz / CHARGE_LOOP);
    return b;
}

/* a growth copies the buffer into one twice as large */
static inline char *charge_prepbuffsize(luaL_Buffer *B, size_t sz)
{
    size_t grown = 0;
    char *b;

    if (B->size - B->n < sz)
        grown = B->size * 2 > B->n + sz ? B->size * 2 : B->n + sz;
    b = (luaL_prepbuffsize)(B, sz);
    charge_add(B->L, 1 + grown / CHARGE_COPY);
    return b;
}

static inline void charge_addlstring(luaL_Buffer *B, const char *s, size_t l)
{
    (luaL_addlstring)(B, s, l);
    charge_add(B->L, 4 + l / CHARGE_COPY);
}

static inline void charge_addstring(luaL_Buffer *B, const char *s)
{
    charge_add(B->L, 1 + strlen(s) / CHARGE_COPY);
    (luaL_addstring)(B, s);
}

static inline void charge_addvalue(luaL_Buffer *B)
{
    /* a number is converted first */
    size_t l = lua_type(B->L, -1) == LUA_TSTRING ? lua_rawlen(B->L, -1) : 2 * CHARGE_COPY * CHARGE_ACCESS;

    charge_add(B->L, CHARGE_ACCESS + l / CHARGE_COPY);
    (luaL_addvalue)(B);
}

static inline int charge_loadbufferx(lua_State *L, const char *buff, size_t sz, const char *name, const char *mode)
{
    charge_add(L, 1 + (sz > (size_t)-1 / CHARGE_PARSE ? (size_t)-1 : sz * CHARGE_PARSE));
    return (luaL_loadbufferx)(L, buff, sz, name, mode);
}

/* load(f): each piece the reader returns is charged as it is parsed */
typedef struct charge_reader_state {
    lua_Reader reader;
    void *data;
} charge_reader_state;

static inline const char *charge_reader(lua_State *L, void *ud, size_t *size)
{
    charge_reader_state *c = ud;
    const char *s = c->reader(L, c->data, size);

    if (s != NULL)
        charge_add(L, 1 + (*size > (size_t)-1 / CHARGE_PARSE ? (size_t)-1 : *size * CHARGE_PARSE));
    return s;
}

static inline int charge_load(lua_State *L, lua_Reader reader, void *data, const char *name, const char *mode)
{
    charge_reader_state c = { reader, data };

    return (lua_load)(L, charge_reader, &c, name, mode);
}

/* A collection's cost is the heap's, every script's objects included:
 * "collect" is charged the heap's bytes before it starts, so a budget
 * that cannot pay for it ends before it; then both "collect" and "step"
 * (whose work depends on the collector's phase, not on its argument alone)
 * are charged the time they took beyond that, at CHARGE_NS_PER
 * nanoseconds an instruction (charge_elapsed). */
static inline unsigned long charge_gc_before(lua_State *L, int what)
{
    unsigned long n = 0;

    if (what == LUA_GCCOLLECT) {
        int kb = (lua_gc)(L, LUA_GCCOUNT); /* -1 inside a finalizer */
        n = 1 + (kb > 0 ? (size_t)kb * 1024 : 0) / CHARGE_COPY;
        charge_add(L, n);
    }
    return n;
}

#define lua_gc(L, what, ...)                                                                   \
    __extension__({                                                                            \
        int charge_what_ = (what);                                                             \
        int charge_timed_ = charge_what_ == LUA_GCCOLLECT || charge_what_ == LUA_GCSTEP;       \
        unsigned long charge_paid_ = charge_gc_before(L, charge_what_);                        \
        unsigned long long charge_t0_ = charge_timed_ ? charge_now_ns() : 0;                   \
        int charge_r_ = (lua_gc)(L, charge_what_, ##__VA_ARGS__);                              \
        if (charge_timed_)                                                                     \
            charge_elapsed(L, charge_t0_, charge_paid_);                                       \
        charge_r_;                                                                             \
    })

#define lua_geti(L, idx, n) charge_geti(L, idx, n)
#define lua_seti(L, idx, n) charge_seti(L, idx, n)
#define lua_compare(L, a, b, op) charge_compare(L, a, b, op)
#define lua_rawequal(L, a, b) charge_rawequal(L, a, b)
#define lua_pushinteger(L, n) charge_pushinteger(L, n)
#define lua_pushlstring(L, s, len) charge_pushlstring(L, s, len)
#define lua_tolstring(L, idx, len) charge_tolstring(L, idx, len)
#define luaL_tolstring(L, idx, len) charge_ltolstring(L, idx, len)
#define luaL_checklstring(L, arg, len) charge_checklstring(L, arg, len)
#define luaL_buffinitsize(L, B, sz) charge_buffinitsize(L, B, sz)
#define luaL_prepbuffsize(B, sz) charge_prepbuffsize(B, sz)
#define luaL_addlstring(B, s, l) charge_addlstring(B, s, l)
#define luaL_addstring(B, s) charge_addstring(B, s)
#define luaL_addvalue(B) charge_addvalue(B)
#define luaL_loadbufferx(L, buff, sz, name, mode) charge_loadbufferx(L, buff, sz, name, mode)
#define lua_load(L, reader, data, name, mode) charge_load(L, reader, data, name, mode)

/* No lua_State where the matcher compares a back reference (%1), gsub
 * looks for '%' in its replacement or unpack measures a "z" string: the
 * bytes read are only added up here, and charged at the next match step
 * or charge_add, or before the function raises (charge_settle). (The plain
 * find's loop of memchr and memcmp is not reached: charge_wrap replaces
 * string.find's plain search.) */
static inline int charge_memcmp(const void *a, const void *b, size_t n)
{
    charge_debt(1 + n / CHARGE_COPY);
    return memcmp(a, b, n);
}

static inline const void *charge_memchr(const void *s, int c, size_t n)
{
    const void *r = memchr(s, c, n);

    charge_debt(1 + (r ? (size_t)((const char *)r - (const char *)s) : n) / CHARGE_COPY);
    return r;
}

/* string.unpack's "z" reads up to a zero, and raises when there is none */
static inline size_t charge_strlen(const char *s)
{
    size_t n = strlen(s);

    charge_debt(1 + n / CHARGE_COPY);
    return n;
}

/* Before a library function raises, what it left as debt is charged to
 * its own task (not to whichever runs the next charge). */
static inline void charge_settle(lua_State *L)
{
    if (charge_pending > 0)
        charge_flush(L);
}

static inline int charge_argerror(lua_State *L, int arg, const char *msg)
{
    charge_settle(L);
    return (luaL_argerror)(L, arg, msg);
}

#define luaL_argerror(L, arg, msg) charge_argerror(L, arg, msg)
#define luaL_error(L, ...) (charge_settle(L), (luaL_error)(L, __VA_ARGS__))

#define memcmp(a, b, n) charge_memcmp(a, b, n)
#define memchr(s, c, n) charge_memchr(s, c, n)
#define strlen(s) charge_strlen(s)

#endif
