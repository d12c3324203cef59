/* json.c - JSON <-> Lua values, exact for Kubernetes objects (see json.h). */
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

static void json_add_utf8(luaL_Buffer *b, unsigned cp)
{
    char u[4];
    size_t n;

    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    luaL_addlstring(b, u, n);
}

/* At the opening quote; pushes the string. */
static int json_dec_string(json_dec *d)
{
    const char *start = ++d->p;
    const char *q = start;

    /* The common case: no escapes, push straight from the input. */
    while (q < d->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (q < d->end && *q == '"') {
        lua_pushlstring(d->L, start, (size_t)(q - start));
        d->p = q + 1;
        return 1;
    }

    luaL_Buffer b;
    luaL_buffinit(d->L, &b);
    luaL_addlstring(&b, start, (size_t)(q - start));
    d->p = q;
    while (d->p < d->end) {
        unsigned char c = (unsigned char)*d->p;
        if (c == '"') {
            d->p++;
            luaL_pushresult(&b);
            return 1;
        }
        if (c < 0x20) {
            lua_pop(d->L, 1); /* the buffer's slot */
            return json_dec_fail(d, "control character in string");
        }
        if (c != '\\') {
            luaL_addchar(&b, (char)c);
            d->p++;
            continue;
        }
        if (d->end - d->p < 2)
            break;
        char e = d->p[1];
        d->p += 2;
        switch (e) {
        case '"': luaL_addchar(&b, '"'); break;
        case '\\': luaL_addchar(&b, '\\'); break;
        case '/': luaL_addchar(&b, '/'); break;
        case 'b': luaL_addchar(&b, '\b'); break;
        case 'f': luaL_addchar(&b, '\f'); break;
        case 'n': luaL_addchar(&b, '\n'); break;
        case 'r': luaL_addchar(&b, '\r'); break;
        case 't': luaL_addchar(&b, '\t'); break;
        case 'u': {
            unsigned cp, lo;
            if (d->end - d->p < 4 || !json_hex4(d->p, &cp)) {
                lua_pop(d->L, 1);
                return json_dec_fail(d, "invalid \\u escape");
            }
            d->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (d->end - d->p >= 6 && d->p[0] == '\\' && d->p[1] == 'u' &&
                    json_hex4(d->p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    d->p += 6;
                } else {
                    cp = 0xFFFD; /* a lone high surrogate */
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD; /* a lone low surrogate */
            }
            json_add_utf8(&b, cp);
            break;
        }
        default:
            lua_pop(d->L, 1);
            return json_dec_fail(d, "invalid escape \\%c", e);
        }
    }
    lua_pop(d->L, 1);
    return json_dec_fail(d, "unterminated string");
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
            lua_pushinteger(d->L, (lua_Integer)v);
            d->p = p;
            return 1;
        }
    }
    /* strtod needs a terminated copy; numbers are short, but be safe. */
    lua_pushlstring(d->L, d->p, n);
    double v = strtod(lua_tostring(d->L, -1), NULL);
    lua_pop(d->L, 1);
    lua_pushnumber(d->L, (lua_Number)v);
    d->p = p;
    return 1;
}

static int json_dec_value(json_dec *d);

static int json_dec_array(json_dec *d)
{
    lua_Integer n = 0;

    d->p++;
    lua_newtable(d->L);
    json_push_array_mt(d->L);
    lua_setmetatable(d->L, -2);
    json_dec_space(d);
    if (d->p < d->end && *d->p == ']') {
        d->p++;
        return 1;
    }
    for (;;) {
        if (!json_dec_value(d)) {
            lua_pop(d->L, 1);
            return 0;
        }
        lua_rawseti(d->L, -2, ++n);
        json_dec_space(d);
        if (d->p < d->end && *d->p == ',') {
            d->p++;
            continue;
        }
        if (d->p < d->end && *d->p == ']') {
            d->p++;
            return 1;
        }
        lua_pop(d->L, 1);
        return json_dec_fail(d, "expected ',' or ']' in array");
    }
}

