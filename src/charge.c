/* charge.c - the work Lua's libraries do in C, charged to budgets (see
 * charge.h and charge_lib.h). */
#define _GNU_SOURCE /* memmem: a linear search, where Lua's lmemfind is quadratic */
#include "charge.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "scheduler.h"

/* what a scan below charges at a time */
#define CHARGE_SCAN 4096

_Thread_local unsigned long charge_pending;

void charge_flush(lua_State *L)
{
    unsigned long n = charge_pending;

    charge_pending = 0;
    sched_charge(L, n);
}

void charge_add(lua_State *L, unsigned long n)
{
    charge_pending += n > (1UL << 48) ? (1UL << 48) : n;
    if (charge_pending >= CHARGE_BATCH)
        charge_flush(L);
}

unsigned long long charge_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000u + (unsigned long long)ts.tv_nsec;
}

void charge_elapsed(lua_State *L, unsigned long long t0, unsigned long paid)
{
    unsigned long long n = (charge_now_ns() - t0) / CHARGE_NS_PER;

    if (n > paid)
        charge_add(L, (unsigned long)(n - paid));
}

/* The library functions replaced below: the same in every state. */
static _Atomic(lua_CFunction) charge_orig_find, charge_orig_len, charge_orig_strict, charge_orig_lax,
    charge_orig_codes, charge_orig_date;

