/* sha256_test.c - src/sha256.c against FIPS 180-4's examples and the
 * lengths around a block's padding boundary (checked against sha256sum). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "tap.h"

static int is(const char *data, size_t len, const char *want)
{
    char hex[2 * SHA256_DIGEST + 1];

    sha256_hex(data, len, hex);
    if (strcmp(hex, want) != 0)
        printf("# got %s\n# want %s\n", hex, want);
    return strcmp(hex, want) == 0;
}

int main(void)
{
    static char a[1000000];
    static char msg[130];
    size_t i;

    TAP_OK(is("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "sha256 of nothing");
    TAP_OK(is("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256 of abc (FIPS 180-4)");
    TAP_OK(is("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
           "sha256 of the 448-bit message (FIPS 180-4): two blocks of padding");
    memset(a, 'a', sizeof a);
    TAP_OK(is(a, sizeof a, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
           "sha256 of a million a's (FIPS 180-4)");
    /* 55, 63, 64 and 65 bytes: the tail fits, just does not, fills, spills */
    for (i = 0; i < sizeof msg; i++)
        msg[i] = (char)('a' + i % 26);
    TAP_OK(is(msg, 55, "595615dbe4f0f407ae397d08b4c2cb870cb9b0e11937416f950c5160acf9c005"), "sha256 of 55 bytes");
    TAP_OK(is(msg, 63, "5ca3e1ef5207490eac01a795e5cc94d59582a5118bf9534665c8668d87aa647c"), "sha256 of 63 bytes");
    TAP_OK(is(msg, 64, "2fcd5a0d60e4c941381fcc4e00a4bf8be422c3ddfafb93c809e8d1e2bfffae8e"), "sha256 of 64 bytes");
    TAP_OK(is(msg, 65, "1b3cd1877ab2f2f19f7be001722554f336cb799df0329de0bb4c118dc6abc06d"), "sha256 of 65 bytes");
    return tap_done();
}
