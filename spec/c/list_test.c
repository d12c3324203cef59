/* list_test.c - src/list.h: push, remove from the head, the middle and the
 * end, removing twice, and getting the struct back from its node. */
#include <stddef.h>

#include "list.h"
#include "tap.h"

typedef struct item {
    int value;
    list_node link;
} item;

/* The values on the list, first to last, as digits (and the links checked). */
static const char *values(list_node *head)
{
    static char s[16];
    size_t n = 0;
    list_node *prev = NULL;

    for (list_node *l = head; l && n < sizeof s - 1; l = l->next) {
        if (l->prev != prev)
            return "broken";
        s[n++] = (char)('0' + list_entry(l, item, link)->value);
        prev = l;
    }
    s[n] = '\0';
    return s;
}

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

int main(void)
{
    item it[4];
    list_node *head = NULL;

    for (int i = 0; i < 4; i++) {
        it[i].value = i;
        list_push(&head, &it[i].link);
    }
    TAP_OK(same(values(head), "3210"), "push puts a node first");
    TAP_OK(list_entry(&it[2].link, item, link) == &it[2], "list_entry gets the struct back");
    list_remove(&head, &it[1].link);
    TAP_OK(same(values(head), "320"), "remove from the middle");
    list_remove(&head, &it[3].link);
    TAP_OK(same(values(head), "20"), "remove the head");
    list_remove(&head, &it[0].link);
    TAP_OK(same(values(head), "2"), "remove the last");
    list_remove(&head, &it[0].link);
    TAP_OK(same(values(head), "2"), "removing a node that is on no list does nothing");
    list_remove(&head, &it[2].link);
    TAP_OK(head == NULL, "removing the only node empties the list");
    list_push(&head, &it[1].link);
    TAP_OK(same(values(head), "1"), "a removed node can be pushed again");
    return tap_done();
}
