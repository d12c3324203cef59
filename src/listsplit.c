/* listsplit.c - see listsplit.h. */
#include "listsplit.h"

#include <string.h>

enum { LS_START, LS_ENV, LS_ITEMS, LS_ITEM, LS_DONE, LS_STOPPED };

/* between items: what may come next */
enum { LS_FIRST, LS_AFTER_ITEM, LS_AFTER_COMMA };

void listsplit_init(listsplit *s)
{
    memset(s, 0, sizeof *s);
}

static enum listsplit_error listsplit_stop(listsplit *s, enum listsplit_error err, const char *why)
{
    s->state = LS_STOPPED;
    s->err = err;
    s->error = why;
    dbuf_free(&s->item);
    return err;
}

static int listsplit_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A byte inside a string (its escapes and closing quote followed): 1, or
 * 0 when outside one. */
static int listsplit_string_byte(listsplit *s, char c)
{
    if (!s->in_str)
        return 0;
    if (s->esc)
        s->esc = 0;
    else if (c == '\\')
        s->esc = 1;
    else if (c == '"')
        s->in_str = 0;
    return 1;
}

/* One byte of the envelope: kept, and followed for the top level's keys. */
static enum listsplit_error listsplit_env_byte(listsplit *s, char c)
{
    if (s->env.len >= LISTSPLIT_MAX_ENVELOPE)
        return listsplit_stop(s, LISTSPLIT_TOO_LARGE, "a list whose envelope (all but its items) is over 1 MiB");
    if (listsplit_string_byte(s, c)) {
        /* (inside a string: followed, kept) */
    } else if (c == '"') {
        s->in_str = 1;
        if (s->depth == 1)
            s->key_start = s->env.len;
        s->want_items = 0;
    } else if (c == ':' && s->depth == 1) {
        /* the string just read (key_start: its opening quote) is a key */
        size_t n = s->env.len - s->key_start;
        s->want_items = n >= 7 && memcmp(s->env.data + s->key_start, "\"items\"", 7) == 0 &&
                        (n == 7 || strspn(s->env.data + s->key_start + 7, " \t\r\n") == n - 7);
    } else if (c == '[' && s->depth == 1 && s->want_items) {
        s->want_items = 0;
        s->state = LS_ITEMS;
        s->need_comma = LS_FIRST;
        s->had_items = 1;
    } else if (!listsplit_space(c)) {
        s->want_items = 0;
        if (c == '{' || c == '[') {
            s->depth++;
        } else if (c == '}' || c == ']') {
            if (--s->depth == 0)
                s->state = LS_DONE;
        }
    }
    if (dbuf_append(&s->env, &c, 1) != 0)
        return listsplit_stop(s, LISTSPLIT_NO_MEMORY, "out of memory");
    return LISTSPLIT_OK;
}

/* Scan an item from data[*i]; its end, if it comes, at *i (its last byte):
 * 1, or -1 when that byte is a ']' (its brackets do not match: the rest
 * of an item's JSON is checked by whoever decodes it). */
static int listsplit_item_end(listsplit *s, const char *data, size_t len, size_t *i)
{
    for (; *i < len; (*i)++) {
        char c = data[*i];
        if (listsplit_string_byte(s, c)) {
            continue;
        } else if (c == '"') {
            s->in_str = 1;
        } else if (c == '{' || c == '[') {
            s->depth++;
        } else if ((c == '}' || c == ']') && --s->depth == 0) {
            return c == '}' ? 1 : -1;
        }
    }
    return 0;
}

/* An item whose last byte came: handed over, and the next may come. (The
 * envelope's depth at its items is 1 again.) */
static enum listsplit_error listsplit_item_done(listsplit *s, const char *item, size_t n, listsplit_item_fn fn,
                                                void *ud)
{
    s->item_len = 0;
    s->state = LS_ITEMS;
    s->need_comma = LS_AFTER_ITEM;
    s->depth = 1;
    if (fn(item, n, ud) != 0)
        return listsplit_stop(s, LISTSPLIT_REFUSED, "the item was refused");
    dbuf_clear(&s->item);
    return LISTSPLIT_OK;
}

/* Read the item under way from data[i]: handed over if it ends there, else
 * kept. The bytes taken. */
