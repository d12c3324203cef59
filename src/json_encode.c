/* json_encode.c - Lua values to JSON text, iteratively (see json.h). */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "charge.h"

/* ---- encoding ---------------------------------------------------------- */

typedef struct json_enc {
    lua_State *L;
    dbuf *b;
    char *err;
    size_t errlen;
    int (*redact)(const char *key);
} json_enc;

static void json_buf_reserve(json_enc *e, size_t more)
{
    if (dbuf_reserve(e->b, more) != 0)
        luaL_error(e->L, "not enough memory to encode JSON");
}

static void json_put(json_enc *e, const char *s, size_t n)
{
    json_buf_reserve(e, n);
    memcpy(e->b->data + e->b->len, s, n);
    e->b->len += n;
}

static void json_putc(json_enc *e, char c)
{
    json_buf_reserve(e, 1);
    e->b->data[e->b->len++] = c;
}

static int json_enc_fail(json_enc *e, const char *what)
{
    snprintf(e->err, e->errlen, "cannot encode %s as JSON", what);
    return 0;
}

static void json_enc_string(json_enc *e, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;

    json_buf_reserve(e, n + 2);
    json_putc(e, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c >= 0x20 && c != 0x7f) {
                run++;
                continue;
            }
        }
        json_put(e, s + i - run, run);
        run = 0;
        if (esc) {
            json_put(e, esc, 2);
        } else {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            json_put(e, u, 6);
        }
    }
    json_put(e, s + n - run, run);
    json_putc(e, '"');
}

static int json_enc_number(json_enc *e, int idx)
{
    char tmp[64];
    int n;

    if (lua_isinteger(e->L, idx)) {
        n = snprintf(tmp, sizeof tmp, "%" PRId64, (int64_t)lua_tointeger(e->L, idx));
    } else {
        double v = (double)lua_tonumber(e->L, idx);
        if (!isfinite(v))
            return json_enc_fail(e, "NaN or infinity");
        if (v == 0) {
            /* -0.0 too: "-0" would read back as the integer 0 and then
             * encode as "0", so the text would change on a round trip */
            tmp[0] = '0';
            n = 1;
        } else {
            /* The shortest of %.15g and %.17g that reads back exactly. An
             * integral float prints as an integer (3.0 as 3), as Go writes
             * float64s, so 6 / 2 is a valid replica count. */
            n = snprintf(tmp, sizeof tmp, "%.15g", v);
            if (strtod(tmp, NULL) != v)
                n = snprintf(tmp, sizeof tmp, "%.17g", v);
        }
    }
    json_put(e, tmp, (size_t)n);
    return 1;
}

/* How to encode the table at idx: 1 array (its length in *len), 0 object,
 * -1 neither (err set). */
static int json_enc_kind(json_enc *e, int idx, lua_Integer *len)
{
    lua_State *L = e->L;
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    lua_Integer strings = 0, ints = 0;
    int marked = 0;

    if (lua_getmetatable(L, idx)) {
        json_push_array_mt(L);
        marked = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            strings++;
        } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) {
            ints++;
        } else {
            lua_pop(L, 1);
            return json_enc_fail(e, "a table with keys other than strings or 1..n") - 1;
        }
    }
    if (strings > 0 && (ints > 0 || marked))
        return json_enc_fail(e, "a table mixing string and integer keys") - 1;
    if (strings > 0) {
        *len = strings;
        return 0;
    }
    if (ints != n)
        return json_enc_fail(e, "a sparse array") - 1;
    *len = n;
    return n > 0 || marked; /* an unmarked empty table is {} */
}

typedef struct json_key {
    const char *s;     /* anchored: its string is in the frame's anchor table */
    size_t n;
    lua_Integer slot;  /* the key at 2 * slot + 1 of that table, its value next */
} json_key;

static int json_key_cmp(const void *a, const void *b)
{
    const json_key *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);

    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* An open array or object while encoding. */
typedef struct json_frame {
    int idx;          /* the table's stack index (an object's anchor table next) */
    int array;
    lua_Integer i, n; /* members written, members */
    json_key *keys;   /* an object's keys in order (a userdata at idx + 2) */
} json_frame;

#define JSON_INLINE_FRAMES 32

/* Write the value at idx unless it is a table: 1 written, 2 a table, 0
 * failed (err set). */
static int json_enc_scalar(json_enc *e, int idx)
{
    lua_State *L = e->L;

    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        json_put(e, "null", 4);
        return 1;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, idx))
            json_put(e, "true", 4);
        else
            json_put(e, "false", 5);
        return 1;
    case LUA_TNUMBER:
        return json_enc_number(e, idx);
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        json_enc_string(e, s, n);
        return 1;
    }
    case LUA_TTABLE:
        return 2;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == json_null) {
            json_put(e, "null", 4);
            return 1;
        }
        /* fall through */
    default:
        return json_enc_fail(e, luaL_typename(L, idx));
    }
}

/* Open the table at idx (the top) into f: write its opening bracket and,
 * for an object, push its keys in order (as Go's encoding/json writes
 * them, so that equal objects encode to equal strings). */
