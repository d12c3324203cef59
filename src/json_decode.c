/* json_decode.c - JSON text to Lua values, iteratively (see json.h); and
 * the metatable arrays carry. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* ---- decoding ---------------------------------------------------------- */

typedef struct json_dec {
    lua_State *L;
    const char *s;   /* start of input */
    const char *p;   /* cursor */
    const char *end;
    char *err;
    size_t errlen;
    int depth;
    int check; /* json_check: the same walk, nothing pushed */
} json_dec;

static int json_dec_fail(json_dec *d, const char *fmt, ...)
{
    char msg[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(d->err, d->errlen, "%s at byte %zu", msg, (size_t)(d->p - d->s));
    return 0;
}

static void json_dec_space(json_dec *d)
{
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r'))
        d->p++;
}

static int json_dec_literal(json_dec *d, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(d->end - d->p) < n || memcmp(d->p, word, n) != 0)
        return json_dec_fail(d, "invalid literal");
    d->p += n;
    return 1;
}

static int json_hex4(const char *p, unsigned *out)
{
    unsigned v = 0;

    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* Write code point cp as UTF-8 at out; returns the bytes written (1-4). */
static size_t json_put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote; pushes the string.
 *
 * Escapes only ever shrink a string (\uXXXX is 6 bytes for at most 3 of
 * UTF-8, a surrogate pair 12 for 4), so the raw text's length bounds the
 * decoded one: a first pass finds the closing quote and checks every
 * character, a second decodes into scratch space of that size, a C array
 * or, for long strings, a userdata the GC frees if pushing raises. No
 * luaL_Buffer: nothing on the Lua stack changes but the one value pushed,
 * whatever path the decoder takes (see docs/json.md). */
static int json_dec_string(json_dec *d)
{
    const char *start = ++d->p;
    const char *q = start;
    int escaped = 0;

    for (;;) {
        if (q >= d->end) {
            d->p = q;
            return json_dec_fail(d, "unterminated string");
        }
        unsigned char c = (unsigned char)*q;
        if (c == '"')
            break;
        if (c < 0x20) {
            d->p = q;
            return json_dec_fail(d, "control character in string");
        }
        if (c == '\\') {
            escaped = 1;
            if (d->end - q < 2) {
                d->p = q;
                return json_dec_fail(d, "unterminated string");
            }
            switch (q[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                q += 2;
                continue;
            case 'u': {
                unsigned cp;
                if (d->end - q < 6 || !json_hex4(q + 2, &cp)) {
                    d->p = q;
                    return json_dec_fail(d, "invalid \\u escape");
                }
                q += 6;
                continue;
            }
            default:
                d->p = q;
                return json_dec_fail(d, "invalid escape \\%c", q[1]);
            }
        }
        q++;
    }
    if (d->check) {
        d->p = q + 1;
        return 1;
    }
    if (!escaped) { /* the common case: straight from the input */
        lua_pushlstring(d->L, start, (size_t)(q - start));
        d->p = q + 1;
        return 1;
    }

    size_t max = (size_t)(q - start);
    char small[256] = {0}; /* (zeroed only to quiet -Wmaybe-uninitialized) */
    char *out = max <= sizeof small ? small : lua_newuserdatauv(d->L, max, 0);
    size_t n = 0;

    for (const char *r = start; r < q;) {
        if (*r != '\\') {
            out[n++] = *r++;
            continue;
        }
        char e = r[1];
        r += 2;
        switch (e) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            json_hex4(r, &cp); /* checked by the first pass */
            r += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (q - r >= 6 && r[0] == '\\' && r[1] == 'u' && json_hex4(r + 2, &lo) && lo >= 0xDC00 &&
                    lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    r += 6;
                } else {
                    cp = 0xFFFD; /* a lone high surrogate */
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD; /* a lone low surrogate */
            }
            n += json_put_utf8(out + n, cp);
            break;
        }
        default: /* " \ / */
            out[n++] = e;
        }
    }
    lua_pushlstring(d->L, out, n);
    if (out != small)
        lua_remove(d->L, -2); /* the scratch userdata */
    d->p = q + 1;
    return 1;
}