static int json_dec_object(json_dec *d)
{
    d->p++;
    lua_newtable(d->L);
    json_dec_space(d);
    if (d->p < d->end && *d->p == '}') {
        d->p++;
        return 1;
    }
    for (;;) {
        json_dec_space(d);
        if (d->p >= d->end || *d->p != '"') {
            lua_pop(d->L, 1);
            return json_dec_fail(d, "expected a string key in object");
        }
        if (!json_dec_string(d)) {
            lua_pop(d->L, 1);
            return 0;
        }
        json_dec_space(d);
        if (d->p >= d->end || *d->p != ':') {
            lua_pop(d->L, 2);
            return json_dec_fail(d, "expected ':' after object key");
        }
        d->p++;
        if (!json_dec_value(d)) {
            lua_pop(d->L, 2);
            return 0;
        }
        lua_rawset(d->L, -3);
        json_dec_space(d);
        if (d->p < d->end && *d->p == ',') {
            d->p++;
            continue;
        }
        if (d->p < d->end && *d->p == '}') {
            d->p++;
            return 1;
        }
        lua_pop(d->L, 1);
        return json_dec_fail(d, "expected ',' or '}' in object");
    }
}

static int json_dec_value(json_dec *d)
{
    int ok;

    json_dec_space(d);
    if (d->p >= d->end)
        return json_dec_fail(d, "unexpected end of input");
    switch (*d->p) {
    case '{':
    case '[':
        if (++d->depth > JSON_MAX_DEPTH)
            return json_dec_fail(d, "nesting deeper than %d", JSON_MAX_DEPTH);
        luaL_checkstack(d->L, 4, "JSON nesting");
        ok = *d->p == '{' ? json_dec_object(d) : json_dec_array(d);
        d->depth--;
        return ok;
    case '"':
        return json_dec_string(d);
    case 't':
        if (!json_dec_literal(d, "true"))
            return 0;
        lua_pushboolean(d->L, 1);
        return 1;
    case 'f':
        if (!json_dec_literal(d, "false"))
            return 0;
        lua_pushboolean(d->L, 0);
        return 1;
    case 'n':
        if (!json_dec_literal(d, "null"))
            return 0;
        lua_pushlightuserdata(d->L, json_null);
        return 1;
    default:
        return json_dec_number(d);
    }
}

int json_decode(lua_State *L, const char *s, size_t len, char *err, size_t errlen)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0};

    if (!json_dec_value(&d))
        return 0;
    json_dec_space(&d);
    if (d.p != d.end) {
        lua_pop(L, 1);
        return json_dec_fail(&d, "trailing characters after JSON value");
    }
    return 1;
}

/* Skip one value without pushing it. Checks only what finding its end needs
 * (quotes, escapes and balanced brackets): json_peek's caller decodes the
 * text in full anyway. */
static int json_skip_value(json_dec *d)
{
    long depth = 0;

    json_dec_space(d);
    do {
        if (d->p >= d->end)
            return json_dec_fail(d, "unexpected end of input");
        switch (*d->p) {
        case '"': {
            const char *q = d->p + 1;
            for (;;) {
                const char *b;
                q = memchr(q, '"', (size_t)(d->end - q));
                if (q == NULL)
                    return json_dec_fail(d, "unterminated string");
                for (b = q; b > d->p + 1 && b[-1] == '\\'; b--)
                    ;
                if (((q - b) & 1) == 0)
                    break; /* not escaped */
                q++;
            }
            d->p = q + 1;
            break;
        }
        case '{':
        case '[':
            depth++;
            d->p++;
            break;
        case '}':
        case ']':
            if (--depth < 0)
                return json_dec_fail(d, "unexpected '%c'", *d->p);
            d->p++;
            break;
        default:
            if (depth == 0) {
                /* a number or literal: up to what ends it */
                while (d->p < d->end && !strchr(",}] \t\r\n", *d->p))
                    d->p++;
            } else {
                d->p++;
            }
        }
    } while (depth > 0);
    return 1;
}

int json_peek(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen)
{
    json_dec d = {L, s, s, s + len, err, errlen, 0};
    size_t klen = strlen(key);

    json_dec_space(&d);
    if (d.p >= d.end || *d.p != '{')
        return json_dec_fail(&d, "expected an object");
    d.p++;
    json_dec_space(&d);
    if (d.p < d.end && *d.p == '}') {
        lua_pushnil(L);
        return 1;
    }
    for (;;) {
        const char *k;
        size_t n;
        int match;

        json_dec_space(&d);
        if (d.p >= d.end || *d.p != '"')
            return json_dec_fail(&d, "expected a string key in object");
        if (!json_dec_string(&d))
            return 0;
        k = lua_tolstring(L, -1, &n);
        match = n == klen && memcmp(k, key, n) == 0;
        lua_pop(L, 1);
        json_dec_space(&d);
        if (d.p >= d.end || *d.p != ':')
            return json_dec_fail(&d, "expected ':' after object key");
        d.p++;
        if (match)
            return json_dec_value(&d);
        if (!json_skip_value(&d))
            return 0;
        json_dec_space(&d);
        if (d.p < d.end && *d.p == ',') {
            d.p++;
            continue;
        }
        if (d.p < d.end && *d.p == '}') {
            lua_pushnil(L);
            return 1;
        }
        return json_dec_fail(&d, "expected ',' or '}' in object");
    }
}

