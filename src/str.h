/* str.h - the string helpers every module needs. */
#ifndef LUAOP_STR_H
#define LUAOP_STR_H

#include <stddef.h>

/* strdup that passes NULL through. */
char *str_dup(const char *s);

/* A copy of the n bytes at s, NUL-terminated (s may hold NULs). */
char *str_ndup(const char *s, size_t n);

/* url with any user:password@ replaced by [redacted]@, for logs and
 * errors: url itself, or buf (of size len) holding the redacted copy. */
const char *str_redact_url(const char *url, char *buf, size_t len);

/* Overwrite a secret (token, password) with zeros, free it, and set *s to
 * NULL, so credentials do not linger in freed memory. */
void str_free_secret(char **s);

/* A duration as Go writes one ("30s", "1m30s", "500ms", "1.5h") or a
 * bare number of seconds, into *seconds; -1 when malformed or negative. */
int str_parse_duration(const char *s, double *seconds);

/* A positive count of bytes: an integer or a Kubernetes quantity with a
 * suffix k, M, G, Ki, Mi or Gi ("64Mi"); -1 when malformed or 0. */
int str_parse_bytes(const char *s, unsigned long long *bytes);

#endif
