/* ytree.h - a YAML document as a small tree (libyaml underneath).
 *
 * Enough YAML for configuration files: mappings, sequences and scalars, each
 * with the line it starts on. Anchors and aliases are refused. */
#ifndef LUAOP_YTREE_H
#define LUAOP_YTREE_H

#include <stddef.h>

typedef enum ytree_kind { YTREE_SCALAR, YTREE_SEQ, YTREE_MAP } ytree_kind;

typedef struct ytree ytree;
struct ytree {
    ytree_kind kind;
    int line;      /* 1-based */
    int quoted;    /* a scalar written in quotes (so "true" is a string) */
    char *str;     /* scalar text; NUL-terminated */
    size_t len;    /* scalar length, or number of children */
    char **keys;   /* map keys (len of them) */
    ytree **items; /* children (len of them) */
    size_t cap;    /* room in keys and items */
};

/* Parse the first document of `data`. An empty document gives an empty map.
 * NULL on error, with a message naming the line in err. */
ytree *ytree_parse(const char *data, size_t len, char *err, size_t errlen);

/* Every document of `data`, as a sequence of them (empty ones as empty
 * maps). NULL on error, with a message naming the line in err. */
ytree *ytree_parse_all(const char *data, size_t len, char *err, size_t errlen);

void ytree_free(ytree *t);

/* The value of `key` in a map, or NULL (also when t is not a map). */
const ytree *ytree_get(const ytree *t, const char *key);

/* A scalar's text, or NULL when t is NULL or not a scalar. */
const char *ytree_str(const ytree *t);

/* YAML's null: absent, "~", "null" or empty and unquoted. */
int ytree_is_null(const ytree *t);

#endif
