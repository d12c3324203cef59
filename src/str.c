/* str.c - the string helpers every module needs (see str.h). */
#include "str.h"

#include <stdlib.h>
#include <string.h>

char *str_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

void str_free_secret(char **s)
{
    if (*s) {
        memset(*s, 0, strlen(*s));
        free(*s);
        *s = NULL;
    }
}
