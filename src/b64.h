/* b64.h - standard base64 (RFC 4648), as kubeconfig's *-data fields use. */
#ifndef LUAOP_B64_H
#define LUAOP_B64_H

#include <stddef.h>

/* Decode `len` bytes of base64 (whitespace ignored, padding optional) into a
 * new NUL-terminated buffer, its length in *outlen. NULL if malformed or out
 * of memory. */
unsigned char *b64_decode(const char *s, size_t len, size_t *outlen);

#endif
