/* list.h - the one intrusive doubly linked list: the live calls of an API
 * server, the live requests of an HTTP client, the tasks not yet ended, the
 * sleeps not yet over, the file jobs not yet done.
 *
 * A struct that can be on a list holds a list_node; a list is a pointer to
 * its first node (NULL: empty). list_entry gets the struct back from its
 * node. Removing a node that is on no list (both links NULL, and not the
 * head) does nothing, so removing twice is safe. */
#ifndef LUAOP_LIST_H
#define LUAOP_LIST_H

#include <stddef.h>

typedef struct list_node {
    struct list_node *prev, *next;
} list_node;

/* The struct of type `type` whose member `member` is the node. */
#define list_entry(node, type, member) ((type *)(void *)((char *)(node) - offsetof(type, member)))

/* Put n first on the list at *head. */
static inline void list_push(list_node **head, list_node *n)
{
    n->prev = NULL;
    n->next = *head;
    if (*head)
        (*head)->prev = n;
    *head = n;
}

/* Take n off the list at *head (if it is on it). */
static inline void list_remove(list_node **head, list_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else if (*head == n)
        *head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

#endif
