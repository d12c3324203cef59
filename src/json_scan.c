/* json_scan.c - walking JSON text without building values (json.h): where
 * a value ends, the plain string at a path, the text of a member, and an
 * object's text with members cut out (what an informer's cache keeps of a
 * watch event's object, json_scan_cut). For a decision about an
 * object made before it is decoded, or instead of decoding it (a sharded
 * informer's filter, lbind_watch.c and json_decode_page), and for the
 * decoder's own skipping. It checks only what finding ends needs (quotes,
 * escapes and balanced brackets): a caller that keeps the text decodes it
 * in full anyway. */
#include "json.h"

#include <string.h>

static const char *json_scan_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

const char *json_scan_skip(const char *p, const char *end, const char **at, const char **why)
{
    long depth = 0;

    p = json_scan_space(p, end);
    do {
        if (p >= end) {
            *at = p;
            *why = "unexpected end of input";
            return NULL;
        }
        switch (*p) {
        case '"': {
            const char *q = p + 1;
            for (;;) {
                const char *b;
                q = memchr(q, '"', (size_t)(end - q));
                if (q == NULL) {
                    *at = p;
                    *why = "unterminated string";
                    return NULL;
                }
                for (b = q; b > p + 1 && b[-1] == '\\'; b--)
                    ;
                if (((q - b) & 1) == 0)
                    break; /* not escaped */
                q++;
            }
            p = q + 1;
            break;
        }
        case '{':
        case '[':
            depth++;
            p++;
            break;
        case '}':
        case ']':
            if (--depth < 0) {
                *at = p;
                *why = NULL; /* an unexpected bracket: the one at *at */
                return NULL;
            }
            p++;
            break;
        default:
            if (depth == 0) {
                /* a number or literal: up to what ends it */
                while (p < end && !strchr(",}] \t\r\n", *p))
                    p++;
            } else {
                p++;
            }
        }
    } while (depth > 0);
    return p;
}

/* Walk the object at *pp (after leading space) to its end, *pp left after
 * it: *found and *fend the value of member key (the last of a key given
 * twice, as the decoder takes it), or NULL; *escaped whether a key was
 * written with escapes (it might decode to key). 0 when what is at *pp is
 * no object, -1 when it cannot be walked, else 1. */
static int json_scan_find(const char **pp, const char *end, const char *key, const char **found,
                          const char **fend, int *escaped)
{
    const char *p = json_scan_space(*pp, end), *q, *at, *why;
    size_t klen = strlen(key);

    *found = *fend = NULL;
    *escaped = 0;
    if (p >= end || *p != '{')
        return 0;
    p = json_scan_space(p + 1, end);
    if (p < end && *p == '}') {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        int match;

        p = json_scan_space(p, end);
        if (p >= end || *p != '"')
            return -1;
        q = json_scan_skip(p, end, &at, &why);
        if (q == NULL)
            return -1;
        match = (size_t)(q - p - 2) == klen && memcmp(p + 1, key, klen) == 0;
        if (memchr(p + 1, '\\', (size_t)(q - p - 2)) != NULL)
            *escaped = 1;
        p = json_scan_space(q, end);
        if (p >= end || *p != ':')
            return -1;
        p = json_scan_space(p + 1, end);
        q = json_scan_skip(p, end, &at, &why);
        if (q == NULL)
            return -1;
        if (match) {
            *found = p;
            *fend = q;
        }
        p = json_scan_space(q, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') {
            *pp = p + 1;
            return 1;
        }
        return -1;
    }
}