static int json_enc_open(json_enc *e, int idx, json_frame *f)
{
    lua_State *L = e->L;
    lua_Integer len = 0, i = 0;
    int kind = json_enc_kind(e, idx, &len);

    if (kind < 0)
        return 0;
    f->idx = idx;
    f->array = kind;
    f->i = 0;
    f->n = len;
    f->keys = NULL;
    if (kind == 1) {
        json_putc(e, '[');
        return 1;
    }
    /* The keys and their values go into a table this call holds (at
     * idx + 1), and keys[] (a userdata at idx + 2, freed by the collector
     * even if encoding raises) points into those anchored strings: the
     * table at idx may lose entries while we write (a weak table does
     * whenever the collector runs, and any allocation may run it), so it
     * cannot be what keeps a key we point to alive (docs/security.md,
     * "Rules for C bindings"). Both are sized first: nothing allocates
     * while lua_next walks. */
    if (len > (INT_MAX - 2) / 2)
        return json_enc_fail(e, "a table with too many keys");
    charge_add(L, 2 * CHARGE_ACCESS * (unsigned long)len); /* the copy and the sort */
    lua_createtable(L, (int)(2 * len), 0);
    int anchor = lua_gettop(L);
    json_key *keys = lua_newuserdatauv(L, (size_t)len * sizeof *keys + 1, 0);
    lua_pushnil(L);
    while (lua_next(L, idx)) { /* every key is a string: json_enc_kind said so */
        if (i == len) { /* (never: entries can go, not come) */
            lua_pop(L, 2);
            break;
        }
        lua_rawseti(L, anchor, 2 * i + 2); /* the value */
        lua_pushvalue(L, -1);
        lua_rawseti(L, anchor, 2 * i + 1); /* the key */
        keys[i].s = lua_tolstring(L, -1, &keys[i].n);
        keys[i].slot = i;
        i++;
    }
    qsort(keys, (size_t)i, sizeof *keys, json_key_cmp);
    f->keys = keys;
    f->n = i;
    json_putc(e, '{');
    return 1;
}

/* Encode the value at idx, iteratively: open tables are frames (on the C
 * stack for the first JSON_INLINE_FRAMES, then in a userdata kept at
 * base + 1) and their values on the Lua stack, so depth never costs C
 * stack. */
static int json_enc_value(json_enc *e, int idx)
{
    lua_State *L = e->L;
    int base = lua_gettop(L);
    json_frame small[JSON_INLINE_FRAMES];
    json_frame *frames = small, *f;
    int depth = 0, cap = JSON_INLINE_FRAMES, r;

    if (!lua_checkstack(L, 8))
        return json_enc_fail(e, "a value with the Lua stack full");
    lua_pushnil(L);        /* base + 1: where the frames go once small[] is full */
    lua_pushvalue(L, idx); /* the value to write next is always on top */
write:
    /* each value is charged as it is written (the running task's budget;
     * nothing outside one), so that a table whose text is far larger than
     * itself (a DAG of shared tables) breaks the budget, or is taken by the
     * watchdog's interrupt, while it is written rather than after */
    charge_add(L, CHARGE_ACCESS);
    r = json_enc_scalar(e, lua_gettop(L));
    if (r == 0)
        goto fail;
    if (r == 1) {
        lua_pop(L, 1);
    } else {
        if (depth == JSON_MAX_DEPTH) {
            json_enc_fail(e, "a table nested too deep (a cycle?)");
            goto fail;
        }
        if (!lua_checkstack(L, 8)) {
            json_enc_fail(e, "a table nested too deep for the Lua stack");
            goto fail;
        }
        if (depth == cap) {
            json_frame *big = lua_newuserdatauv(L, JSON_MAX_DEPTH * sizeof *big, 0);
            memcpy(big, frames, (size_t)depth * sizeof *big);
            lua_replace(L, base + 1);
            frames = big;
            cap = JSON_MAX_DEPTH;
        }
        if (!json_enc_open(e, lua_gettop(L), &frames[depth]))
            goto fail;
        depth++;
    }
next: /* the next member of the innermost open table; close finished ones */
    for (;;) {
        if (depth == 0) {
            lua_settop(L, base);
            return 1;
        }
        f = &frames[depth - 1];
        if (f->i < f->n)
            break;
        json_putc(e, f->array ? ']' : '}');
        lua_settop(L, f->idx - 1);
        depth--;
    }
    if (f->i > 0)
        json_putc(e, ',');
    if (f->array) {
        lua_rawgeti(L, f->idx, ++f->i);
        goto write;
    }
    json_key *k = &f->keys[f->i++];
    json_enc_string(e, k->s, k->n);
    json_putc(e, ':');
    if (e->redact && e->redact(k->s)) {
        json_put(e, "\"[redacted]\"", 12);
        goto next;
    }
    lua_rawgeti(L, f->idx + 1, 2 * k->slot + 2); /* the value taken with the key */
    goto write;
fail:
    lua_settop(L, base);
    return 0;
}

int json_encode(lua_State *L, int idx, dbuf *b, char *err, size_t errlen)
{
    json_enc e = {L, b, err, errlen, NULL};

    return json_enc_value(&e, lua_absindex(L, idx));
}

int json_encode_redacted(lua_State *L, int idx, dbuf *b, char *err, size_t errlen,
                         int (*redact)(const char *key))
{
    json_enc e = {L, b, err, errlen, redact};

    return json_enc_value(&e, lua_absindex(L, idx));
}