/* Lua's posrelatI (lstrlib.c): a start position, 1-based, clipped. */
static size_t charge_posrelat_start(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0)
        return 1;
    if (pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

/* Lua's u_posrelat (lutf8lib.c) */
static lua_Integer charge_u_posrelat(lua_Integer pos, size_t len)
{
    if (pos >= 0)
        return pos;
    if (0u - (size_t)pos > len)
        return 0;
    return (lua_Integer)len + pos + 1;
}

static int charge_has_specials(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (p[i] != '\0' && strchr("^$*+?.([%-", p[i]))
            return 1;
    return 0;
}

/* string.find: a pattern goes to Lua's (its matcher is charged per step,
 * pattern.h); a plain search, which Lua makes with memchr and memcmp in a
 * loop that is quadratic in the worst case ("aaa...a" for "aa...ab"), is a
 * linear memmem here, charged for the bytes it may read. */
static int charge_find(lua_State *L)
{
    size_t ls, lp, init;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *hit;

    charge_add(L, 1 + lp / CHARGE_COPY);
    if (!lua_toboolean(L, 4) && charge_has_specials(p, lp))
        return atomic_load(&charge_orig_find)(L);
    init = charge_posrelat_start(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    charge_add(L, 1 + (ls - init) + lp);
    hit = lp == 0 ? s + init : memmem(s + init, ls - init, p, lp);
    if (hit == NULL) {
        luaL_pushfail(L);
        return 1;
    }
    lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
    lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
    return 2;
}

/* utf8.len decodes every byte of its range: charged before. */
static int charge_utf8_len(lua_State *L)
{
    size_t len;
    lua_Integer i, j;

    luaL_checklstring(L, 1, &len);
    i = charge_u_posrelat(luaL_optinteger(L, 2, 1), len);
    j = charge_u_posrelat(luaL_optinteger(L, 3, -1), len);
    /* what Lua will scan: a range out of bounds is refused, not scanned */
    if (i < 1)
        i = 1;
    if (j > (lua_Integer)len)
        j = (lua_Integer)len;
    if (j >= i)
        charge_add(L, 1 + (size_t)(j - i) / CHARGE_LOOP);
    return atomic_load(&charge_orig_len)(L);
}

#define CHARGE_ISCONT(c) (((unsigned char)(c) & 0xC0) == 0x80)

/* From byte n (0-based) of s, the first that is not a continuation byte,
 * charged as it scans (a run of them can be the whole string). */
static size_t charge_skip_cont(lua_State *L, const char *s, size_t len, size_t n)
{
    while (n < len && CHARGE_ISCONT(s[n])) {
        size_t end = len - n > CHARGE_SCAN ? n + CHARGE_SCAN : len;
        charge_add(L, CHARGE_SCAN / CHARGE_LOOP);
        while (n < end && CHARGE_ISCONT(s[n]))
            n++;
    }
    return n;
}

/* utf8.codes' iterator skips the continuation bytes after its position
 * before it decodes: skipped here, charged, then Lua's from there. */
static int charge_codes_step(lua_State *L, lua_CFunction orig)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_Unsigned n = (lua_Unsigned)lua_tointeger(L, 2);

    charge_add(L, 1);
    if (n < len) {
        lua_settop(L, 2);
        lua_pushinteger(L, (lua_Integer)charge_skip_cont(L, s, len, (size_t)n));
        lua_replace(L, 2);
    }
    return orig(L);
}

static int charge_codes_strict(lua_State *L)
{
    return charge_codes_step(L, atomic_load(&charge_orig_strict));
}

static int charge_codes_lax(lua_State *L)
{
    return charge_codes_step(L, atomic_load(&charge_orig_lax));
}

/* utf8.codes: Lua's, with its iterator replaced by the charged one. */
static int charge_codes(lua_State *L)
{
    int lax = lua_toboolean(L, 2); /* read before Lua's pushes its results */
    int n = atomic_load(&charge_orig_codes)(L);
    lua_CFunction it;

    if (n != 3)
        return n;
    it = lua_tocfunction(L, -3);
    if (it == NULL)
        return n;
    if (atomic_load(&charge_orig_lax) == NULL || atomic_load(&charge_orig_strict) == NULL) {
        /* learn which iterator is which, once */
        if (lax)
            atomic_store(&charge_orig_lax, it);
        else
            atomic_store(&charge_orig_strict, it);
    }
    if (it == atomic_load(&charge_orig_lax))
        lua_pushcfunction(L, charge_codes_lax);
    else if (it == atomic_load(&charge_orig_strict))
        lua_pushcfunction(L, charge_codes_strict);
    else
        return n;
    lua_replace(L, -4);
    return n;
}

/* utf8.offset(s, n [, i]): Lua's byteoffset, its scans charged as they
 * go (each step over a character can pass a run of continuation bytes as
 * long as the string). */
static int charge_utf8_offset(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    lua_Integer n = luaL_checkinteger(L, 2);
    lua_Integer posi = n >= 0 ? 1 : (lua_Integer)len + 1;
    unsigned long steps = 0;

    posi = charge_u_posrelat(luaL_optinteger(L, 3, posi), len);
    luaL_argcheck(L, 1 <= posi && --posi <= (lua_Integer)len, 3, "position out of bounds");
    if (n == 0) {
        while (posi > 0 && CHARGE_ISCONT(s[posi])) {
            posi--;
            if (++steps % CHARGE_SCAN == 0)
                charge_add(L, CHARGE_SCAN / CHARGE_LOOP);
        }
    } else {
        if (CHARGE_ISCONT(s[posi]))
            return luaL_error(L, "initial position is a continuation byte");
        if (n < 0) {
            while (n < 0 && posi > 0) {
                do {
                    posi--;
                    if (++steps % CHARGE_SCAN == 0)
                        charge_add(L, CHARGE_SCAN / CHARGE_LOOP);
                } while (posi > 0 && CHARGE_ISCONT(s[posi]));
                n++;
            }
        } else {
            n--;
            while (n > 0 && posi < (lua_Integer)len) {
                do {
                    posi++;
                    if (++steps % CHARGE_SCAN == 0)
                        charge_add(L, CHARGE_SCAN / CHARGE_LOOP);
                } while (CHARGE_ISCONT(s[posi])); /* s[len] is '\0' */
                n--;
            }
        }
    }
    charge_add(L, 1 + (steps % CHARGE_SCAN) / CHARGE_LOOP);
    if (n == 0)
        lua_pushinteger(L, posi + 1);
    else
        luaL_pushfail(L);
    return 1;
}

/* os.date: a strftime per conversion of its format (about 100 ns each),
 * charged before. */
static int charge_os_date(lua_State *L)
{
    size_t l = 0;

    luaL_optlstring(L, 1, "%c", &l);
    charge_add(L, 1 + (l > (1UL << 40) ? (1UL << 40) : l) * 32);
    return atomic_load(&charge_orig_date)(L);
}

/* t[field] = f, keeping what was there in *orig (once) */
static void charge_replace(lua_State *L, int t, const char *field, lua_CFunction f, _Atomic(lua_CFunction) *orig)
{
    lua_CFunction old;

    lua_getfield(L, t, field);
    old = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    if (old == NULL || old == f)
        return;
    if (orig != NULL)
        atomic_store(orig, old);
    lua_pushcfunction(L, f);
    lua_setfield(L, t, field);
}

void charge_wrap(lua_State *L)
{
    int top = lua_gettop(L);

    if (lua_getglobal(L, "string") == LUA_TTABLE)
        charge_replace(L, top + 1, "find", charge_find, &charge_orig_find);
    lua_settop(L, top);
    if (lua_getglobal(L, "utf8") == LUA_TTABLE) {
        charge_replace(L, top + 1, "len", charge_utf8_len, &charge_orig_len);
        charge_replace(L, top + 1, "offset", charge_utf8_offset, NULL);
        charge_replace(L, top + 1, "codes", charge_codes, &charge_orig_codes);
    }
    lua_settop(L, top);
    if (lua_getglobal(L, "os") == LUA_TTABLE)
        charge_replace(L, top + 1, "date", charge_os_date, &charge_orig_date);
    lua_settop(L, top);
}
