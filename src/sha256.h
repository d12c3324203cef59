/* sha256.h - SHA-256 (FIPS 180-4), for luaop.hash: a digest that is the
 * same in every process and version. Self-contained: the release binary
 * links OpenSSL, but the ASan build, the specs' module and the fuzz
 * harnesses link Debian's shared libcurl and no libcrypto of their own. */
#ifndef LUAOP_SHA256_H
#define LUAOP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST 32

/* The digest of len bytes at data into out. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST]);

/* The digest as 64 lower-case hex digits and a NUL into hex. */
void sha256_hex(const void *data, size_t len, char hex[2 * SHA256_DIGEST + 1]);

#endif
