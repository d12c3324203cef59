/* str.h - the string helpers every module needs. */
#ifndef LUAOP_STR_H
#define LUAOP_STR_H

/* strdup that passes NULL through. */
char *str_dup(const char *s);

/* Overwrite a secret (token, password) with zeros, free it, and set *s to
 * NULL, so credentials do not linger in freed memory. */
void str_free_secret(char **s);

#endif
