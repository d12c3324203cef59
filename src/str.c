/* str.c - the string helpers every module needs (see str.h). */
#include "str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *str_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *str_ndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

const char *str_redact_url(const char *url, char *buf, size_t len)
{
    const char *host = strstr(url, "://");
    const char *at = host ? strchr(host + 3, '@') : NULL;
    const char *slash = host ? strchr(host + 3, '/') : NULL;

    if (at == NULL || (slash && slash < at))
        return url;
    snprintf(buf, len, "%.*s[redacted]%s", (int)(host + 3 - url), url, at);
    return buf;
}

void str_free_secret(char **s)
{
    if (*s) {
        memset(*s, 0, strlen(*s));
        free(*s);
        *s = NULL;
    }
}
