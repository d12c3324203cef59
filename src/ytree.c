/* ytree.c - a YAML document as a small tree (see ytree.h). */

#include "ytree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

typedef struct ytree_parser {
    yaml_parser_t p;
    char *err;
    size_t errlen;
    int depth;
} ytree_parser;

#define YTREE_MAX_DEPTH 64

void ytree_free(ytree *t)
{
    if (t == NULL)
        return;
    free(t->str);
    if (t->kind != YTREE_SCALAR) {
        for (size_t i = 0; i < t->len; i++) {
            if (t->keys)
                free(t->keys[i]);
            ytree_free(t->items[i]);
        }
    }
    free(t->keys);
    free(t->items);
    free(t);
}

static int ytree_fail(ytree_parser *yp, int line, const char *msg)
{
    snprintf(yp->err, yp->errlen, "line %d: %s", line, msg);
    return 0;
}

static int ytree_next(ytree_parser *yp, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&yp->p, ev)) {
        snprintf(yp->err, yp->errlen, "line %zu: %s%s%s", yp->p.problem_mark.line + 1,
                 yp->p.problem ? yp->p.problem : "invalid YAML",
                 yp->p.context ? " " : "", yp->p.context ? yp->p.context : "");
        return 0;
    }
    return 1;
}

static int ytree_push(ytree *t, char *key, ytree *child)
{
    if (t->len == t->cap) {
        /* doubling: a long mapping is no quadratic copy */
        size_t cap = t->cap ? 2 * t->cap : 4;
        ytree **items = realloc(t->items, cap * sizeof *items);
        if (items == NULL)
            return 0;
        t->items = items;
        if (t->kind == YTREE_MAP) {
            char **keys = realloc(t->keys, cap * sizeof *keys);
            if (keys == NULL)
                return 0;
            t->keys = keys;
        }
        t->cap = cap;
    }
    if (t->kind == YTREE_MAP)
        t->keys[t->len] = key;
    t->items[t->len] = child;
    t->len++;
    return 1;
}

/* Build the node that starts with `ev` (consumed). */
static ytree *ytree_node(ytree_parser *yp, yaml_event_t *ev)
{
    ytree *t = calloc(1, sizeof *t);
    int line = (int)ev->start_mark.line + 1;

    if (t == NULL) {
        ytree_fail(yp, line, "out of memory");
        yaml_event_delete(ev);
        return NULL;
    }
    t->line = line;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        t->kind = YTREE_SCALAR;
        t->len = ev->data.scalar.length;
        t->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        t->str = malloc(t->len + 1);
        if (t->str == NULL)
            goto err_oom;
        memcpy(t->str, ev->data.scalar.value, t->len);
        t->str[t->len] = '\0';
        yaml_event_delete(ev);
        return t;
    case YAML_ALIAS_EVENT:
        ytree_fail(yp, line, "YAML aliases are not supported here");
        goto err;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        break;
    default:
        ytree_fail(yp, line, "unexpected YAML event");
        goto err;
    }

    int is_map = ev->type == YAML_MAPPING_START_EVENT;
    t->kind = is_map ? YTREE_MAP : YTREE_SEQ;
    yaml_event_delete(ev);
    if (++yp->depth > YTREE_MAX_DEPTH) {
        ytree_fail(yp, line, "nested too deep");
        ytree_free(t);
        return NULL;
    }
    for (;;) {
        yaml_event_t e;
        char *key = NULL;
        if (!ytree_next(yp, &e))
            goto err_tree;
        if (e.type == YAML_MAPPING_END_EVENT || e.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&e);
            break;
        }
        if (is_map) {
            if (e.type != YAML_SCALAR_EVENT) {
                ytree_fail(yp, (int)e.start_mark.line + 1, "mapping keys must be scalars");
                yaml_event_delete(&e);
                goto err_tree;
            }
            key = strndup((const char *)e.data.scalar.value, e.data.scalar.length);
            yaml_event_delete(&e);
            if (key == NULL || !ytree_next(yp, &e)) {
                free(key);
                goto err_tree;
            }
        }
        ytree *child = ytree_node(yp, &e);
        if (child == NULL || !ytree_push(t, key, child)) {
            free(key);
            ytree_free(child);
            goto err_tree;
        }
    }
    yp->depth--;
    return t;

err_oom:
    ytree_fail(yp, line, "out of memory");
err:
    yaml_event_delete(ev);
err_tree:
    ytree_free(t);
    return NULL;
}

/* An empty map: what an empty document is. */
static ytree *ytree_empty(void)
{
    ytree *t = calloc(1, sizeof *t);

    if (t) {
        t->kind = YTREE_MAP;
        t->line = 1;
    }
    return t;
}

/* The documents of data, up to max of them, as a sequence; NULL on error. */
static ytree *ytree_parse_docs(const char *data, size_t len, size_t max, char *err, size_t errlen)
{
    ytree_parser yp = {.err = err, .errlen = errlen};
    yaml_event_t ev;
    ytree *docs = calloc(1, sizeof *docs);

    if (docs == NULL || !yaml_parser_initialize(&yp.p)) {
        free(docs);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    docs->kind = YTREE_SEQ;
    docs->line = 1;
    yaml_parser_set_input_string(&yp.p, (const unsigned char *)data, len);
    /* the stream's start, then documents until the stream's end */
    if (!ytree_next(&yp, &ev))
        goto fail;
    yaml_event_delete(&ev);
    while (docs->len < max) {
        ytree *root;
        if (!ytree_next(&yp, &ev))
            goto fail;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        yaml_event_delete(&ev); /* the document's start */
        if (!ytree_next(&yp, &ev))
            goto fail;
        root = ytree_node(&yp, &ev);
        if (root == NULL)
            goto fail;
        if (root->kind == YTREE_SCALAR && ytree_is_null(root)) {
            /* "---" followed by nothing: an empty document */
            ytree_free(root);
            root = ytree_empty();
        }
        if (root == NULL || !ytree_push(docs, NULL, root)) {
            ytree_free(root);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        if (!ytree_next(&yp, &ev)) /* the document's end */
            goto fail;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&yp.p);
    return docs;
fail:
    yaml_parser_delete(&yp.p);
    ytree_free(docs);
    return NULL;
}

ytree *ytree_parse(const char *data, size_t len, char *err, size_t errlen)
{
    ytree *docs = ytree_parse_docs(data, len, 1, err, errlen), *root;

    if (docs == NULL)
        return NULL;
    if (docs->len == 0) {
        ytree_free(docs);
        return ytree_empty();
    }
    root = docs->items[0];
    docs->len = 0;
    ytree_free(docs);
    return root;
}

ytree *ytree_parse_all(const char *data, size_t len, char *err, size_t errlen)
{
    return ytree_parse_docs(data, len, (size_t)-1, err, errlen);
}

const ytree *ytree_get(const ytree *t, const char *key)
{
    if (t == NULL || t->kind != YTREE_MAP)
        return NULL;
    for (size_t i = 0; i < t->len; i++) {
        if (strcmp(t->keys[i], key) == 0)
            return t->items[i];
    }
    return NULL;
}

const char *ytree_str(const ytree *t)
{
    return t && t->kind == YTREE_SCALAR ? t->str : NULL;
}

int ytree_is_null(const ytree *t)
{
    if (t == NULL)
        return 1;
    if (t->kind != YTREE_SCALAR || t->quoted)
        return 0;
    return t->len == 0 || strcmp(t->str, "~") == 0 || strcmp(t->str, "null") == 0 ||
           strcmp(t->str, "Null") == 0 || strcmp(t->str, "NULL") == 0;
}