static int json_dec_number(json_dec *d)
{
    const char *p = d->p;
    int is_int = 1;

    if (p < d->end && *p == '-')
        p++;
    if (p >= d->end || *p < '0' || *p > '9')
        return json_dec_fail(d, "invalid number");
    if (*p == '0' && p + 1 < d->end && p[1] >= '0' && p[1] <= '9')
        return json_dec_fail(d, "leading zero in number");
    while (p < d->end && *p >= '0' && *p <= '9')
        p++;
    if (p < d->end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= d->end || *p < '0' || *p > '9')
            return json_dec_fail(d, "invalid number");
        while (p < d->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < d->end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        if (p < d->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= d->end || *p < '0' || *p > '9')
            return json_dec_fail(d, "invalid number");
        while (p < d->end && *p >= '0' && *p <= '9')
            p++;
    }

    char tmp[64];
    size_t n = (size_t)(p - d->p);
    if (n >= sizeof tmp)
        is_int = 0; /* far beyond int64: a float, parsed from a Lua string */
    if (is_int) {
        memcpy(tmp, d->p, n);
        tmp[n] = '\0';
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            if (!d->check)
                lua_pushinteger(d->L, (lua_Integer)v);
            d->p = p;
            return 1;
        }
    }
    /* strtod needs a terminated copy; numbers are short, but be safe. */
    lua_pushlstring(d->L, d->p, n);
    double v = strtod(lua_tostring(d->L, -1), NULL);
    lua_pop(d->L, 1);
    /* Go's encoding/json refuses these too; one that underflows is 0 */
    if (isinf(v))
        return json_dec_fail(d, "number out of range");
    if (!d->check)
        lua_pushnumber(d->L, (lua_Number)v);
    d->p = p;
    return 1;
}

/* Decode one value and push it, iteratively: every open array or object
 * is a table on the Lua stack (an object's pending key above it), and
 * kinds[] records which it is, so depth costs Lua stack slots, never C
 * stack. On malformed input the stack is put back as it was (it holds only
 * tables and strings: nothing to close) and 0 returned. */
static int json_dec_value(json_dec *d)
{
    lua_State *L = d->L;
    int base = lua_gettop(L);
    char kinds[JSON_MAX_DEPTH]; /* 'a' or 'o' per open container */
    int depth = 0;

value:
    json_dec_space(d);
    if (d->p >= d->end) {
        json_dec_fail(d, "unexpected end of input");
        goto fail;
    }
    switch (*d->p) {
    case '{':
    case '[': {
        int array = *d->p == '[';
        if (depth == JSON_MAX_DEPTH) {
            json_dec_fail(d, "nesting deeper than %d", JSON_MAX_DEPTH);
            goto fail;
        }
        if (!d->check && !lua_checkstack(L, 4)) {
            json_dec_fail(d, "nesting too deep for the Lua stack");
            goto fail;
        }
        d->p++;
        if (!d->check) {
            lua_newtable(L);
            if (array) {
                json_push_array_mt(L);
                lua_setmetatable(L, -2);
            }
        }
        kinds[depth++] = array ? 'a' : 'o';
        json_dec_space(d);
        if (d->p < d->end && *d->p == (array ? ']' : '}')) {
            d->p++;
            depth--;
            goto done;
        }
        if (array)
            goto value;
        goto key;
    }
    case '"':
        if (!json_dec_string(d))
            goto fail;
        goto done;
    case 't':
        if (!json_dec_literal(d, "true"))
            goto fail;
        if (!d->check)
            lua_pushboolean(L, 1);
        goto done;
    case 'f':
        if (!json_dec_literal(d, "false"))
            goto fail;
        if (!d->check)
            lua_pushboolean(L, 0);
        goto done;
    case 'n':
        if (!json_dec_literal(d, "null"))
            goto fail;
        if (!d->check)
            lua_pushlightuserdata(L, json_null);
        goto done;
    default:
        if (!json_dec_number(d))
            goto fail;
        goto done;
    }

key: /* in an object, before a member */
    json_dec_space(d);
    if (d->p >= d->end || *d->p != '"') {
        json_dec_fail(d, "expected a string key in object");
        goto fail;
    }
    if (!json_dec_string(d))
        goto fail;
    json_dec_space(d);
    if (d->p >= d->end || *d->p != ':') {
        json_dec_fail(d, "expected ':' after object key");
        goto fail;
    }
    d->p++;
    goto value;

done: /* a value is on top: put it into its container, if any */
    if (depth == 0)
        return 1;
    json_dec_space(d);
    if (kinds[depth - 1] == 'a') {
        if (!d->check)
            lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        if (d->p < d->end && *d->p == ',') {
            d->p++;
            goto value;
        }
        if (d->p < d->end && *d->p == ']') {
            d->p++;
            depth--;
            goto done;
        }
        json_dec_fail(d, "expected ',' or ']' in array");
        goto fail;
    }
    if (!d->check)
        lua_rawset(L, -3);
    if (d->p < d->end && *d->p == ',') {
        d->p++;
        goto key;
    }
    if (d->p < d->end && *d->p == '}') {
        d->p++;
        depth--;
        goto done;
    }
    json_dec_fail(d, "expected ',' or '}' in object");
fail:
    lua_settop(L, base);
    return 0;
}

