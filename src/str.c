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

#define STR_DECIMAL "0123456789.eE+-"

int str_parse_duration(const char *s, double *seconds)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};
    double total = 0;
    char *end;

    if (s == NULL || !((*s >= '0' && *s <= '9') || *s == '.'))
        return -1;
    /* decimal numbers only (strtod also reads hex, "inf" and "nan"): it
     * must stop exactly where the digits, dots and exponents do */
    total = strtod(s, &end);
    if (end != s + strspn(s, STR_DECIMAL))
        return -1;
    if (*end == '\0') /* a bare number of seconds */
        goto done;
    total = 0;
    while (*s) {
        size_t best = 0;
        double mult = 0;
        double v;

        if (!((*s >= '0' && *s <= '9') || *s == '.'))
            return -1;
        v = strtod(s, &end);
        if (end == s || end != s + strspn(s, STR_DECIMAL))
            return -1;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t n = strlen(units[i].unit);
            if (n > best && strncmp(end, units[i].unit, n) == 0) {
                best = n;
                mult = units[i].mult;
            }
        }
        if (best == 0)
            return -1;
        total += v * mult;
        s = end + best;
    }
done:
    if (!(total >= 0) || total > 1e12) /* also NaN */
        return -1;
    *seconds = total;
    return 0;
}

int str_parse_bytes(const char *s, unsigned long long *bytes)
{
    static const struct {
        const char *suffix;
        unsigned long long mult;
    } units[] = {{"", 1}, {"k", 1000}, {"M", 1000000}, {"G", 1000000000}, {"Ki", 1ull << 10},
                 {"Mi", 1ull << 20}, {"Gi", 1ull << 30}};
    unsigned long long n = 0;
    const char *p = s;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > (~0ull - 9) / 10)
            return -1;
        n = n * 10 + (unsigned long long)(*p - '0');
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].suffix) == 0) {
            if (n == 0 || n > ~0ull / units[i].mult)
                return -1;
            *bytes = n * units[i].mult;
            return 0;
        }
    }
    return -1;
}
