/* b64.c - standard base64 decoding (see b64.h). */
#include "b64.h"

#include <stdlib.h>

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

unsigned char *b64_decode(const char *s, size_t len, size_t *outlen)
{
    unsigned char *out = malloc(len / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0, pad = 0;
    size_t n = 0;

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad > 0)
            goto bad; /* a stray character, or data after padding */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* Leftover bits must be zero padding of a 2- or 3-character group. */
    if (bits >= 6 || pad > 2 || acc != 0)
        goto bad;
    out[n] = '\0';
    *outlen = n;
    return out;
bad:
    free(out);
    return NULL;
}