int json_scan_string(const char *s, size_t len, const char *const *keys, int nkeys, const char **v, size_t *vlen)
{
    const char *p = s, *end = s + len, *q, *at, *why, *found, *fend;
    int escaped;

    for (int i = 0; i < nkeys; i++) {
        /* every member, so that the object is walked to its end */
        switch (json_scan_find(&p, end, keys[i], &found, &fend, &escaped)) {
        case 0:
            return i == 0 ? -1 : 0;
        case -1:
            return -1;
        }
        if (found == NULL || escaped)
            return 0;
        p = found;
    }
    if (p >= end || *p != '"')
        return 0;
    q = json_scan_skip(p, end, &at, &why);
    if (q == NULL)
        return -1;
    if (memchr(p + 1, '\\', (size_t)(q - p - 2)) != NULL)
        return 0; /* escapes: only the decoder reads it right */
    *v = p + 1;
    *vlen = (size_t)(q - p - 2);
    return 1;
}

int json_scan_member(const char *s, size_t len, const char *key, const char **v, size_t *vlen)
{
    const char *p = s, *end = s + len, *found, *fend;
    int escaped;

    if (json_scan_find(&p, end, key, &found, &fend, &escaped) != 1 || json_scan_space(p, end) != end)
        return -1; /* no object, not walkable, or trailing characters */
    if (found == NULL || escaped)
        return 0;
    *v = found;
    *vlen = (size_t)(fend - found);
    return 1;
}

/* Copy key text [ks, ke) and ':' to *o; a ',' first unless first. */
static char *json_cut_key(char *o, const char *ks, const char *ke, int first)
{
    if (!first)
        *o++ = ',';
    memcpy(o, ks, (size_t)(ke - ks));
    o += ke - ks;
    *o++ = ':';
    return o;
}

const char *json_scan_cut(const char *p, const char *end, const json_cut *node, char **out, const char **why)
{
    char *o = *out;
    int first = 1;

    p = json_scan_space(p, end);
    if (p >= end || *p != '{') {
        *why = "expected an object";
        return NULL;
    }
    *o++ = '{';
    p = json_scan_space(p + 1, end);
    if (p < end && *p == '}') {
        *o++ = '}';
        *out = o;
        return p + 1;
    }
    for (;;) {
        const char *ks, *ke, *vs, *ve, *at, *w = NULL;
        const json_cut *c = NULL;
        size_t klen;

        p = json_scan_space(p, end);
        if (p >= end || *p != '"') {
            *why = "expected a string key in object";
            return NULL;
        }
        ks = p;
        ke = json_scan_skip(p, end, &at, &w);
        if (ke == NULL) {
            *why = w ? w : "malformed key";
            return NULL;
        }
        klen = (size_t)(ke - ks - 2);
        if (memchr(ks + 1, '\\', klen) != NULL) {
            *why = "a key written with escapes"; /* it may decode to a key named */
            return NULL;
        }
        for (int i = 0; i < node->nkids; i++) {
            if (strlen(node->kids[i].key) == klen && memcmp(ks + 1, node->kids[i].key, klen) == 0) {
                c = &node->kids[i];
                break;
            }
        }
        p = json_scan_space(ke, end);
        if (p >= end || *p != ':') {
            *why = "expected ':' after object key";
            return NULL;
        }
        vs = json_scan_space(p + 1, end);
        if (c != NULL && c->kids != NULL && vs < end && *vs == '{') {
            o = json_cut_key(o, ks, ke, first);
            first = 0;
            *out = o;
            ve = json_scan_cut(vs, end, c, out, why);
            if (ve == NULL)
                return NULL;
            o = *out;
        } else {
            ve = json_scan_skip(vs, end, &at, &w);
            if (ve == NULL) {
                *why = w ? w : "malformed value";
                return NULL;
            }
            /* kept: named, where names are kept; else not named as a whole */
            if (node->keep ? c != NULL : c == NULL || c->kids != NULL) {
                o = json_cut_key(o, ks, ke, first);
                first = 0;
                memcpy(o, vs, (size_t)(ve - vs));
                o += ve - vs;
            }
        }
        p = json_scan_space(ve, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') {
            *o++ = '}';
            *out = o;
            return p + 1;
        }
        *why = "expected ',' or '}' in object";
        return NULL;
    }
}