static size_t listsplit_item(listsplit *s, const char *data, size_t len, size_t i, listsplit_item_fn fn, void *ud)
{
    size_t at = i;
    int ended = listsplit_item_end(s, data, len, &at);
    size_t n = (ended ? at + 1 : len) - i;

    if (ended < 0) {
        listsplit_stop(s, LISTSPLIT_MALFORMED, "a list item whose brackets do not match");
        return n;
    }
    if (n > LISTSPLIT_MAX_ITEM - s->item_len) {
        listsplit_stop(s, LISTSPLIT_TOO_LARGE, "a list item over 16 MiB");
        return n;
    }
    if (ended && s->item.len == 0) { /* all of it in this chunk: read where it lies */
        listsplit_item_done(s, data + i, n, fn, ud);
        return n;
    }
    if (dbuf_append(&s->item, data + i, n) != 0) {
        listsplit_stop(s, LISTSPLIT_NO_MEMORY, "out of memory");
        return n;
    }
    s->item_len += n;
    if (ended)
        listsplit_item_done(s, s->item.data, s->item.len, fn, ud);
    return n;
}

enum listsplit_error listsplit_feed(listsplit *s, const char *data, size_t len, listsplit_item_fn fn, void *ud)
{
    size_t i = 0;

    while (i < len && s->state != LS_STOPPED) {
        char c = data[i];
        switch (s->state) {
        case LS_START:
            i++;
            if (listsplit_space(c))
                break;
            if (c != '{')
                return listsplit_stop(s, LISTSPLIT_MALFORMED, "a list that is not a JSON object");
            s->state = LS_ENV;
            s->depth = 1;
            if (dbuf_append(&s->env, "{", 1) != 0)
                return listsplit_stop(s, LISTSPLIT_NO_MEMORY, "out of memory");
            break;
        case LS_ENV:
            i++;
            listsplit_env_byte(s, c);
            break;
        case LS_ITEMS:
            if (listsplit_space(c)) {
                i++;
            } else if (c == ',' && s->need_comma == LS_AFTER_ITEM) {
                i++;
                s->need_comma = LS_AFTER_COMMA;
            } else if (c == ']' && s->need_comma != LS_AFTER_COMMA) {
                i++;
                s->state = LS_ENV; /* (its '[' is in env already) */
                if (dbuf_append(&s->env, "]", 1) != 0)
                    return listsplit_stop(s, LISTSPLIT_NO_MEMORY, "out of memory");
            } else if (c == '{' && s->need_comma != LS_AFTER_ITEM) {
                /* an item, from its brace (which makes the depth 1) */
                s->state = LS_ITEM;
                s->depth = 0;
                s->in_str = s->esc = 0;
                s->item_len = 0;
                dbuf_clear(&s->item);
                i += listsplit_item(s, data, len, i, fn, ud);
            } else {
                return listsplit_stop(s, LISTSPLIT_MALFORMED,
                                      c == '{' || c == ']' ? "a list whose items are not separated by commas"
                                      : c == ','           ? "a list with a comma where an item should be"
                                                           : "a list item that is not an object");
            }
            break;
        case LS_ITEM: /* an item begun in an earlier chunk */
            i += listsplit_item(s, data, len, i, fn, ud);
            break;
        case LS_DONE:
            if (!listsplit_space(c))
                return listsplit_stop(s, LISTSPLIT_MALFORMED, "a list with more after its end");
            i++;
            break;
        default:
            break;
        }
    }
    return s->state == LS_STOPPED ? s->err : LISTSPLIT_OK;
}

enum listsplit_error listsplit_finish(listsplit *s)
{
    if (s->state == LS_STOPPED)
        return s->err;
    if (s->state != LS_DONE)
        return listsplit_stop(s, LISTSPLIT_MALFORMED,
                              s->state == LS_START ? "an empty answer where a list should be" : "a list cut short");
    if (!s->had_items)
        return listsplit_stop(s, LISTSPLIT_MALFORMED, "an answer with no items array");
    return LISTSPLIT_OK;
}

const char *listsplit_envelope(const listsplit *s, size_t *len)
{
    *len = s->env.len;
    return s->env.data ? s->env.data : "";
}

void listsplit_free(listsplit *s)
{
    dbuf_free(&s->env);
    dbuf_free(&s->item);
}