int json_decode(lua_State *L, const char *s, size_t len, char *err, size_t errlen)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0, 0};

    if (!json_dec_value(&d))
        return 0;
    json_dec_space(&d);
    if (d.p != d.end) {
        lua_pop(L, 1);
        return json_dec_fail(&d, "trailing characters after JSON value");
    }
    return 1;
}

int json_check(lua_State *L, const char *s, size_t len, char *err, size_t errlen)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0, 1};

    if (!json_dec_value(&d))
        return 0;
    json_dec_space(&d);
    if (d.p != d.end)
        return json_dec_fail(&d, "trailing characters after JSON value");
    return 1;
}

/* Skip one value without pushing it (json_scan_skip). */
static int json_skip_value(json_dec *d)
{
    const char *at, *why, *q;

    json_dec_space(d);
    q = json_scan_skip(d->p, d->end, &at, &why);
    if (q == NULL) {
        d->p = at;
        return why ? json_dec_fail(d, "%s", why) : json_dec_fail(d, "unexpected '%c'", *at);
    }
    d->p = q;
    return 1;
}

/* At an object's '{': move d->p to the value of member key (after its
 * ':'). Returns 1 found, 2 absent (d->p after the object), 0 malformed. */
static int json_find_member(json_dec *d, const char *key)
{
    size_t klen = strlen(key);

    d->p++;
    json_dec_space(d);
    if (d->p < d->end && *d->p == '}') {
        d->p++;
        return 2;
    }
    for (;;) {
        const char *k;
        size_t n;
        int match;

        json_dec_space(d);
        if (d->p >= d->end || *d->p != '"')
            return json_dec_fail(d, "expected a string key in object");
        if (!json_dec_string(d))
            return 0;
        k = lua_tolstring(d->L, -1, &n);
        match = n == klen && memcmp(k, key, n) == 0;
        lua_pop(d->L, 1); /* the key: a string, nothing to close */
        json_dec_space(d);
        if (d->p >= d->end || *d->p != ':')
            return json_dec_fail(d, "expected ':' after object key");
        d->p++;
        if (match)
            return 1;
        if (!json_skip_value(d))
            return 0;
        json_dec_space(d);
        if (d->p < d->end && *d->p == ',') {
            d->p++;
            continue;
        }
        if (d->p < d->end && *d->p == '}') {
            d->p++;
            return 2;
        }
        return json_dec_fail(d, "expected ',' or '}' in object");
    }
}

int json_peek(lua_State *L, const char *s, size_t len, const char *const *keys, int nkeys, char *err,
              size_t errlen)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0, 0};

    for (int i = 0; i < nkeys; i++) {
        json_dec_space(&d);
        if (d.p >= d.end || *d.p != '{') {
            if (i == 0)
                return json_dec_fail(&d, "expected an object");
            lua_pushnil(L); /* a member on the way is no object */
            return 1;
        }
        switch (json_find_member(&d, keys[i])) {
        case 0:
            return 0;
        case 2:
            lua_pushnil(L);
            return 1;
        }
    }
    return json_dec_value(&d);
}

int json_decode_page(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen)
{
    size_t dropped = 0;

    return json_decode_page_kept(L, s, len, key, err, errlen, NULL, NULL, &dropped);
}

/* The page decoder's own item hook: json_decode, after keep (when given). */
typedef struct json_kept {
    int (*keep)(const char *item, size_t n, void *ud);
    void *ud;
} json_kept;