/* ---- encoding ---------------------------------------------------------- */

typedef struct json_enc {
    lua_State *L;
    json_buf *b;
    char *err;
    size_t errlen;
    int depth;
    int (*redact)(const char *key);
} json_enc;

void json_buf_free(json_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void json_buf_reserve(json_enc *e, size_t more)
{
    json_buf *b = e->b;

    if (b->cap - b->len >= more)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < more)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        luaL_error(e->L, "not enough memory to encode JSON");
    b->data = p;
    b->cap = cap;
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
        /* The shortest of %.15g and %.17g that reads back exactly. */
        n = snprintf(tmp, sizeof tmp, "%.15g", v);
        if (strtod(tmp, NULL) != v)
            n = snprintf(tmp, sizeof tmp, "%.17g", v);
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

static int json_enc_value(json_enc *e, int idx);

typedef struct json_key {
    const char *s;
    size_t n;
} json_key;

static int json_key_cmp(const void *a, const void *b)
{
    const json_key *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);

    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* An object's members in key order, as Go's encoding/json writes them, so
 * that equal objects encode to equal strings. */
static int json_enc_object(json_enc *e, int idx, lua_Integer count)
{
    lua_State *L = e->L;
    lua_Integer i = 0;
    /* Scratch space the GC frees even if encoding raises. The key strings
     * stay alive: the table holds them. */
    json_key *keys = lua_newuserdatauv(L, (size_t)count * sizeof *keys + 1, 0);

    lua_pushnil(L);
    while (lua_next(L, idx)) { /* every key is a string: json_enc_kind said so */
        lua_pop(L, 1);
        keys[i].s = lua_tolstring(L, -1, &keys[i].n);
        i++;
    }
    qsort(keys, (size_t)i, sizeof *keys, json_key_cmp);
    json_putc(e, '{');
    for (lua_Integer k = 0; k < i; k++) {
        if (k > 0)
            json_putc(e, ',');
        json_enc_string(e, keys[k].s, keys[k].n);
        json_putc(e, ':');
        if (e->redact && e->redact(keys[k].s)) {
            json_put(e, "\"[redacted]\"", 12);
            continue;
        }
        lua_pushlstring(L, keys[k].s, keys[k].n);
        lua_rawget(L, idx);
        if (!json_enc_value(e, lua_gettop(L))) {
            lua_pop(L, 2);
            return 0;
        }
        lua_pop(L, 1);
    }
    json_putc(e, '}');
    lua_pop(L, 1); /* keys */
    return 1;
}

static int json_enc_table(json_enc *e, int idx)
{
    lua_State *L = e->L;
    lua_Integer len = 0;
    int kind;

    if (++e->depth > JSON_MAX_DEPTH)
        return json_enc_fail(e, "a table nested too deep (a cycle?)");
    luaL_checkstack(L, 6, "JSON nesting");
    kind = json_enc_kind(e, idx, &len);
    if (kind < 0)
        return 0;
    if (kind == 1) {
        json_putc(e, '[');
        for (lua_Integer i = 1; i <= len; i++) {
            if (i > 1)
                json_putc(e, ',');
            lua_rawgeti(L, idx, i);
            if (!json_enc_value(e, lua_gettop(L))) {
                lua_pop(L, 1);
                return 0;
            }
            lua_pop(L, 1);
        }
        json_putc(e, ']');
    } else if (!json_enc_object(e, idx, len)) {
        return 0;
    }
    e->depth--;
    return 1;
}

static int json_enc_value(json_enc *e, int idx)
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
        return json_enc_table(e, idx);
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

int json_encode(lua_State *L, int idx, json_buf *b, char *err, size_t errlen)
{
    json_enc e = {L, b, err, errlen, 0, NULL};

    return json_enc_value(&e, lua_absindex(L, idx));
}

int json_encode_redacted(lua_State *L, int idx, json_buf *b, char *err, size_t errlen,
                         int (*redact)(const char *key))
{
    json_enc e = {L, b, err, errlen, 0, redact};

    return json_enc_value(&e, lua_absindex(L, idx));
}

void json_push_array_mt(lua_State *L)
{
    if (luaL_newmetatable(L, JSON_ARRAY_MT)) {
        lua_pushliteral(L, "array");
        lua_setfield(L, -2, "__name");
    }
}