static int json_item_kept(lua_State *L, const char *item, size_t n, void *ud, char *err, size_t errlen)
{
    json_kept *k = ud;

    if (k->keep != NULL && !k->keep(item, n, k->ud))
        return -1;
    return json_decode(L, item, n, err, errlen);
}

int json_decode_page_kept(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen,
                          int (*keep)(const char *item, size_t n, void *ud), void *ud, size_t *dropped)
{
    json_kept k = {keep, ud};

    return json_decode_page_with(L, s, len, key, err, errlen, json_item_kept, &k, dropped);
}

int json_decode_page_with(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen,
                          json_page_item item, void *ud, size_t *dropped)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0, 0};
    int base = lua_gettop(L);
    lua_Integer n = 0, bad = 0;

    luaL_checkstack(L, 8, "JSON page");
    lua_newtable(L); /* base + 1: the skipped */
    json_dec_space(&d);
    if (d.p >= d.end || *d.p != '{') {
        json_dec_fail(&d, "expected an object");
        goto fail;
    }
    lua_newtable(L); /* base + 2: the page */
    d.p++;
    json_dec_space(&d);
    if (d.p < d.end && *d.p == '}') {
        d.p++;
        goto done;
    }
    for (;;) {
        json_dec_space(&d);
        if (d.p >= d.end || *d.p != '"') {
            json_dec_fail(&d, "expected a string key in object");
            goto fail;
        }
        if (!json_dec_string(&d))
            goto fail;
        json_dec_space(&d);
        if (d.p >= d.end || *d.p != ':') {
            json_dec_fail(&d, "expected ':' after object key");
            goto fail;
        }
        d.p++;
        json_dec_space(&d);
        size_t klen;
        const char *k = lua_tolstring(L, -1, &klen);
        if (klen == strlen(key) && memcmp(k, key, klen) == 0 && d.p < d.end && *d.p == '[') {
            /* the items, one by one: one that does not decode is skipped */
            lua_newtable(L);
            json_push_array_mt(L);
            lua_setmetatable(L, -2);
            d.p++;
            json_dec_space(&d);
            if (d.p < d.end && *d.p == ']') {
                d.p++;
            } else {
                for (lua_Integer i = 1;; i++) {
                    const char *start;
                    char ierr[160];

                    json_dec_space(&d);
                    start = d.p;
                    if (!json_skip_value(&d))
                        goto fail; /* cannot tell where it ends */
                    int r = item(L, start, (size_t)(d.p - start), ud, ierr, sizeof ierr);
                    if (r < 0) {
                        ++*dropped;
                    } else if (r > 0) {
                        lua_rawseti(L, -2, ++n);
                    } else {
                        /* {index =, error =, text =} for the caller to name it */
                        lua_createtable(L, 0, 3);
                        lua_pushinteger(L, i);
                        lua_setfield(L, -2, "index");
                        lua_pushstring(L, ierr);
                        lua_setfield(L, -2, "error");
                        lua_pushlstring(L, start, (size_t)(d.p - start));
                        lua_setfield(L, -2, "text");
                        lua_rawseti(L, base + 1, ++bad);
                    }
                    json_dec_space(&d);
                    if (d.p < d.end && *d.p == ',') {
                        d.p++;
                        continue;
                    }
                    if (d.p < d.end && *d.p == ']') {
                        d.p++;
                        break;
                    }
                    json_dec_fail(&d, "expected ',' or ']' in array");
                    goto fail;
                }
            }
        } else if (!json_dec_value(&d)) {
            goto fail;
        }
        lua_rawset(L, base + 2);
        json_dec_space(&d);
        if (d.p < d.end && *d.p == ',') {
            d.p++;
            continue;
        }
        if (d.p < d.end && *d.p == '}') {
            d.p++;
            break;
        }
        json_dec_fail(&d, "expected ',' or '}' in object");
        goto fail;
    }
done:
    json_dec_space(&d);
    if (d.p != d.end) {
        json_dec_fail(&d, "trailing characters after JSON value");
        goto fail;
    }
    lua_insert(L, base + 1); /* page, skipped */
    return 1;
fail:
    lua_settop(L, base);
    return 0;
}

void json_push_array_mt(lua_State *L)
{
    if (luaL_newmetatable(L, JSON_ARRAY_MT)) {
        lua_pushliteral(L, "array");
        lua_setfield(L, -2, "__name");
    }
}
